/** Log in with given credentials. */
import { on } from '../oracle-plan.ts';
import type { WebTaskType } from '../task-type.ts';
import { FIRST_NAMES, WORDS } from '../vocabulary.ts';

export const login: WebTaskType = {
  name: 'login',
  horizon: 5,
  generate(random) {
    const username = `${random.pick(FIRST_NAMES).toLowerCase()}${random.range(1, 99)}`;
    const password = `${random.pick(WORDS)}-${random.range(100, 999)}`;
    return {
      page: {
        title: 'Sign in',
        goal: `Log in as "${username}" with the password "${password}".`,
        body: `<h1>Sign in</h1><div><label for="user">Username</label> <input id="user" type="text"></div><div><label for="pass">Password</label> <input id="pass" type="password"></div><button id="login">Log in</button><p id="msg"></p>`,
        script: `document.getElementById('login').addEventListener('click', function () {
  var ok = document.getElementById('user').value === DATA.username && document.getElementById('pass').value === DATA.password;
  document.getElementById('msg').textContent = ok ? 'Welcome!' : 'Wrong username or password.';
  finish(ok);
});`,
        data: { username, password },
      },
      plan: [on('textbox', 'Username', { type: username }), on('password', 'Password', { type: password }), on('button', 'Log in', 'click')],
    };
  },
};

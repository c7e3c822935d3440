/** Fill a multi-field form (text fields, a drop-down, a consent checkbox) and submit it. */
import { on } from '../oracle-plan.ts';
import { esc, type WebTaskType } from '../task-type.ts';
import { COUNTRIES, FIRST_NAMES, LAST_NAMES } from '../vocabulary.ts';

export const fillForm: WebTaskType = {
  name: 'fill-form',
  horizon: 8,
  generate(random) {
    const first = random.pick(FIRST_NAMES);
    const last = random.pick(LAST_NAMES);
    const email = `${first.toLowerCase()}.${last.toLowerCase()}@example.org`;
    const country = random.pick(COUNTRIES);
    return {
      page: {
        title: 'Registration',
        goal: `Register ${first} ${last} (email ${email}, country ${country}), accept the terms and press Register.`,
        body: `<h1>Register</h1>
<div><label for="first">First name</label> <input id="first" type="text"></div>
<div><label for="last">Last name</label> <input id="last" type="text"></div>
<div><label for="email">Email</label> <input id="email" type="email"></div>
<div><label for="country">Country</label> <select id="country"><option>(choose)</option>${COUNTRIES.map((c) => `<option>${esc(c)}</option>`).join('')}</select></div>
<div><input id="terms" type="checkbox"><label for="terms">I accept the terms</label></div>
<button id="register">Register</button>`,
        script: `document.getElementById('register').addEventListener('click', function () {
  var v = function (id) { return document.getElementById(id).value; };
  var s = document.getElementById('country');
  finish(v('first') === DATA.first && v('last') === DATA.last && v('email') === DATA.email && s.options[s.selectedIndex].textContent === DATA.country && document.getElementById('terms').checked);
});`,
        data: { first, last, email, country },
      },
      plan: [
        on('textbox', 'First name', { type: first }),
        on('textbox', 'Last name', { type: last }),
        on('textbox', 'Email', { type: email }),
        on('select', 'Country', { select: country }),
        on('checkbox', 'I accept the terms', 'check'),
        on('button', 'Register', 'click'),
      ],
    };
  },
};

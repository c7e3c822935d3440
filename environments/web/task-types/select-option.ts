/** Choose an option from a drop-down and submit. */
import { on } from '../oracle-plan.ts';
import { esc, type WebTaskType } from '../task-type.ts';
import { COUNTRIES, WORDS, distinct } from '../vocabulary.ts';

export const selectOption: WebTaskType = {
  name: 'select-option',
  horizon: 4,
  generate(random) {
    const [label, list] = random.pick([['Country', COUNTRIES], ['Code word', WORDS]] as const);
    const options = distinct(random, list as readonly string[], random.range(4, 8));
    const target = random.pick(options.slice(1));
    return {
      page: {
        title: 'Drop-down',
        goal: `Select "${target}" as the ${label.toLowerCase()} and press Submit.`,
        body: `<label for="choice">${esc(label)}</label> <select id="choice">${options.map((o) => `<option>${esc(o)}</option>`).join('')}</select> <button id="submit">Submit</button>`,
        script: `document.getElementById('submit').addEventListener('click', function () { var s = document.getElementById('choice'); finish(s.options[s.selectedIndex].textContent === DATA.target); });`,
        data: { target },
      },
      plan: [on('select', label, { select: target }), on('button', 'Submit', 'click')],
    };
  },
};

/** Type a given word into a text field and submit. */
import { on } from '../oracle-plan.ts';
import type { WebTaskType } from '../task-type.ts';
import { WORDS } from '../vocabulary.ts';

export const enterText: WebTaskType = {
  name: 'enter-text',
  horizon: 4,
  generate(random) {
    const target = `${random.pick(WORDS)} ${random.pick(WORDS)}`;
    const field = random.pick(['Answer', 'Note', 'Message', 'Title']);
    return {
      page: {
        title: 'Text entry',
        goal: `Enter "${target}" into the ${field} field and press Submit.`,
        body: `<label for="field">${field}</label> <input id="field" type="text"> <button id="submit">Submit</button>`,
        script: `document.getElementById('submit').addEventListener('click', function () { finish(document.getElementById('field').value === DATA.target); });`,
        data: { target },
      },
      plan: [on('textbox', field, { type: target }), on('button', 'Submit', 'click')],
    };
  },
};

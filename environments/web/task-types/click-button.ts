/** Click the button with the given label, among several. */
import { on } from '../oracle-plan.ts';
import { esc, type WebTaskType } from '../task-type.ts';
import { WORDS, distinct } from '../vocabulary.ts';

export const clickButton: WebTaskType = {
  name: 'click-button',
  horizon: 3,
  generate(random) {
    const labels = distinct(random, WORDS, random.range(3, 6));
    const target = random.pick(labels);
    return {
      page: {
        title: 'Buttons',
        goal: `Click the button "${target}".`,
        body: `<h1>Pick one</h1><div>${labels.map((l) => `<button data-label="${esc(l)}">${esc(l)}</button>`).join(' ')}</div>`,
        script: `document.querySelectorAll('button').forEach(function (b) { b.addEventListener('click', function () { finish(b.getAttribute('data-label') === DATA.target); }); });`,
        data: { target },
      },
      plan: [on('button', target, 'click')],
    };
  },
};

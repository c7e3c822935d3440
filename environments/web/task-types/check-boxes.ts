/** Tick exactly the named checkboxes (some start ticked) and submit. */
import { on } from '../oracle-plan.ts';
import { esc, type OracleStep, type WebTaskType } from '../task-type.ts';
import { WORDS, distinct } from '../vocabulary.ts';

export const checkBoxes: WebTaskType = {
  name: 'check-boxes',
  horizon: 10,
  generate(random) {
    const labels = distinct(random, WORDS, random.range(4, 6));
    const wanted = labels.filter(() => random.float() < 0.5);
    if (wanted.length === 0) wanted.push(labels[0]);
    const initially = labels.filter(() => random.float() < 0.3);
    const plan: OracleStep[] = [];
    for (const l of labels) {
      if (wanted.includes(l) && !initially.includes(l)) plan.push(on('checkbox', l, 'check'));
      if (!wanted.includes(l) && initially.includes(l)) plan.push(on('checkbox', l, 'click'));
    }
    plan.push(on('button', 'Submit', 'click'));
    return {
      page: {
        title: 'Checkboxes',
        goal: `Select exactly these: ${wanted.join(', ')} (and nothing else), then press Submit.`,
        body: `<h2>Options</h2>${labels.map((l, i) => `<div><input type="checkbox" id="c${i}" value="${esc(l)}"${initially.includes(l) ? ' checked' : ''}><label for="c${i}">${esc(l)}</label></div>`).join('')}<button id="submit">Submit</button>`,
        script: `document.getElementById('submit').addEventListener('click', function () {
  var picked = []; document.querySelectorAll('input[type=checkbox]').forEach(function (c) { if (c.checked) picked.push(c.value); });
  finish(picked.sort().join(',') === DATA.wanted.slice().sort().join(','));
});`,
        data: { wanted },
      },
      plan,
    };
  },
};

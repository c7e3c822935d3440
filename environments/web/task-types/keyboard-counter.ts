/** A keyboard widget: focus a counter, set it with the arrow keys, confirm with Enter. */
import { on, until } from '../oracle-plan.ts';
import type { WebTaskType } from '../task-type.ts';

export const keyboardCounter: WebTaskType = {
  name: 'keyboard-counter',
  horizon: 10,
  generate(random) {
    const start = random.range(0, 9);
    let target = random.range(0, 9);
    if (target === start) target = (start + random.range(1, 4)) % 10;
    return {
      page: {
        title: 'Counter',
        goal: `Click the counter, set it to ${target} with the ArrowUp/ArrowDown keys, then press Enter.`,
        body: `<div id="counter" tabindex="0" aria-label="Counter"><span id="value"></span></div>`,
        script: `var value = DATA.start; var counter = document.getElementById('counter');
function show() { document.getElementById('value').textContent = 'Value: ' + value; }
counter.addEventListener('keydown', function (e) {
  if (e.key === 'ArrowUp') value = Math.min(9, value + 1);
  else if (e.key === 'ArrowDown') value = Math.max(0, value - 1);
  else if (e.key === 'Enter') finish(value === DATA.target);
  show();
});
show();`,
        data: { start, target },
      },
      plan: [
        on('widget', 'Counter', 'click'),
        until(
          (view) => view.texts.includes(`Value: ${target}`),
          (view) => {
            const shown = view.texts.find((t) => t.startsWith('Value: '));
            return { action: `press ${Number(shown?.slice(7)) < target ? 'ArrowUp' : 'ArrowDown'}`, advance: false };
          },
        ),
        () => ({ action: 'press Enter', advance: true }),
      ],
    };
  },
};

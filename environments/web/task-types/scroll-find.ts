/** A long page: the button to click is several screens down, so the agent must scroll to reach it. */
import { on } from '../oracle-plan.ts';
import { esc, type WebTaskType } from '../task-type.ts';
import { WORDS, distinct } from '../vocabulary.ts';

export const scrollFind: WebTaskType = {
  name: 'scroll-find',
  horizon: 8,
  generate(random) {
    const labels = distinct(random, WORDS, 4);
    const target = random.pick(labels);
    // Filler paragraphs with the buttons spread over the last part of the page.
    const blocks: string[] = [];
    for (let i = 0; i < 70; i++) blocks.push(`<p>Paragraph ${i + 1}: ${random.pick(WORDS)} ${random.pick(WORDS)} ${random.pick(WORDS)}.</p>`);
    labels.forEach((l, k) => blocks.splice(40 + k * 8 + random.int(6), 0, `<button data-label="${esc(l)}">${esc(l)}</button>`));
    return {
      page: {
        title: 'Long article',
        goal: `Find the button "${target}" further down the page and click it.`,
        body: `<h1>Article</h1>${blocks.join('')}`,
        script: `document.querySelectorAll('button').forEach(function (b) { b.addEventListener('click', function () { finish(b.getAttribute('data-label') === DATA.target); }); });`,
        data: { target },
      },
      plan: [on('button', target, 'click')],
    };
  },
};

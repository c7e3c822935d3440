/** Reorder a list with its move-up buttons into a given order, then save (a multi-step widget). */
import { findElement, on, until } from '../oracle-plan.ts';
import { esc, type WebTaskType } from '../task-type.ts';
import type { PageView } from '../page-view.ts';
import { WORDS, distinct } from '../vocabulary.ts';

/** The list as the page shows it: the item text lines, in order. */
function shownOrder(view: PageView, items: readonly string[]): string[] {
  return view.texts.filter((t) => items.includes(t));
}

export const reorderList: WebTaskType = {
  name: 'reorder-list',
  horizon: 14,
  generate(random) {
    const items: string[] = distinct(random, WORDS, random.range(3, 5));
    const wanted = random.shuffle([...items]);
    if (wanted.join() === items.join()) wanted.reverse();
    return {
      page: {
        title: 'Reorder',
        goal: `Put the list in this order, top to bottom: ${wanted.join(', ')}; then press Save.`,
        body: `<h2>Priorities</h2><ol id="list">${items.map((i) => `<li data-item="${esc(i)}"><span>${esc(i)}</span> <button aria-label="Move ${esc(i)} up">▲</button> <button aria-label="Move ${esc(i)} down">▼</button></li>`).join('')}</ol><button id="save">Save</button>`,
        script: `var list = document.getElementById('list');
list.querySelectorAll('li').forEach(function (li) {
  var buttons = li.querySelectorAll('button');
  buttons[0].addEventListener('click', function () { if (li.previousElementSibling) list.insertBefore(li, li.previousElementSibling); });
  buttons[1].addEventListener('click', function () { if (li.nextElementSibling) list.insertBefore(li.nextElementSibling, li); });
});
document.getElementById('save').addEventListener('click', function () {
  var order = []; list.querySelectorAll('li').forEach(function (li) { order.push(li.getAttribute('data-item')); });
  finish(order.join('|') === DATA.wanted.join('|'));
});`,
        data: { wanted },
      },
      plan: [
        until(
          (view) => shownOrder(view, items).join('|') === wanted.join('|'),
          (view) => {
            // Insertion by adjacent swaps: move up the first item that belongs above its upper neighbour.
            const order = shownOrder(view, items);
            const i = order.findIndex((item, k) => k > 0 && wanted.indexOf(item) < wanted.indexOf(order[k - 1]));
            const button = findElement(view, 'button', `Move ${order[i]} up`);
            return button ? { action: `click ${button.id}`, advance: false } : { action: 'scroll up', advance: false };
          },
        ),
        on('button', 'Save', 'click'),
      ],
    };
  },
};

/** Open the right tab of a tab strip and click a button that only that tab's panel shows. */
import { on } from '../oracle-plan.ts';
import { esc, type WebTaskType } from '../task-type.ts';
import { WORDS, distinct } from '../vocabulary.ts';

const TABS = ['Overview', 'Settings', 'Billing', 'Team', 'Security', 'Reports'];

export const navigateTabs: WebTaskType = {
  name: 'navigate-tabs',
  horizon: 4,
  generate(random) {
    const tabs = distinct(random, TABS, random.range(3, 4));
    const words = distinct(random, WORDS, tabs.length * 3);
    const panels = tabs.map((_, i) => words.slice(i * 3, i * 3 + 3));
    const t = random.int(tabs.length - 1) + 1;
    const target = random.pick(panels[t]);
    const strip = tabs.map((name, i) => `<div role="tab" data-tab="${i}" aria-selected="${i === 0}">${esc(name)}</div>`).join('');
    const body = panels.map((buttons, i) => `<div data-panel="${i}"${i === 0 ? '' : ' hidden'}>${buttons.map((b) => `<button data-tab="${i}" data-label="${esc(b)}">${esc(b)}</button>`).join(' ')}</div>`).join('');
    return {
      page: {
        title: 'Tabs',
        goal: `Open the "${tabs[t]}" tab and click "${target}".`,
        body: `<div role="tablist">${strip}</div>${body}`,
        script: `document.querySelectorAll('[role=tab]').forEach(function (tab) { tab.addEventListener('click', function () {
  document.querySelectorAll('[role=tab]').forEach(function (o) { o.setAttribute('aria-selected', String(o === tab)); });
  document.querySelectorAll('[data-panel]').forEach(function (p) { if (p.getAttribute('data-panel') === tab.getAttribute('data-tab')) p.removeAttribute('hidden'); else p.setAttribute('hidden', ''); });
}); });
document.querySelectorAll('button').forEach(function (b) { b.addEventListener('click', function () { finish(b.getAttribute('data-tab') === String(DATA.tab) && b.getAttribute('data-label') === DATA.target); }); });`,
        data: { tab: t, target },
      },
      plan: [on('tab', tabs[t], 'click'), on('button', target, 'click')],
    };
  },
};

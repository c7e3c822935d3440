/** Search a long catalogue (Enter or the Search button) and open the right result. */
import { on, press } from '../oracle-plan.ts';
import type { WebTaskType } from '../task-type.ts';
import { WORDS } from '../vocabulary.ts';

export const searchList: WebTaskType = {
  name: 'search-list',
  horizon: 6,
  generate(random) {
    const items = new Set<string>();
    while (items.size < 30) items.add(`${random.pick(WORDS)} ${random.pick(WORDS)}`);
    const catalogue = [...items];
    const target = random.pick(catalogue);
    const query = target.split(' ')[1];
    return {
      page: {
        title: 'Catalogue search',
        goal: `Find the item "${target}" in the catalogue and open it.`,
        body: `<h1>Catalogue</h1><input id="q" type="search" aria-label="Search"> <button id="go">Search</button><p id="count"></p><ul id="results"></ul>`,
        script: `function search() {
  var q = document.getElementById('q').value.trim().toLowerCase();
  var hits = DATA.catalogue.filter(function (name) { return q !== '' && name.indexOf(q) >= 0; });
  document.getElementById('count').textContent = hits.length + ' result(s)';
  var ul = document.getElementById('results'); ul.innerHTML = '';
  hits.forEach(function (name) {
    var li = document.createElement('li'); var a = document.createElement('a'); a.href = '#'; a.textContent = name;
    a.addEventListener('click', function (e) { e.preventDefault(); finish(name === DATA.target); });
    li.appendChild(a); ul.appendChild(li);
  });
}
document.getElementById('go').addEventListener('click', search);
document.getElementById('q').addEventListener('keydown', function (e) { if (e.key === 'Enter') search(); });`,
        data: { catalogue, target },
      },
      plan: [on('textbox', 'Search', { type: query }), press('Enter'), on('link', target, 'click')],
    };
  },
};

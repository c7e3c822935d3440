/** Pick a date in a calendar widget: open it, page through months, click the day, submit. */
import { findElement, on, until } from '../oracle-plan.ts';
import type { WebTaskType } from '../task-type.ts';
import { MONTHS } from '../vocabulary.ts';

const pad = (n: number) => String(n).padStart(2, '0');

export const datePicker: WebTaskType = {
  name: 'date-picker',
  horizon: 12,
  generate(random) {
    const year = random.range(2020, 2030);
    const month = random.int(12);
    const day = random.range(1, 28);
    const shift = random.pick([-3, -2, -1, 1, 2, 3]);
    const start = new Date(Date.UTC(year, month + shift, 1));
    const iso = `${year}-${pad(month + 1)}-${pad(day)}`;
    const heading = `${MONTHS[month]} ${year}`;
    const direction = shift > 0 ? 'Previous month' : 'Next month';
    return {
      page: {
        title: 'Date picker',
        goal: `Set the date to ${MONTHS[month]} ${day}, ${year} with the date picker and press Submit.`,
        body: `<p id="shown">Date: none</p><button id="open">Choose date</button>
<div id="calendar" hidden><button id="prev">Previous month</button> <h3 id="month"></h3> <button id="next">Next month</button><div id="days"></div></div>
<button id="submit">Submit</button>`,
        script: `var MONTHS = ${JSON.stringify(MONTHS)};
var view = { y: DATA.startYear, m: DATA.startMonth }; var picked = null;
function pad(n) { return (n < 10 ? '0' : '') + n; }
function render() {
  document.getElementById('month').textContent = MONTHS[view.m] + ' ' + view.y;
  var days = document.getElementById('days'); days.innerHTML = '';
  var count = new Date(Date.UTC(view.y, view.m + 1, 0)).getUTCDate();
  for (var d = 1; d <= count; d++) (function (d) {
    var b = document.createElement('button'); b.textContent = String(d);
    var iso = view.y + '-' + pad(view.m + 1) + '-' + pad(d);
    b.setAttribute('aria-label', iso);
    b.addEventListener('click', function () { picked = iso; document.getElementById('shown').textContent = 'Date: ' + iso; document.getElementById('calendar').setAttribute('hidden', ''); });
    days.appendChild(b);
  })(d);
}
function move(delta) { var t = new Date(Date.UTC(view.y, view.m + delta, 1)); view = { y: t.getUTCFullYear(), m: t.getUTCMonth() }; render(); }
document.getElementById('open').addEventListener('click', function () { render(); document.getElementById('calendar').removeAttribute('hidden'); });
document.getElementById('prev').addEventListener('click', function () { move(-1); });
document.getElementById('next').addEventListener('click', function () { move(1); });
document.getElementById('submit').addEventListener('click', function () { finish(picked === DATA.iso); });`,
        data: { iso, startYear: start.getUTCFullYear(), startMonth: start.getUTCMonth() },
      },
      plan: [
        on('button', 'Choose date', 'click'),
        until(
          (view) => view.texts.includes(heading),
          (view) => {
            const button = findElement(view, 'button', direction);
            return button ? { action: `click ${button.id}`, advance: false } : { action: 'scroll up', advance: false };
          },
        ),
        on('button', iso, 'click'),
        on('button', 'Submit', 'click'),
      ],
    };
  },
};

// The esopt dashboard: plain browser JavaScript over the API (bearer token from the URL fragment or local
// storage), uPlot for the curves, and the run's SSE stream (read with fetch, since EventSource cannot send
// an Authorization header) for live updates.
/* global uPlot */
'use strict';

const state = { token: null, runId: null, rows: [], evaluations: [], charts: {}, stream: null, evaluationId: null, evaluationList: [], replay: null, frameUrls: [], comparison: null };
window.esoptDashboard = state;

const $ = (sel) => document.querySelector(sel);
const fmt = (x, digits = 3) => (x === null || x === undefined ? '–' : Number(x).toFixed(digits));
const pct = (x) => (x === null || x === undefined ? '–' : `${(x * 100).toFixed(1)}%`);
const usd = (x) => (x === null || x === undefined ? '–' : `$${Number(x).toFixed(6)}`);

function showError(message) {
  const el = $('#error');
  el.textContent = message;
  el.hidden = !message;
}

async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: { ...(init.headers || {}), Authorization: `Bearer ${state.token}` } });
  if (res.status === 401) {
    localStorage.removeItem('esopt-token');
    askToken('The token was refused.');
    throw new Error('unauthorized');
  }
  const body = await res.json();
  if (!res.ok) throw new Error(body.error ? body.error.message : `HTTP ${res.status}`);
  return body;
}

function cell(text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function fillTable(selector, items, cellsOf, onClick, selectedId) {
  const body = $(`${selector} tbody`);
  body.replaceChildren(
    ...items.map((item) => {
      const tr = document.createElement('tr');
      tr.append(...cellsOf(item));
      if (item.id !== undefined) tr.dataset.id = item.id;
      if (item.iteration !== undefined) tr.dataset.iteration = item.iteration;
      if (item.index !== undefined) tr.dataset.index = item.index;
      if (onClick) {
        tr.className = `clickable${selectedId === item.id ? ' selected' : ''}`;
        tr.addEventListener('click', () => onClick(item));
      }
      return tr;
    }),
  );
}

// ---------------------------------------------------------------- boxes

/** One line: each box's boot state (GET /boxes), e.g. "boxes: trainer ready · replica-1 failed at token: …". */
async function loadBoxes() {
  const { boxes, unreadable } = await api('/boxes');
  const el = $('#boxes');
  const parts = boxes.map((b) => `${b.box} ${b.status === 'running' ? `booting (${b.step})` : b.status === 'failed' ? `failed at ${b.step}: ${b.error || ''}` : 'ready'} since ${b.at.slice(0, 19).replace('T', ' ')}Z`);
  for (const u of unreadable) parts.push(`${u.key} unreadable`);
  el.textContent = parts.length ? `boxes: ${parts.join(' · ')}` : '';
  el.className = boxes.some((b) => b.status === 'failed') ? 'error' : 'muted';
  el.hidden = !parts.length;
}

// ---------------------------------------------------------------- runs

/** Held-out success of the latest evaluation with its interval and iteration, e.g. "56.6% (50.5–62.6%) @30". */
function heldOutText(h) {
  if (!h) return '–';
  return `${pct(h.successRate)} (${pct(h.interval.low)}–${pct(h.interval.high)}) @${h.iteration}`;
}

/** ": message… (×count)" for the most common error, its message cut to `width` characters; "" without one. */
function topErrorText(e, width) {
  return e ? `: ${e.message.slice(0, width)}${e.message.length > width ? '…' : ''} (×${e.count})` : '';
}

/** Failed episodes of n and the most common error, e.g. "6 of 6: context_length_exceeded … (×6)"; "none" when none failed. */
function failuresText(s, n) {
  if (!s) return '–';
  const total = n === undefined ? s.tasks : n;
  if (!s.failed) return 'none';
  return `${s.failed} of ${total}${topErrorText(s.topError, 80)}`;
}

async function loadRuns() {
  const { runs } = await api('/runs?limit=500');
  fillTable(
    '#runs',
    runs,
    (r) => [
      cell(r.id, 'text'),
      cell(r.state, 'text'),
      cell(r.environment, 'text'),
      cell(`${r.completedIterations} / ${r.iterations}`),
      cell(heldOutText(r.heldOut)),
      cell(failuresText(r.heldOut), r.heldOut && r.heldOut.failed ? 'error' : undefined),
      cell(r.latest && r.latest.spent ? usd(r.latest.spent.usd) : '–'),
    ],
    (r) => selectRun(r.id),
    state.runId,
  );
  if (!state.runId && runs.length) await selectRun(runs[0].id);
}

/** A flat series (an untrained model's rewards are often all 0) still gets a readable axis around its value. */
function around(_u, min, max) {
  return min === max ? [min - 1, max + 1] : [min, max];
}

function chart(name, el, series, data, y) {
  if (state.charts[name]) {
    state.charts[name].setData(data);
    return;
  }
  const opts = {
    width: 540,
    height: 260,
    scales: { x: { time: false }, y },
    // Iterations are whole numbers: no ticks between them.
    axes: [{ label: 'iteration', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] }, {}],
    series: [{ label: 'iteration' }, ...series],
  };
  state.charts[name] = new uPlot(opts, data, el);
}

function drawCharts() {
  const rows = state.rows;
  const iterations = rows.map((r) => r.iteration);
  chart('reward', $('#reward-chart'), [
    { label: 'mean reward', stroke: '#2563eb', width: 2 },
    { label: 'max reward', stroke: '#93c5fd', dash: [4, 4] },
  ], [iterations, rows.map((r) => r.meanReward), rows.map((r) => r.maxReward)], { range: around });
  // The evaluation of θ_k sits at x = k; the final one (after the last update) at x = iterations.
  const evalAt = new Map(state.evaluations.map((e) => [e.iteration, e.successRate]));
  const xs = [...new Set([...iterations, ...state.evaluations.map((e) => e.iteration)])].sort((a, b) => a - b);
  const trainAt = new Map(rows.map((r) => [r.iteration, r.successRate]));
  chart('success', $('#success-chart'), [
    { label: 'train success', stroke: '#16a34a', width: 2 },
    { label: 'eval success', stroke: '#9333ea', width: 2, points: { show: true, size: 6 } },
  ], [xs, xs.map((x) => (trainAt.has(x) ? trainAt.get(x) : null)), xs.map((x) => (evalAt.has(x) ? evalAt.get(x) : null))], { range: [0, 1] });
}

function drawIterations() {
  fillTable('#iterations', state.rows, (r) => [
    cell(String(r.iteration), 'text'),
    cell(`${r.counted} / ${r.expected}`),
    cell(r.failed ? `${r.failed}${topErrorText(r.topError, 60)}` : '0', r.failed ? 'error' : undefined),
    cell(String(r.timedOut)),
    cell(fmt(r.meanReward)),
    cell(fmt(r.maxReward)),
    cell(pct(r.successRate)),
    cell(r.evaluation ? pct(r.evaluation.successRate) : '–'),
    cell(String(r.tokens.prompt + r.tokens.completion)),
    cell(usd(r.cost.usd)),
    cell(fmt(r.durations.total, 0)),
  ]);
}

function upsert(list, item, key) {
  const i = list.findIndex((x) => x[key] === item[key]);
  if (i >= 0) list[i] = item;
  else list.push(item);
  list.sort((a, b) => a[key] - b[key]);
}

async function selectRun(id) {
  // Re-selecting the shown run keeps what the user typed in its model form.
  const changed = state.runId !== id;
  state.runId = id;
  state.stream?.abort();
  const [detail, series] = await Promise.all([api(`/runs/${id}`), api(`/runs/${id}/metrics`)]);
  $('#run').hidden = false;
  $('#run-id').textContent = id;
  $('#run-state').textContent = detail.state;
  $('#run-instructions').textContent = instructionsText(detail.config.instructions, detail.config.tasks.suite);
  if (changed) {
    $('#model-iteration').value = '';
    $('#model-status').textContent = '';
  }
  state.rows = series.rows;
  state.evaluations = series.evaluations;
  drawCharts();
  drawIterations();
  document.querySelectorAll('#runs tbody tr').forEach((tr) => tr.classList.toggle('selected', tr.dataset.id === id));
  follow(id);
}

/**
 * Downloads θ_k of the selected run as a tarball: the route answers 202 while the archive is made (polled
 * here), then its URL: a presigned one (deployed: no token needed) or the route itself (fetched with it).
 */
async function downloadModel(event) {
  event.preventDefault();
  const run = state.runId;
  const k = $('#model-iteration').value;
  const query = `${k === '' ? '' : `iteration=${encodeURIComponent(k)}&`}format=${$('#model-format').value}`;
  const status = $('#model-status');
  try {
    for (;;) {
      const res = await fetch(`/runs/${run}/model?${query}`, { headers: { Accept: 'application/json', Authorization: `Bearer ${state.token}` } });
      const body = await res.json();
      if (!res.ok) throw new Error(body.error ? body.error.message : `HTTP ${res.status}`);
      if (res.status === 202) {
        status.textContent = `${body.state}…`;
        await new Promise((resolve) => setTimeout(resolve, 2000));
        continue;
      }
      status.textContent = `ready: ${(body.bytes / 1e6).toFixed(1)} MB, sha256 ${body.sha256.slice(0, 12)}…`;
      const link = document.createElement('a');
      if (/^https?:/.test(body.url)) link.href = body.url;
      else {
        const tar = await fetch(body.url, { headers: { Authorization: `Bearer ${state.token}` } });
        if (!tar.ok) throw new Error(`HTTP ${tar.status} downloading the archive`);
        link.href = URL.createObjectURL(await tar.blob());
      }
      link.download = `${run}-${body.iteration}-${body.format}.tar`;
      link.click();
      return;
    }
  } catch (err) {
    status.textContent = '';
    showError(`model download: ${err.message}`);
  }
}

/**
 * Reads the run's SSE stream; every event updates the page. A stream the server ends before the run's
 * `end` (the Lambda API closes each after a window) is resumed with Last-Event-ID after its `retry:`.
 */
async function follow(id) {
  const controller = new AbortController();
  state.stream = controller;
  $('#connection').textContent = 'live';
  let lastId = null;
  let retryMs = 1000;
  try {
    for (;;) {
      const headers = { Authorization: `Bearer ${state.token}` };
      if (lastId) headers['Last-Event-ID'] = lastId;
      const res = await fetch(`/runs/${id}/events`, { headers, signal: controller.signal });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let at;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const lines = buffer.slice(0, at).split('\n');
          buffer = buffer.slice(at + 2);
          const field = (name) => lines.filter((l) => l.startsWith(`${name}:`)).map((l) => l.slice(name.length + 1).trim());
          lastId = field('id').at(-1) ?? lastId;
          const retry = Number(field('retry').at(-1));
          if (Number.isInteger(retry) && retry >= 0) retryMs = retry;
          const data = field('data').join('\n');
          if (!data) continue;
          const event = JSON.parse(data);
          onEvent(event);
          if (event.type === 'end') {
            $('#connection').textContent = 'run over';
            return;
          }
        }
      }
      $('#connection').textContent = 'reconnecting';
      await new Promise((resolve) => setTimeout(resolve, retryMs));
      $('#connection').textContent = 'live';
    }
  } catch (err) {
    if (!controller.signal.aborted) $('#connection').textContent = `disconnected: ${err.message}`;
  }
}

function onEvent(event) {
  if (event.type === 'status' && event.status) $('#run-state').textContent = event.stopRequested && event.status.state === 'running' ? 'stopping' : event.status.state;
  if (event.type === 'iteration-started' || event.type === 'rewards') {
    $('#run-progress').textContent = `iteration ${event.iteration}: ${event.arrived ?? 0} / ${event.expected} rewards in`;
  }
  if (event.type === 'update-applied') {
    upsert(state.rows, event.row, 'iteration');
    $('#run-progress').textContent = `iteration ${event.iteration} applied: mean reward ${fmt(event.row.meanReward)}`;
    drawCharts();
    drawIterations();
  }
  if (event.type === 'evaluation') {
    upsert(state.evaluations, event.result, 'iteration');
    drawCharts();
  }
  if (event.type === 'end') {
    $('#run-state').textContent = event.state;
    loadRuns().catch((err) => showError(err.message));
  }
}

/** What every episode ran under: pushed instructions (name, manifest) and task suite, or the defaults. */
function instructionsText(instructions, suite) {
  const c = instructions ? `instructions ${instructions.name} (manifest ${instructions.manifest.slice(0, 12)})` : "instructions: each environment's own prompt";
  return suite ? `${c} · tasks from suite ${suite.name} (manifest ${suite.manifest.slice(0, 12)})` : c;
}

// ---------------------------------------------------------------- evaluations

function modelName(m) {
  if (m.kind === 'external') return `${m.model} @ ${new URL(m.baseUrl).host}`;
  if (m.kind === 'checkpoint') return `${m.run}${m.iteration === undefined ? '' : `@${m.iteration}`}`;
  return 'base';
}

async function loadEvaluations() {
  const { evaluations } = await api('/evaluations?limit=500');
  state.evaluationList = evaluations;
  fillTable(
    '#evaluations',
    evaluations,
    (e) => [
      cell(e.id, 'text'),
      cell(e.status.state, 'text'),
      cell(modelName(e.request.model), 'text'),
      cell(e.request.environment.name, 'text'),
      cell(`${e.summary.episodes} / ${e.request.episodes}`),
      cell(`${pct(e.summary.successRate)} (${pct(e.summary.interval.low)}–${pct(e.summary.interval.high)})`),
      cell(failuresText(e.summary, e.summary.episodes), e.summary.failed ? 'error' : undefined),
      cell(usd(e.summary.totalCostUsd)),
      cell(usd(e.summary.meanCostUsdPerEpisode)),
      cell(e.summary.stopReason ?? '–', 'text'),
    ],
    (e) => selectEvaluation(e.id),
    state.evaluationId,
  );
}

async function selectEvaluation(id) {
  state.evaluationId = id;
  const view = await api(`/evaluations/${id}`);
  $('#evaluation').hidden = false;
  $('#evaluation-id').textContent = id;
  $('#evaluation-note').textContent = view.summary.note;
  $('#evaluation-instructions').textContent = instructionsText(view.request.instructions, view.request.tasks.suite);
  fillTable('#episodes', view.episodes, (e) => [
    cell(String(e.index), 'text'),
    cell(e.task, 'text'),
    cell(fmt(e.reward)),
    cell(e.success ? 'yes' : 'no'),
    cell(String(e.steps)),
    cell(String(e.tokens.prompt + e.tokens.completion)),
    cell(fmt(e.durationMs, 0)),
    cell(usd(e.cost.usd)),
    cell(e.error ?? '', 'text'),
  ], (e) => selectEpisode(id, e.index).catch((err) => showReplayError(err.message)), null);
  document.querySelectorAll('#evaluations tbody tr').forEach((tr) => tr.classList.toggle('selected', tr.dataset.id === id));
  $('#replay').hidden = true;
  showCompareChoices(view);
}

// ---------------------------------------------------------------- an episode's replay

function showReplayError(message) {
  const el = $('#replay-error');
  el.textContent = message;
  el.hidden = !message;
  $('#replay').hidden = false;
}

function labelled(label, text, cls) {
  const p = document.createElement('p');
  p.className = 'label';
  p.textContent = label;
  const pre = document.createElement('pre');
  pre.className = cls;
  pre.textContent = text;
  return [p, pre];
}

/** One state of the episode: its screenshot beside what the agent was shown, the error it met, and what it did. */
function stepCard(s) {
  const li = document.createElement('li');
  li.className = 'step';
  li.dataset.step = s.step;
  const h = document.createElement('h4');
  h.textContent = `Step ${s.step}${s.step === 0 ? ' (after reset)' : ''}${s.done ? ' · done' : ''}${s.reward === null ? '' : ` · reward ${fmt(s.reward)}`}`;
  const picture = document.createElement('div');
  picture.className = 'frame';
  if (s.frame) {
    const img = document.createElement('img');
    img.alt = `screenshot of step ${s.step}`;
    picture.append(img);
  } else {
    picture.textContent = 'no screenshot';
    picture.classList.add('muted');
  }
  const text = document.createElement('div');
  text.append(...labelled('observation', s.observation, 'observation'));
  if (s.error) text.append(...labelled('error (of the action before)', s.error, 'step-error error'));
  text.append(...labelled('action', s.action ? s.action.text || JSON.stringify(s.action.toolCalls) : '— (none after this state)', 'action'));
  li.append(h, picture, text);
  return li;
}

/**
 * An <img> cannot send the Authorization header, so each frame is fetched with the token and shown from a
 * blob: URL (revoked when another episode is shown); the token never appears in a URL.
 */
async function showFrame(li, path) {
  const res = await fetch(path, { headers: { Authorization: `Bearer ${state.token}` } });
  if (!res.ok) throw new Error(`HTTP ${res.status} for ${path}`);
  const url = URL.createObjectURL(await res.blob());
  state.frameUrls.push(url);
  const img = li.querySelector('img');
  img.src = url;
  await img.decode();
}

async function selectEpisode(evaluationId, index) {
  // What another episode showed goes at once: a replay that fails to load must not leave it looking current.
  $('#replay-steps').replaceChildren();
  $('#replay-title').textContent = String(index);
  $('#replay-notes').textContent = '';
  const replay = await api(`/evaluations/${evaluationId}/episodes/${index}`);
  state.replay = replay;
  for (const url of state.frameUrls) URL.revokeObjectURL(url);
  state.frameUrls = [];
  const section = $('#replay');
  delete section.dataset.ready;
  showReplayError('');
  $('#replay-title').textContent = `${index} · task ${replay.task} · reward ${fmt(replay.reward)} · ${replay.success ? 'succeeded' : 'failed'}`;
  if (replay.error) showReplayError(replay.error);
  const notes = [];
  if (replay.frames) notes.push(`${replay.frames.kept} screenshot(s) kept${replay.frames.omitted ? `, ${replay.frames.omitted} left out: ${replay.frames.reasons.join('; ')}` : ''}`);
  else notes.push('no screenshots: this environment draws none');
  if (replay.truncated) notes.push(replay.truncated);
  $('#replay-notes').textContent = notes.join(' · ');
  $('#replay-system pre').textContent = replay.system ?? '';
  const cards = replay.steps.map(stepCard);
  $('#replay-steps').replaceChildren(...cards);
  document.querySelectorAll('#episodes tbody tr').forEach((tr) => tr.classList.toggle('selected', tr.dataset.index === String(index)));
  section.hidden = false;
  await Promise.all(replay.steps.map((s, i) => (s.frame ? showFrame(cards[i], s.frame) : null)));
  // Only the episode shown last says it is ready (a slower earlier one must not).
  if (state.replay === replay) section.dataset.ready = 'true';
}

// ---------------------------------------------------------------- comparing agents

/** Every evaluation as a choice; those with the selected one's environment and tasks request are ticked. */
function showCompareChoices(view) {
  const sameTasks = (e) => e.request.environment.name === view.request.environment.name && JSON.stringify(e.request.tasks) === JSON.stringify(view.request.tasks) && e.summary.episodes > 0;
  $('#compare-choices').replaceChildren(
    ...state.evaluationList.map((e) => {
      const label = document.createElement('label');
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.value = e.id;
      box.checked = e.id === view.id || sameTasks(e);
      label.append(box, ` ${e.id} (${modelName(e.request.model)})`);
      return label;
    }),
  );
  $('#compare-result').hidden = true;
  $('#compare-error').hidden = true;
}

async function compare(event) {
  event.preventDefault();
  // The selected evaluation first: it is the one the others are measured against (and refusals name).
  const ticked = [...document.querySelectorAll('#compare-choices input:checked')].map((b) => b.value);
  const ids = [...ticked.filter((id) => id === state.evaluationId), ...ticked.filter((id) => id !== state.evaluationId)];
  const error = $('#compare-error');
  error.hidden = true;
  $('#compare-result').hidden = true;
  try {
    const res = await fetch(`/evaluations/compare?ids=${ids.map(encodeURIComponent).join(',')}`, { headers: { Authorization: `Bearer ${state.token}` } });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error ? (body.error.issues || []).map((i) => i.message).join('; ') || body.error.message : `HTTP ${res.status}`);
    state.comparison = body;
    drawComparison(body);
  } catch (err) {
    error.textContent = `cannot compare: ${err.message}`;
    error.hidden = false;
  }
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(name, attrs, text) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/** Success (with its interval as a bar) against cost per episode; the frontier joined cheapest first. */
function drawComparison(c) {
  const W = 560;
  const H = 320;
  // Room on the right for the label of the costliest point.
  const m = { left: 56, right: 90, top: 16, bottom: 44 };
  const maxCost = Math.max(...c.evaluations.map((e) => e.meanCostUsdPerEpisode)) || 1;
  const x = (cost) => m.left + (cost / (maxCost * 1.1)) * (W - m.left - m.right);
  const y = (rate) => H - m.bottom - rate * (H - m.top - m.bottom);
  const root = svg('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'success against cost per episode' });
  root.append(svg('line', { x1: m.left, y1: y(0), x2: W - m.right, y2: y(0), stroke: '#9ca3af' }), svg('line', { x1: m.left, y1: y(0), x2: m.left, y2: y(1), stroke: '#9ca3af' }));
  for (const r of [0, 0.25, 0.5, 0.75, 1]) root.append(svg('text', { x: m.left - 6, y: y(r) + 4, 'text-anchor': 'end' }, pct(r)));
  for (const f of [0, 0.5, 1]) root.append(svg('text', { x: x(f * maxCost * 1.1), y: H - m.bottom + 16, 'text-anchor': 'middle' }, `$${(f * maxCost * 1.1).toPrecision(2)}`));
  root.append(svg('text', { x: (W + m.left) / 2, y: H - 8, 'text-anchor': 'middle' }, 'cost per episode (USD)'), svg('text', { x: 12, y: H / 2, transform: `rotate(-90 12 ${H / 2})`, 'text-anchor': 'middle' }, 'success rate'));
  const byId = new Map(c.evaluations.map((e) => [e.id, e]));
  const line = c.frontier.map((id) => byId.get(id)).map((e) => `${x(e.meanCostUsdPerEpisode)},${y(e.successRate)}`);
  if (line.length > 1) root.append(svg('polyline', { points: line.join(' '), fill: 'none', stroke: '#2563eb', 'stroke-dasharray': '4 3' }));
  for (const e of c.evaluations) {
    const cx = x(e.meanCostUsdPerEpisode);
    root.append(svg('line', { x1: cx, y1: y(e.interval.low), x2: cx, y2: y(e.interval.high), stroke: '#6b7280', 'stroke-width': 2 }));
    root.append(svg('circle', { cx, cy: y(e.successRate), r: 6, fill: e.frontier ? '#2563eb' : 'white', stroke: '#2563eb', 'stroke-width': 2, 'data-id': e.id, 'data-frontier': e.frontier }));
    root.append(svg('text', { x: cx + 9, y: y(e.successRate) - 6 }, e.id));
  }
  $('#compare-chart').replaceChildren(root);
  const s = c.suite;
  $('#compare-suite').textContent = `suite ${s.name}${s.manifest ? ` (manifest ${s.manifest.slice(0, 12)})` : ''} · ${s.tasks} ${s.environment} task(s), tasks sha256 ${s.tasksSha256.slice(0, 12)} · judge ${c.judge.environment} v${c.judge.version}, success at reward ≥ ${c.judge.successThreshold}`;
  fillTable('#comparison', c.evaluations, (e) => [
    cell(e.id, 'text'),
    cell(modelName(e.model), 'text'),
    cell(`${pct(e.successRate)} (${pct(e.interval.low)}–${pct(e.interval.high)})`),
    cell(`${e.successes} / ${e.episodes}`),
    cell(usd(e.meanCostUsdPerEpisode)),
    cell(e.frontier ? 'frontier' : `dominated by ${e.dominatedBy.join(', ')}`, 'text'),
  ]);
  $('#compare-result').hidden = false;
}

// ---------------------------------------------------------------- start

function askToken(message) {
  $('#token-form').hidden = false;
  showError(message || '');
}

async function start() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get('token');
  if (fromHash) {
    localStorage.setItem('esopt-token', fromHash);
    history.replaceState(null, '', location.pathname);
  }
  state.token = localStorage.getItem('esopt-token');
  if (!state.token) return askToken('');
  $('#token-form').hidden = true;
  try {
    await Promise.all([loadRuns(), loadEvaluations(), loadBoxes()]);
    showError('');
    document.body.dataset.ready = 'true';
  } catch (err) {
    if (err.message !== 'unauthorized') showError(err.message);
  }
}

$('#model-form').addEventListener('submit', downloadModel);
$('#compare-form').addEventListener('submit', compare);
$('#token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  localStorage.setItem('esopt-token', $('#token-input').value.trim());
  // A token pasted into the URL of an open page arrives as a fragment change, not a reload.
window.addEventListener('hashchange', start);
start();
});
// A token pasted into the URL of an open page arrives as a fragment change, not a reload.
window.addEventListener('hashchange', start);
start();

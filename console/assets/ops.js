// Operators: queues and gates per provider key, refreshed every few
// seconds while the page shows. It reads GET /v1/admin/status when the
// server has it, and falls back to the gauges of /metrics.
import { $, h, badge, dl, timeEl, fmtTime, fmtMicros, fmtInt, fmtDuration } from './dom.js';
import { api } from './api.js';
import { state } from './state.js';

// statusEndpoint: undefined until tried, then whether the server has it.
// gen counts refresh loops: a loop whose gen is stale stops.
const ops = { timer: null, paused: false, statusEndpoint: undefined, gen: 0 };

export function wire() {
  $('ops-toggle').addEventListener('click', () => {
    ops.paused = !ops.paused;
    updateOpsToggle();
    if (ops.paused) stopOps();
    else refreshOps();
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && state.active === 'ops' && !ops.paused) refreshOps();
  });
}

// reset stops refreshing and empties the page, for the next person to
// sign in.
export function reset() {
  stopOps();
  ops.statusEndpoint = undefined;
  $('ops-body').replaceChildren();
  $('ops-note').hidden = true;
  $('ops-updated').textContent = '';
}

export function enterOps() {
  ops.paused = false;
  updateOpsToggle();
  refreshOps();
}

export function stopOps() {
  clearTimeout(ops.timer);
  ops.timer = null;
  ops.gen++;
}

function updateOpsToggle() {
  const b = $('ops-toggle');
  b.setAttribute('aria-pressed', ops.paused ? 'true' : 'false');
  b.textContent = ops.paused ? 'Resume live updates' : 'Pause live updates';
}

const OPS_EVERY_MS = 5000;

async function refreshOps() {
  stopOps();
  const gen = ops.gen;
  if (state.active !== 'ops' || !state.session) return;
  if (!document.hidden) {
    try {
      let shown = false;
      if (ops.statusEndpoint !== false) {
        try {
          const st = await api('/v1/admin/status');
          if (gen !== ops.gen) return;
          ops.statusEndpoint = true;
          renderStatus(st);
          $('ops-note').hidden = true;
          shown = true;
        } catch (e) {
          if (![404, 405, 501].includes(e.status)) throw e;
          ops.statusEndpoint = false;
        }
      }
      if (!shown) {
        const text = await api('/metrics', { text: true });
        if (gen !== ops.gen) return;
        renderMetrics(parseMetrics(text));
        const note = $('ops-note');
        note.textContent = 'This server has no GET /v1/admin/status yet, so this page shows the queue and ' +
          'gate gauges from /metrics. Throttled keys show as “paused”; budgets near their limits are on the Finance page.';
        note.hidden = false;
      }
      $('ops-updated').textContent = `Updated ${fmtTime(new Date().toISOString())} UTC, every ${OPS_EVERY_MS / 1000} s.`;
    } catch (e) {
      if (e.status === 401 || gen !== ops.gen) return;
      const note = $('ops-note');
      note.textContent = 'Could not refresh: ' + e.message;
      note.hidden = false;
    }
  }
  if (gen === ops.gen && state.active === 'ops' && !ops.paused && state.session) {
    ops.timer = setTimeout(refreshOps, OPS_EVERY_MS);
  }
}

// parseMetrics reads the Prometheus text format: one sample a line.
function parseMetrics(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[2]) {
      for (const l of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
      }
    }
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

const GATES = {
  closed: ['closed', 'gate-closed', 'calls flow'],
  paused: ['paused', 'gate-paused', 'throttled: calls wait'],
  open: ['open', 'gate-open', 'breaker open: account exhausted'],
  idle: ['idle', 'gate-paused', 'breaker open, nothing waiting: the next task probes it'],
};

function renderMetrics(samples) {
  const keys = new Map();
  const get = (k) => {
    if (!keys.has(k)) keys.set(k, { key: k, depth: 0, oldest: 0, gate: '', opened: 0 });
    return keys.get(k);
  };
  for (const m of samples) {
    const k = m.labels.provider_key;
    if (k === undefined) continue;
    if (m.name === 'tollgate_queue_depth') get(k).depth = m.value;
    else if (m.name === 'tollgate_queue_oldest_seconds') get(k).oldest = m.value;
    else if (m.name === 'tollgate_provider_key_state' && m.value === 1) get(k).gate = m.labels.state;
    else if (m.name === 'tollgate_breaker_opened_total') get(k).opened = m.value;
  }
  const rank = { open: 0, paused: 1 };
  const rows = [...keys.values()].sort((a, b) =>
    ((rank[a.gate] ?? 2) - (rank[b.gate] ?? 2)) || (b.depth - a.depth) || a.key.localeCompare(b.key));
  const body = $('ops-body');
  const table = h('table', { id: 'ops-keys' },
    h('caption', null, 'Provider keys: queues and gates'),
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, 'Provider key'),
      h('th', { scope: 'col' }, 'Gate'),
      h('th', { scope: 'col', class: 'num' }, 'Waiting tasks'),
      h('th', { scope: 'col', class: 'num' }, 'Oldest waiting'),
      h('th', { scope: 'col', class: 'num' }, 'Breaker openings'))),
    h('tbody', null, rows.length ? rows.map((r) => {
      const gate = GATES[r.gate] || [r.gate || 'unknown', 'gate-unknown', ''];
      return h('tr', null,
        h('th', { scope: 'row' }, r.key),
        h('td', null, badge(gate[0], gate[1]), gate[2] ? h('span', { class: 'hint' }, ' ' + gate[2]) : null),
        h('td', { class: 'num' }, fmtInt(r.depth)),
        h('td', { class: 'num' }, r.depth > 0 ? fmtDuration(r.oldest) : '—'),
        h('td', { class: 'num' }, fmtInt(r.opened)));
    }) : h('tr', null, h('td', { colspan: '5' }, 'No provider key has reported yet.'))));
  body.replaceChildren(h('div', { class: 'table-wrap', role: 'region', 'aria-label': 'Provider keys', tabindex: '0' }, table));
}

// humanize turns a JSON name into a heading; units shown in the cells
// (micros as amounts, seconds as durations, percent) leave the name.
function humanize(k) {
  const t = String(k).replace(/_(micros|seconds|pct)$/, '').replace(/_/g, ' ');
  return t.charAt(0).toUpperCase() + t.slice(1);
}

// statusAt is the time of the status shown (its "at", the server's
// clock): a probe or a pause end before it is due, not a time to wait for.
let statusAt = NaN;

// EMPTY_WHEN_ZERO are ages that mean nothing for an empty queue.
const EMPTY_WHEN_ZERO = ['oldest_seconds', 'due_wait_seconds'];
// DUE_TIMES are times something happens next: past, it is due now.
const DUE_TIMES = ['next_probe_at', 'paused_until'];

// fmtScalar shows one value by what its name says it is.
function fmtScalar(key, v) {
  if (v === null || v === undefined) return '—';
  if (v === 0 && EMPTY_WHEN_ZERO.includes(key)) return '—';
  if (typeof v === 'string' && DUE_TIMES.includes(key) && Date.parse(v) <= statusAt) {
    return h('span', { class: 'due', title: v }, key === 'next_probe_at' ? 'due now' : 'ended');
  }
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (typeof v === 'object') return h('code', null, JSON.stringify(v));
  if (typeof v === 'number' && /_micros$/.test(key)) return fmtMicros(v);
  if (typeof v === 'number' && /(_seconds|_s)$/.test(key)) return fmtDuration(v);
  if (typeof v === 'number' && /_pct$/.test(key)) return `${v.toFixed(1)} %`;
  if (typeof v === 'string' && /(^at|_at|_start|_end|_until|time)$/.test(key) && !Number.isNaN(Date.parse(v))) return timeEl(v);
  if (key === 'state' && GATES[v]) return [badge(GATES[v][0], GATES[v][1]), h('span', { class: 'hint' }, ' ' + GATES[v][2])];
  return String(v);
}

// fmtCell is fmtScalar in a row: a task id links to the task.
function fmtCell(key, row) {
  const v = row[key];
  if (key === 'task_id' && typeof v === 'string') {
    if (typeof row.owner_id === 'string') state.ownerHints.set(v, row.owner_id);
    return h('a', { href: '#task/' + encodeURIComponent(v), class: 'mono' }, v);
  }
  return fmtScalar(key, v);
}

// renderStatus shows GET /v1/admin/status without knowing its exact
// shape: lists of objects become tables, objects become term lists.
function renderStatus(st) {
  statusAt = Date.parse(st && st.at);
  if (Number.isNaN(statusAt)) statusAt = Date.now();
  const body = $('ops-body');
  body.replaceChildren();
  if (st === null || typeof st !== 'object' || Array.isArray(st)) {
    body.append(h('pre', { class: 'json' }, JSON.stringify(st, null, 2)));
    return;
  }
  const scalars = [];
  for (const [k, v] of Object.entries(st)) {
    if (Array.isArray(v)) {
      body.append(h('section', null, h('h2', null, humanize(k)), genericTable(v, humanize(k))));
    } else if (v && typeof v === 'object') {
      body.append(h('section', null, h('h2', null, humanize(k)),
        dl(Object.entries(v).map(([kk, vv]) => [humanize(kk), fmtScalar(kk, vv)]))));
    } else {
      scalars.push([humanize(k), fmtScalar(k, v)]);
    }
  }
  if (scalars.length) body.prepend(dl(scalars));
}

function genericTable(rows, caption) {
  if (rows.length === 0) return h('p', { class: 'hint' }, 'None.');
  if (!rows.every((r) => r && typeof r === 'object' && !Array.isArray(r))) {
    return h('ul', null, rows.map((r) => h('li', null, fmtScalar('', r))));
  }
  const cols = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
  return h('div', { class: 'table-wrap', role: 'region', 'aria-label': caption, tabindex: '0' },
    h('table', null,
      h('caption', { class: 'visually-hidden' }, caption),
      h('thead', null, h('tr', null, cols.map((c) => h('th', { scope: 'col' }, humanize(c))))),
      h('tbody', null, rows.map((r) => h('tr', null, cols.map((c) => h('td', { class: typeof r[c] === 'number' ? 'num' : null }, fmtCell(c, r))))))));
}

// Finance: spend per day as a chart, tables by owner, workload and model
// whose totals are the API's own, budgets with utilisation bars, and the
// CSV of the window shown.
import { $, h, s, setBusy, fmtTime, fmtMicros, fmtAxis, fmtInt, isoDay } from './dom.js';
import { api, announce, fail, showError } from './api.js';
import { state } from './state.js';

let initialized = false;

export function wire() {
  $('finance-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadFinance(); });
}

// reset empties the page, for the next person to sign in.
export function reset() {
  initialized = false;
  $('finance-body').hidden = true;
  $('finance-summary').textContent = '';
  $('finance-form').reset();
}

const NUM_COLS = [
  ['Tasks', 'tasks', fmtInt],
  ['Input tokens', 'input_tokens', fmtInt],
  ['Output tokens', 'output_tokens', fmtInt],
  // Parts of the input and output totals, each priced apart.
  ['Cached input', 'cached_input_tokens', fmtInt],
  ['Cache writes', 'cache_write_tokens', fmtInt],
  ['Reasoning', 'reasoning_tokens', fmtInt],
  ['Cost', 'cost_micros', fmtMicros],
  ['Charged', 'charged_micros', fmtMicros],
  ['Shortfall', 'shortfall_micros', fmtMicros],
  ['Reported', 'reported_micros', fmtMicros],
  ['Estimated', 'estimated_micros', fmtMicros],
  ['Possibly charged', 'possibly_charged_micros', fmtMicros],
];

export function enterFinance() {
  if (initialized) return;
  initialized = true;
  const f = $('finance-form');
  const now = new Date();
  const to = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
  const from = new Date(to.getTime() - 30 * 86400000);
  f.elements.from.value = isoDay(from);
  f.elements.to.value = isoDay(to);
  loadFinance();
}

function financeParams() {
  const f = $('finance-form');
  const p = new URLSearchParams({ from: f.elements.from.value, to: f.elements.to.value });
  const owner = f.elements.owner.value.trim();
  if (owner) p.set('owner', owner);
  return p;
}

async function loadFinance() {
  const f = $('finance-form');
  if (!f.elements.from.value || !f.elements.to.value || f.elements.from.value >= f.elements.to.value) {
    showError('“From” must be a day before “To”.');
    return;
  }
  showError(null);
  const base = financeParams();
  $('csv-link').href = '/console/api/v1/usage.csv?' + base.toString();
  const report = (groupBy) => {
    const p = new URLSearchParams(base);
    p.set('group_by', groupBy);
    p.set('limit', '1'); // the groups and totals are what is shown; rows are in the CSV
    return api('/v1/usage?' + p.toString());
  };
  const body = $('finance-body');
  setBusy(body, true);
  try {
    const [byDay, byOwner, byWorkload, byModel] = await Promise.all([
      report('day'), report('owner'), report('owner,workload'), report('model')]);
    renderChart(byDay);
    renderDayTable(byDay);
    renderTotals(byDay.totals);
    renderGroupTable($('by-owner'), 'Spend by owner', [['Owner', (g) => g.owner_id]], byOwner);
    renderGroupTable($('by-workload'), 'Spend by workload',
      [['Owner', (g) => g.owner_id], ['Workload', (g) => g.workload || '(none)']], byWorkload);
    renderGroupTable($('by-model'), 'Spend by model', [['Model', (g) => g.model]], byModel);
    const t = byDay.totals;
    const summary = `${fmtInt(t.tasks)} settled task${t.tasks === 1 ? '' : 's'} from ${fmtTime(byDay.from)} to ` +
      `${fmtTime(byDay.to)} UTC: cost ${fmtMicros(t.cost_micros)}, charged ${fmtMicros(t.charged_micros)}.`;
    $('finance-summary').textContent = summary;
    body.hidden = false;
    // On a narrow screen the chart scrolls; start at the latest days.
    $('chart').scrollLeft = $('chart').scrollWidth;
    announce(summary);
    const owner = base.get('owner');
    const owners = owner ? [owner] : byOwner.groups.map((g) => g.owner_id).filter(Boolean);
    await loadBudgets(owners);
  } catch (e) {
    fail(e);
  } finally {
    setBusy(body, false);
  }
}

function dayRange(fromIso, toIso) {
  const from = new Date(fromIso);
  const to = new Date(toIso);
  const days = [];
  let t = Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate());
  while (t < to.getTime() && days.length <= 400) {
    days.push(isoDay(new Date(t)));
    t += 86400000;
  }
  return days.length > 400 ? null : days;
}

function niceCeil(v) {
  if (v <= 0) return 0;
  const e = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * e >= v) return m * e;
  return 10 * e;
}

function dayData(report) {
  const byDay = new Map(report.groups.map((g) => [String(g.period_start).slice(0, 10), g]));
  const days = dayRange(report.from, report.to) || [...byDay.keys()].sort();
  return days.map((day) => {
    const g = byDay.get(day) || {};
    return {
      day,
      tasks: g.tasks || 0,
      cost: g.cost_micros || 0,
      reported: g.reported_micros || 0,
      estimated: g.estimated_micros || 0,
      possibly: g.possibly_charged_micros || 0,
    };
  });
}

const SERIES = [
  ['reported', 'bar-reported', 'reported'],
  ['estimated', 'bar-estimated', 'estimated'],
  ['possibly', 'bar-possibly', 'possibly charged'],
];

// renderChart draws cost per day as inline SVG, stacked by source. The
// same figures are in the table under it, for keyboards and readers.
function renderChart(report) {
  const data = dayData(report);
  const max = Math.max(0, ...data.map((d) => d.reported + d.estimated + d.possibly));
  const top = niceCeil(max) || 1e6;
  const L = 72, R = 12, T = 12, B = 36, H = 280;
  const W = Math.max(720, L + R + data.length * 16);
  const plotW = W - L - R, plotH = H - T - B;
  const step = plotW / Math.max(1, data.length);
  const bw = Math.max(2, Math.min(40, step * 0.7));
  const y = (v) => T + plotH - (v / top) * plotH;
  const first = data.length ? data[0].day : '';
  const last = data.length ? data[data.length - 1].day : '';
  const svg = s('svg', {
    viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img',
    'aria-labelledby': 'chart-svg-title chart-svg-desc', preserveAspectRatio: 'xMinYMin meet',
  },
  s('title', { id: 'chart-svg-title' }, 'Cost per day, stacked by source'),
  s('desc', { id: 'chart-svg-desc' },
    `${data.length} days from ${first} to ${last}. Highest day ${fmtMicros(max)}. ` +
    `Total cost ${fmtMicros(report.totals.cost_micros)}. The figures are also in the table “Chart data as a table”.`));
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    svg.append(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: i === 0 ? 'axis' : 'grid' }));
    svg.append(s('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, fmtAxis(v)));
  }
  const every = Math.max(1, Math.ceil(data.length / 12));
  data.forEach((d, i) => {
    const x = L + i * step + (step - bw) / 2;
    const g = s('g', null, s('title', null,
      `${d.day}: reported ${fmtMicros(d.reported)}, estimated ${fmtMicros(d.estimated)}, ` +
      `possibly charged ${fmtMicros(d.possibly)}; cost ${fmtMicros(d.cost)}`));
    let acc = 0;
    for (const [key, cls] of SERIES) {
      const v = d[key];
      if (v > 0) {
        g.append(s('rect', { x, y: y(acc + v), width: bw, height: Math.max(0.5, y(acc) - y(acc + v)), class: cls }));
      }
      acc += v;
    }
    svg.append(g);
    if (i % every === 0) {
      svg.append(s('text', { x: x + bw / 2, y: H - B + 16, 'text-anchor': 'middle', class: 'tick' }, d.day.slice(5)));
    }
  });
  $('chart').replaceChildren(svg);
}

function renderDayTable(report) {
  const data = dayData(report);
  const t = report.totals;
  $('by-day').replaceChildren(
    h('caption', null, 'Cost per day (UTC)'),
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, 'Day'),
      h('th', { scope: 'col', class: 'num' }, 'Tasks'),
      h('th', { scope: 'col', class: 'num' }, 'Reported'),
      h('th', { scope: 'col', class: 'num' }, 'Estimated'),
      h('th', { scope: 'col', class: 'num' }, 'Possibly charged'),
      h('th', { scope: 'col', class: 'num' }, 'Cost'))),
    h('tbody', null, data.map((d) => h('tr', null,
      h('th', { scope: 'row' }, d.day),
      h('td', { class: 'num' }, fmtInt(d.tasks)),
      h('td', { class: 'num' }, fmtMicros(d.reported)),
      h('td', { class: 'num' }, fmtMicros(d.estimated)),
      h('td', { class: 'num' }, fmtMicros(d.possibly)),
      h('td', { class: 'num' }, fmtMicros(d.cost))))),
    h('tfoot', null, h('tr', null,
      h('th', { scope: 'row' }, 'Total'),
      h('td', { class: 'num' }, fmtInt(t.tasks)),
      h('td', { class: 'num' }, fmtMicros(t.reported_micros)),
      h('td', { class: 'num' }, fmtMicros(t.estimated_micros)),
      h('td', { class: 'num' }, fmtMicros(t.possibly_charged_micros)),
      h('td', { class: 'num' }, fmtMicros(t.cost_micros)))));
}

function renderTotals(t) {
  $('fin-totals').replaceChildren(...NUM_COLS.map(([label, key, fmt]) =>
    h('div', { 'data-total': key }, h('dt', null, label), h('dd', null, fmt(t[key])))));
}

function renderGroupTable(table, caption, labelCols, report) {
  const groups = [...report.groups].sort((a, b) => (b.cost_micros - a.cost_micros) ||
    String(labelCols.map(([, f]) => f(a)).join('/')).localeCompare(labelCols.map(([, f]) => f(b)).join('/')));
  // The footer is the API's totals, not a sum made here; say so if the
  // groups ever disagree with it.
  const off = NUM_COLS.filter(([, k]) => groups.reduce((acc, g) => acc + (g[k] || 0), 0) !== report.totals[k]);
  const rows = groups.map((g) => h('tr', null,
    labelCols.map(([, f], i) => (i === 0 ? h('th', { scope: 'row' }, f(g)) : h('td', null, f(g)))),
    NUM_COLS.map(([, k, fmt]) => h('td', { class: 'num' }, fmt(g[k])))));
  if (rows.length === 0) {
    rows.push(h('tr', null, h('td', { colspan: String(labelCols.length + NUM_COLS.length) }, 'No settled usage in this window.')));
  }
  table.replaceChildren(
    h('caption', null, caption, off.length ? h('span', { class: 'warn-text' }, ' — the rows do not add up to the API’s totals') : null),
    h('thead', null, h('tr', null,
      labelCols.map(([label]) => h('th', { scope: 'col' }, label)),
      NUM_COLS.map(([label]) => h('th', { scope: 'col', class: 'num' }, label)))),
    h('tbody', null, rows),
    h('tfoot', null, h('tr', null,
      h('th', { scope: 'row', colspan: String(labelCols.length) }, 'Total'),
      NUM_COLS.map(([, k, fmt]) => h('td', { class: 'num' }, fmt(report.totals[k]))))));
}

async function mapLimit(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

const MAX_BUDGET_OWNERS = 50;

async function loadBudgets(owners) {
  const thresholds = (state.session && state.session.alert_thresholds) || [];
  const list = owners.slice(0, MAX_BUDGET_OWNERS);
  let note = thresholds.length ?
    `Marks on each bar are the alert thresholds: ${thresholds.join(' % and ')} % of the period's total spent. ` : '';
  note += 'The lighter part of a bar is reserved for tasks still running.';
  if (owners.length > list.length) note += ` Showing the first ${list.length} of ${owners.length} owners.`;
  $('budgets-note').textContent = note;
  const results = await mapLimit(list, 4, async (owner) => {
    try {
      return { owner, budget: await api('/v1/budgets/' + encodeURIComponent(owner)) };
    } catch (e) {
      if (e.status === 401) throw e;
      return { owner, error: e };
    }
  });
  const rows = [];
  for (const r of results) {
    if (r.error) {
      const text = r.error.status === 404 ? 'No budget set.' : r.error.message;
      rows.push(h('tr', null, h('th', { scope: 'row' }, r.owner), h('td', { colspan: '7' }, text)));
      continue;
    }
    for (const b of r.budget.budgets) {
      const period = b.period === 'none' ? 'no period' :
        `${b.period}, ${fmtTime(b.period_start).slice(0, 10)} to ${b.period_end ? fmtTime(b.period_end).slice(0, 10) : '—'}`;
      rows.push(h('tr', null,
        h('th', { scope: 'row' }, b.owner_id),
        h('td', null, b.workload || '(owner cap)'),
        h('td', null, period),
        h('td', { class: 'num' }, fmtMicros(b.spent_micros)),
        h('td', { class: 'num' }, fmtMicros(b.reserved_micros)),
        h('td', { class: 'num' }, fmtMicros(b.total_micros)),
        h('td', { class: 'num' }, fmtMicros(b.remaining_micros)),
        h('td', { class: 'util-col' }, utilBar(b, thresholds))));
    }
  }
  if (rows.length === 0) rows.push(h('tr', null, h('td', { colspan: '8' }, 'No owners in this window.')));
  $('budgets').replaceChildren(
    h('caption', null, 'Budgets in their current period'),
    h('thead', null, h('tr', null,
      ['Owner', 'Workload', 'Period'].map((t) => h('th', { scope: 'col' }, t)),
      ['Spent', 'Reserved', 'Total', 'Remaining'].map((t) => h('th', { scope: 'col', class: 'num' }, t)),
      h('th', { scope: 'col' }, 'Utilisation'))),
    h('tbody', null, rows));
}

const clampPct = (v) => Math.max(0, Math.min(100, v));

function utilBar(b, thresholds) {
  const total = Number(b.total_micros) || 0;
  const spent = Number(b.spent_micros) || 0;
  const reserved = Number(b.reserved_micros) || 0;
  const pct = total > 0 ? (spent / total) * 100 : spent > 0 ? 100 : 0;
  const rpct = total > 0 ? (reserved / total) * 100 : 0;
  const crossed = thresholds.filter((t) => pct >= t);
  const level = crossed.length === 0 ? 'ok' : crossed.length === thresholds.length ? 'alert' : 'warn';
  const label = `${b.owner_id} ${b.workload || 'owner cap'}`;
  const bar = h('div', {
    class: 'util util-' + level, role: 'meter', 'aria-label': 'Utilisation of ' + label,
    'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': pct.toFixed(1),
    'aria-valuetext': `${pct.toFixed(1)} % spent, ${rpct.toFixed(1)} % reserved`,
  });
  const spentEl = h('span', { class: 'util-spent' });
  spentEl.style.width = clampPct(pct) + '%';
  const resEl = h('span', { class: 'util-reserved' });
  resEl.style.left = clampPct(pct) + '%';
  resEl.style.width = Math.min(clampPct(rpct), 100 - clampPct(pct)) + '%';
  bar.append(spentEl, resEl);
  for (const t of thresholds) {
    const mark = h('span', { class: 'util-mark', title: `Alert at ${t} %` });
    mark.style.left = clampPct(t) + '%';
    bar.append(mark);
  }
  const text = `${pct.toFixed(1)} %` + (crossed.length ? ` · past the ${crossed[crossed.length - 1]} % alert` : '');
  return h('div', { class: 'util-cell' }, bar, h('span', { class: 'util-text' }, text));
}

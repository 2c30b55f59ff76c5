// The list pages: support's search of replay records, a client's own
// tasks and the admin's audit log. Each row links to #task/{id} and
// records the task's owner, so that opening it knows whether to ask for a
// reason first.
import { $, h, badge, statusBadge, setBusy, timeEl, idLink, fmtMicros } from './dom.js';
import { api, announce, fail, showError } from './api.js';
import { state } from './state.js';

let search = { params: null, cursor: null, loaded: false };
let tasks = { cursor: null, loaded: false };
let audit = { params: null, cursor: null, loaded: false };

export function wire() {
  $('search-form').addEventListener('submit', (ev) => { ev.preventDefault(); runSearch(false); });
  $('search-more').addEventListener('click', () => runSearch(true));
  $('search-form').addEventListener('reset', () => setTimeout(() => runSearch(false)));
  $('tasks-more').addEventListener('click', () => loadTasks(true));
  $('tasks-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadTasks(false); });
  $('tasks-form').addEventListener('reset', () => setTimeout(() => loadTasks(false)));
  $('audit-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadAudit(false); });
  $('audit-more').addEventListener('click', () => loadAudit(true));
}

// reset forgets every list, for the next person to sign in.
export function reset() {
  search = { params: null, cursor: null, loaded: false };
  tasks = { cursor: null, loaded: false };
  audit = { params: null, cursor: null, loaded: false };
  for (const id of ['search-results', 'tasks-table', 'audit-table']) $(id).tBodies[0].replaceChildren();
  for (const id of ['search-more', 'tasks-more', 'audit-more']) $(id).hidden = true;
  $('search-summary').textContent = '';
  $('search-form').reset();
  $('tasks-form').reset();
  $('audit-form').reset();
}

// Support: search replay records.

// The landing shows the most recent tasks, before any search.
export function enterSupport() {
  state.listView = 'support';
  if (!search.loaded) runSearch(false);
}

const costCell = (m) => h('td', { class: 'num' }, m === null || m === undefined ? '—' : fmtMicros(m));

// utcParam turns a datetime-local value, read as UTC, into RFC 3339.
function utcParam(v) {
  if (!v) return '';
  return v.length === 16 ? v + ':00Z' : v + 'Z';
}

async function runSearch(more) {
  const f = $('search-form');
  if (!more) {
    const p = new URLSearchParams();
    const set = (k, v) => { if (v) p.set(k, v); };
    set('owner', f.elements.owner.value.trim());
    set('from', utcParam(f.elements.from.value));
    set('to', utcParam(f.elements.to.value));
    set('status', f.elements.status.value);
    set('model', f.elements.model.value.trim());
    set('q', f.elements.q.value.trim());
    p.set('limit', '50');
    search = { params: p, cursor: null };
  }
  if (!search.params) return;
  const p = new URLSearchParams(search.params);
  if (more && search.cursor) p.set('cursor', search.cursor);
  const table = $('search-results');
  setBusy(table, true);
  showError(null);
  try {
    const data = await api('/v1/replays?' + p.toString());
    search.loaded = true;
    const tbody = table.tBodies[0];
    if (!more) tbody.replaceChildren();
    for (const r of data.data) {
      state.ownerHints.set(r.task_id, r.owner_id);
      tbody.append(h('tr', null,
        h('td', null, timeEl(r.created_at)),
        h('td', null, idLink(r.task_id)),
        h('td', null, r.owner_id),
        h('td', { class: 'mono wrap' }, r.idempotency_key),
        h('td', null, r.model),
        h('td', null, statusBadge(r.status), r.erased ? [' ', badge('erased', 'badge-muted')] : null),
        costCell(r.cost_micros),
        h('td', { class: 'num' }, String(r.attempts)),
        h('td', null, timeEl(r.finished_at))));
    }
    search.cursor = data.next_cursor;
    $('search-more').hidden = !data.next_cursor;
    const n = tbody.rows.length;
    const what = [...search.params.keys()].some((k) => k !== 'limit') ? 'matching' : 'most recent';
    const summary = n === 0 ? 'No records match.' :
      `${n} ${what} record${n === 1 ? '' : 's'} shown${data.next_cursor ? '; more are available' : ''}.`;
    $('search-summary').textContent = summary;
    announce(summary);
  } catch (e) {
    fail(e);
  } finally {
    setBusy(table, false);
  }
}

// A client's own tasks.

export function enterTasks() {
  state.listView = 'tasks';
  if (!tasks.loaded) loadTasks(false);
}

// dayParam turns a date input's day into the start of that UTC day;
// "to" days are inclusive, so created_before is the next day's start.
function dayParam(v, next) {
  if (!v) return '';
  const d = new Date(v + 'T00:00:00Z');
  if (Number.isNaN(d.getTime())) return '';
  if (next) d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString().replace('.000Z', 'Z');
}

function taskFilters() {
  const f = $('tasks-form');
  const p = new URLSearchParams({ limit: '50' });
  const set = (k, v) => { if (v) p.set(k, v); };
  set('status', f.elements.status.value);
  set('model', f.elements.model.value.trim());
  set('created_after', dayParam(f.elements.from.value, false));
  set('created_before', dayParam(f.elements.to.value, true));
  return p;
}

async function loadTasks(more) {
  if (!more) tasks.params = taskFilters();
  const p = new URLSearchParams(tasks.params || taskFilters());
  if (more && tasks.cursor) p.set('cursor', tasks.cursor);
  const table = $('tasks-table');
  setBusy(table, true);
  try {
    const data = await api('/v1/tasks?' + p.toString());
    tasks.loaded = true;
    const tbody = table.tBodies[0];
    if (!more) tbody.replaceChildren();
    for (const t of data.data) {
      state.ownerHints.set(t.id, state.session.owner_id);
      const status = [statusBadge(t.status)];
      if (t.error && t.error.message) status.push(h('div', { class: 'hint' }, t.error.message));
      tbody.append(h('tr', null,
        h('td', null, timeEl(t.created_at)),
        h('td', null, idLink(t.id)),
        h('td', null, status),
        h('td', null, t.model),
        costCell(t.cost_micros),
        h('td', { class: 'num' }, String(t.attempts)),
        h('td', { class: 'mono wrap' }, t.idempotency_key),
        h('td', null, timeEl(t.finished_at))));
    }
    if (tbody.rows.length === 0) {
      tbody.append(h('tr', null, h('td', { colspan: '8' }, [...tasks.params.keys()].some((k) => k !== 'limit') ? 'No task matches.' : 'No tasks yet.')));
    }
    tasks.cursor = data.next_cursor;
    $('tasks-more').hidden = !data.next_cursor;
  } catch (e) {
    fail(e);
  } finally {
    setBusy(table, false);
  }
}

// Admin: audited reads of replay records.

export function enterAudit() {
  state.listView = 'audit';
  if (!audit.loaded) loadAudit(false);
}

async function loadAudit(more) {
  const f = $('audit-form');
  if (!more) {
    const p = new URLSearchParams();
    const task = f.elements.task_id.value.trim();
    const owner = f.elements.owner.value.trim();
    if (task) p.set('task_id', task);
    if (owner) p.set('owner', owner);
    audit.params = p;
  }
  const p = new URLSearchParams(audit.params);
  if (more && audit.cursor) p.set('cursor', audit.cursor);
  const table = $('audit-table');
  setBusy(table, true);
  try {
    const data = await api('/v1/audit?' + p.toString());
    audit.loaded = true;
    const tbody = table.tBodies[0];
    if (!more) tbody.replaceChildren();
    for (const a of data.data) {
      state.ownerHints.set(a.task_id, a.owner_id);
      tbody.append(h('tr', null,
        h('td', null, timeEl(a.accessed_at)),
        h('td', null, idLink(a.task_id)),
        h('td', null, a.owner_id),
        h('td', null, a.actor_owner),
        h('td', null, a.actor_role),
        h('td', { class: 'mono' }, a.actor_key_id),
        h('td', { class: 'wrap' }, a.reason)));
    }
    if (tbody.rows.length === 0) tbody.append(h('tr', null, h('td', { colspan: '7' }, 'No audited reads.')));
    audit.cursor = data.next_cursor;
    $('audit-more').hidden = !data.next_cursor;
  } catch (e) {
    fail(e);
  } finally {
    setBusy(table, false);
  }
}

// Admin: the API keys (GET /v1/keys, never a secret) and the rate
// limits (GET /v1/limits, when the server has it).
import { $, h, badge, timeEl, fmtInt } from './dom.js';
import { api, fail } from './api.js';

let loaded = false;

export function wire() {
  $('keys-reload').addEventListener('click', () => loadKeys());
}

// reset empties the page, for the next person to sign in.
export function reset() {
  loaded = false;
  $('keys-table').tBodies[0].replaceChildren();
  $('limits-body').replaceChildren();
}

export function enterKeys() {
  if (!loaded) loadKeys();
}

async function loadKeys() {
  loaded = true;
  await Promise.all([renderKeys(), renderLimits()]);
}

function keyState(k) {
  if (k.revoked_at) return badge('revoked', 'badge-muted');
  if (k.expires_at && Date.parse(k.expires_at) <= Date.now()) return badge('expired', 'badge-muted');
  return badge('active', 'status-succeeded');
}

async function renderKeys() {
  const tbody = $('keys-table').tBodies[0];
  try {
    const data = await api('/v1/keys');
    const keys = Array.isArray(data) ? data : data.data || [];
    tbody.replaceChildren(...keys.map((k) => h('tr', { 'data-key-id': k.id },
      h('td', null, h('span', { class: 'mono id-short', title: k.id }, k.id)),
      h('td', null, k.owner),
      h('td', null, k.role),
      h('td', null, k.workload || '—'),
      h('td', null, k.name || '—'),
      h('td', { class: 'mono' }, k.prefix ? k.prefix + '…' : '—'),
      h('td', null, keyState(k)),
      h('td', null, timeEl(k.created_at)),
      h('td', null, timeEl(k.expires_at)),
      h('td', null, timeEl(k.last_used_at)))));
    if (keys.length === 0) tbody.append(h('tr', null, h('td', { colspan: '10' }, 'No keys.')));
  } catch (e) {
    fail(e);
  }
}

const perMinute = (v) => (v === null || v === undefined ? 'unlimited' : fmtInt(v) + ' / min');

function limitRows(owner, l) {
  const rows = [h('tr', null, h('th', { scope: 'row' }, owner), h('td', null, '(owner)'),
    h('td', { class: 'num' }, perMinute(l.requests_per_minute)), h('td', { class: 'num' }, perMinute(l.tokens_per_minute)))];
  for (const [name, w] of Object.entries(l.workloads || {})) {
    rows.push(h('tr', null, h('th', { scope: 'row' }, owner), h('td', null, name),
      h('td', { class: 'num' }, perMinute(w.requests_per_minute)), h('td', { class: 'num' }, perMinute(w.tokens_per_minute))));
  }
  return rows;
}

// renderLimits reads every owner's limits. The answer may be a list of
// {owner, ...limits} or a map owner -> limits.
async function renderLimits() {
  const box = $('limits-body');
  let data;
  try {
    data = await api('/v1/limits');
  } catch (e) {
    if (e.status === 404 || e.status === 405) {
      box.replaceChildren(h('p', { id: 'limits-none', class: 'hint' }, 'This server has no rate limits API (GET /v1/limits).'));
      return;
    }
    fail(e);
    return;
  }
  const list = Array.isArray(data) ? data : Array.isArray(data && data.data) ? data.data :
    Object.entries(data || {}).map(([owner, l]) => ({ owner, ...l }));
  const rows = list.flatMap((l) => limitRows(l.owner || l.owner_id, l));
  box.replaceChildren(h('div', { class: 'table-wrap', role: 'region', 'aria-label': 'Rate limits', tabindex: '0' },
    h('table', { id: 'limits-table' },
      h('caption', null, 'Rate limits per owner and workload; absent means unlimited'),
      h('thead', null, h('tr', null, ['Owner', 'Workload'].map((t) => h('th', { scope: 'col' }, t)),
        ['Requests', 'Tokens'].map((t) => h('th', { scope: 'col', class: 'num' }, t)))),
      h('tbody', null, rows.length ? rows : h('tr', null, h('td', { colspan: '4' }, 'No owner has a rate limit.'))))));
}

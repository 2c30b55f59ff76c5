// DOM building and formatting. Data is only ever inserted as text
// (textContent or text nodes), never as markup.

export const $ = (id) => document.getElementById(id);
const SVG_NS = 'http://www.w3.org/2000/svg'; // a namespace name, never fetched
// Redaction placeholders: [EMAIL_1], [SECRET_2], [MY_RULE_3].
const PLACEHOLDER = /\[([A-Z][A-Z0-9_-]*)_(\d+)\]/g;

export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(node, attrs, children) {
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') node.setAttribute('class', v);
      else node.setAttribute(k, v === true ? '' : String(v));
    }
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

export function dlItems(pairs) {
  return pairs.map(([k, v]) => h('div', null, h('dt', null, k),
    h('dd', null, v === null || v === undefined || v === '' ? '—' : v)));
}

export function dl(pairs, cls) {
  return h('dl', { class: cls || 'meta' }, dlItems(pairs));
}

export function badge(text, cls) {
  return h('span', { class: 'badge ' + (cls || '') }, text);
}

export function statusBadge(status) {
  const known = ['queued', 'running', 'succeeded', 'failed', 'canceled'];
  return badge(status, 'status-' + (known.includes(status) ? status : 'other'));
}

// highlighted returns text with redaction placeholders wrapped in <mark>.
export function highlighted(text) {
  const frag = document.createDocumentFragment();
  const str = String(text ?? '');
  let last = 0;
  for (const m of str.matchAll(PLACEHOLDER)) {
    frag.append(str.slice(last, m.index));
    frag.append(h('mark', { class: 'redacted', title: 'Redacted: ' + m[1].toLowerCase() }, m[0]));
    last = m.index + m[0].length;
  }
  frag.append(str.slice(last));
  return frag;
}

export function setBusy(node, on) {
  node.setAttribute('aria-busy', on ? 'true' : 'false');
  node.classList.toggle('busy', on);
}

// Formatting. Times are shown in UTC, like the API and the logs.

export const pad = (n, w = 2) => String(n).padStart(w, '0');

export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

export function timeEl(iso) {
  return iso ? h('time', { datetime: iso, title: iso }, fmtTime(iso)) : '—';
}

// fmtMicros writes micro-units exactly, with six decimal places, so that
// figures match the API's to the last digit.
export function fmtMicros(m) {
  const n = Number(m) || 0;
  const a = Math.abs(n);
  const frac = a % 1e6;
  const whole = (a - frac) / 1e6;
  return (n < 0 ? '-' : '') + whole.toLocaleString('en-US') + '.' + pad(frac, 6);
}

// fmtAxis writes an axis label: short, not exact.
export function fmtAxis(m) {
  return String(Number((m / 1e6).toFixed(6)));
}

export const fmtInt = (n) => (Number(n) || 0).toLocaleString('en-US');

export function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(2)} s`;
  return fmtDuration(ms / 1000);
}

export function fmtDuration(sec) {
  const t = Math.max(0, Math.round(Number(sec) || 0));
  if (t < 60) return `${t} s`;
  if (t < 3600) return `${Math.floor(t / 60)} min ${t % 60} s`;
  if (t < 86400) return `${Math.floor(t / 3600)} h ${Math.floor((t % 3600) / 60)} min`;
  return `${Math.floor(t / 86400)} d ${Math.floor((t % 86400) / 3600)} h`;
}

export const isoDay = (d) => d.toISOString().slice(0, 10);

// idLink links to a task by an id that fits one line: the cell shows its
// start, the title and the copy hold all of it.
export function idLink(id) {
  return h('a', { href: '#task/' + encodeURIComponent(id), class: 'mono id-short', title: id }, id);
}

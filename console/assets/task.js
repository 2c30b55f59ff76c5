// One task: its timeline, its stored request and its replay record side
// by side, and a ready curl for the replay endpoint. Opening another
// owner's record asks for a reason first (X-Reason), which the API
// audits.
import { $, h, badge, dl, dlItems, statusBadge, highlighted, setBusy, timeEl, fmtTime, fmtMs, fmtInt, fmtMicros } from './dom.js';
import { api, announce, fail } from './api.js';
import { state, defaultView } from './state.js';

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

// taskGen counts openings: an answer for an earlier one is dropped.
let taskGen = 0;

// reset empties the page, for the next person to sign in.
export function reset() {
  taskGen++;
  clearTask();
}

let reasonResolve = null;

// askReason opens the reason dialog; it resolves to the reason, or null
// when the user cancels.
function askReason(owner) {
  const dlg = $('reason-dialog');
  const text = $('reason-text');
  $('reason-owner').textContent = owner ?
    `This record belongs to the owner “${owner}”. Opening it is recorded in the audit log, with your key and the reason you give.` :
    'This record belongs to another owner. Opening it is recorded in the audit log, with your key and the reason you give.';
  text.value = '';
  text.setCustomValidity('');
  dlg.returnValue = '';
  return new Promise((resolve) => {
    reasonResolve = resolve;
    dlg.showModal();
    text.focus();
  });
}

function normalizedReason() {
  return $('reason-text').value.replace(/\s+/g, ' ').trim();
}

export function wire() {
  const dlg = $('reason-dialog');
  const text = $('reason-text');
  $('reason-form').addEventListener('submit', (ev) => {
    const v = normalizedReason();
    let problem = '';
    if (v.length < 3 || v.length > 500) problem = 'Give a reason of 3 to 500 characters.';
    // A header carries plain ASCII only.
    else if (!/^[\x20-\x7E]+$/.test(v)) problem = 'Use plain ASCII characters only (no accents, dashes or quotes from a word processor).';
    if (problem) {
      ev.preventDefault();
      text.setCustomValidity(problem);
      text.reportValidity();
    }
  });
  text.addEventListener('input', () => text.setCustomValidity(''));
  $('reason-cancel').addEventListener('click', () => dlg.close(''));
  $('copy-curl').addEventListener('click', copyCurl);
  dlg.addEventListener('close', () => {
    const resolve = reasonResolve;
    reasonResolve = null;
    if (resolve) resolve(dlg.returnValue === 'ok' ? normalizedReason() : null);
  });
}

function clearTask() {
  $('task-id').textContent = '';
  $('task-summary').hidden = true;
  $('task-waiting').hidden = true;
  $('task-waiting').textContent = '';
  $('task-facts').replaceChildren();
  $('task-outcome').replaceChildren();
  $('task-meta').replaceChildren();
  $('task-curl').hidden = true;
  $('curl-text').textContent = '';
  $('copy-status').textContent = '';
  $('task-gone').hidden = true;
  $('task-gone').replaceChildren();
  $('timeline-section').hidden = true;
  $('timeline').replaceChildren();
  $('side-by-side').hidden = true;
  $('redaction-note').hidden = true;
  $('request-view').replaceChildren();
  $('record-view').replaceChildren();
}

function goBackToList() {
  location.hash = '#' + (state.listView || defaultView(state.session.role) || '');
}

export async function enterTask(id) {
  const gen = ++taskGen;
  clearTask();
  $('task-back').href = '#' + (state.listView || defaultView(state.session.role) || '');
  $('task-id').textContent = id;
  if (!UUID.test(id)) {
    showNote('That is not a task id.');
    return;
  }
  const role = state.session.role;
  const readsOthers = role === 'support' || role === 'admin';
  const owner = state.ownerHints.get(id);
  let reason = '';
  if (readsOthers && owner && owner !== state.session.owner_id) {
    reason = await askReason(owner);
    if (reason === null) return goBackToList();
  }
  const body = $('task-body');
  setBusy(body, true);
  try {
    let rec;
    try {
      rec = await api(`/v1/tasks/${id}/replay`, { reason });
    } catch (e) {
      // The owner was unknown here (a link typed in): the API says 403
      // when a reason is needed, having read nothing.
      if (e.status !== 403 || reason || !readsOthers || gen !== taskGen) throw e;
      reason = await askReason(owner);
      if (reason === null) return goBackToList();
      rec = await api(`/v1/tasks/${id}/replay`, { reason });
    }
    if (gen !== taskGen) return;
    renderTask(rec, reason);
    announce(`Task ${id} opened.`);
  } catch (e) {
    if (gen !== taskGen) return;
    if (e.status === 410) {
      renderGone(id, e.tombstone, reason);
      await renderKept(id, gen);
    } else if (e.status === 404) {
      showNote('No such task, or your key may not see it.');
    } else {
      fail(e);
    }
  } finally {
    setBusy(body, false);
  }
}

function showNote(text) {
  const note = $('task-gone');
  note.replaceChildren(text);
  note.hidden = false;
}

function renderGone(id, tomb, reason) {
  renderCurl(id, reason);
  const note = $('task-gone');
  note.replaceChildren(h('strong', null, 'This record was erased. '),
    tomb ? `Its bodies were removed on ${fmtTime(tomb.erased_at)} UTC by ${tomb.erased_by} (${tomb.reason}); ` +
      'its metadata is kept for finance and support.' : 'Its metadata is kept; its bodies are gone.');
  note.hidden = false;
}

// renderKept shows what an erased task keeps (ids, model, status,
// timings, cost) beside its tombstone, from the replay search, which
// lists metadata only.
async function renderKept(id, gen) {
  let kept = null;
  try {
    const data = await api('/v1/replays?' + new URLSearchParams({ q: id, limit: '1' }).toString());
    kept = (data.data || []).find((r) => r.task_id === id) || null;
  } catch (e) {
    if (e.status === 401) return;
  }
  if (gen !== taskGen || !kept) return;
  $('task-facts').replaceChildren(...dlItems([
    ['Status', statusBadge(kept.status)],
    ['Cost', costText(kept.cost_micros)],
    ['Owner', kept.owner_id],
    ['Model', kept.model],
    ['Attempts', String(kept.attempts)],
    ['Created (UTC)', timeEl(kept.created_at)],
    ['Finished (UTC)', timeEl(kept.finished_at)],
    ['Idempotency key', h('span', { class: 'mono wrap' }, kept.idempotency_key)],
  ]));
  $('task-outcome').replaceChildren(h('p', { class: 'hint' }, 'Kept metadata: the request and the answer were erased.'));
  $('task-summary').hidden = false;
}

const costText = (m) => (m === null || m === undefined ? '—' : fmtMicros(m));

// WAITS names what holds a queued task, by the class of its "Waiting:"
// error (GET /v1/tasks/{id}).
const WAITS = {
  exhausted: 'Waiting: the gate of its provider key is open (breaker open, account exhausted); it runs once a probe succeeds.',
  throttled: 'Waiting: its provider key is paused (throttled); it runs when the pause ends.',
};

// waitingText says why an unfinished task has not finished: a gate, a
// budget, or the queue.
function waitingText(status, err, attempts) {
  if (status !== 'queued' && status !== 'running') return '';
  const msg = err && err.message ? err.message : '';
  if (/^Waiting:/.test(msg)) {
    if (/budget/i.test(err.code || '') || /budget/i.test(msg)) return 'Waiting for budget: ' + msg.replace(/^Waiting:\s*/, '');
    return (WAITS[err.class] || 'Waiting:') + ' (' + msg.replace(/^Waiting:\s*/, '') + ')';
  }
  if (status === 'running') return `Running: attempt ${attempts || 1} is with the provider.`;
  return 'Waiting in the queue: its provider key is serving older tasks first.';
}

// lastAnswer is the final answer's text, from the last attempt that has one.
function lastAnswer(rec) {
  const withAnswer = (rec.attempts || []).filter((a) => a.response);
  if (!withAnswer.length) return null;
  const r = withAnswer[withAnswer.length - 1].response;
  const c = r.choices && r.choices.length ? r.choices[0] : r;
  return contentText(c.content) || toolCallsText((c.tool_calls || []).map((t) => ({ id: t.id, function: t }))) || c.refusal || '';
}

// renderSummary puts what people ask first at the top: status, cost,
// the answer or the error, and why an unfinished task waits.
function renderSummary(rec) {
  const waiting = waitingText(rec.status, rec.error, (rec.attempts || []).length);
  $('task-waiting').textContent = waiting;
  $('task-waiting').hidden = !waiting;
  $('task-facts').replaceChildren(...dlItems([
    ['Status', statusBadge(rec.status)],
    ['Cost', costText(rec.cost_micros)],
    ['Model', (rec.request && rec.request.model) || '—'],
  ]));
  const out = $('task-outcome');
  out.replaceChildren();
  if (rec.status === 'failed' || rec.status === 'canceled') {
    const e = rec.error;
    out.append(h('p', { class: 'attempt-error', id: 'task-error' }, e ?
      `Error: ${e.message} (code ${e.code}, class ${e.class}${e.retryable ? ', retryable' : ''})` : `The task was ${rec.status}.`));
  } else if (rec.status === 'succeeded') {
    const text = lastAnswer(rec);
    out.append(h('h3', null, 'Result'), h('pre', { id: 'task-result' }, highlighted(text === null ? '(no answer stored)' : text)));
  }
  $('task-summary').hidden = false;
}

function shellQuote(v) {
  return "'" + String(v).replace(/'/g, "'\\''") + "'";
}

// curlFor is a ready command for the replay endpoint. The key is left as
// $TOLLGATE_KEY: this page does not know it, and should not.
function curlFor(id, reason) {
  const lines = ['curl -sS', '-H "Authorization: Bearer $TOLLGATE_KEY"'];
  if (reason) lines.push('-H ' + shellQuote('X-Reason: ' + reason));
  lines.push(shellQuote(`${location.origin}/v1/tasks/${id}/replay`));
  return lines.join(' \\\n  ');
}

function renderCurl(id, reason) {
  $('curl-text').textContent = curlFor(id, reason);
  $('copy-status').textContent = '';
  $('task-curl').hidden = false;
}

async function copyCurl() {
  const pre = $('curl-text');
  let ok = false;
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(pre.textContent);
      ok = true;
    } catch {
      ok = false;
    }
  }
  if (!ok) {
    const range = document.createRange();
    range.selectNodeContents(pre);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    try { ok = document.execCommand('copy'); } catch { ok = false; }
  }
  $('copy-status').textContent = ok ? 'Copied.' : 'Selected: press Ctrl+C (or ⌘C) to copy.';
}

function renderTask(rec, reason) {
  const req = rec.request || { messages: [] };
  $('task-meta').replaceChildren(...dlItems([
    ['Owner', rec.owner_id],
    ['Status', statusBadge(rec.status)],
    ['Idempotency key', h('span', { class: 'mono wrap' }, rec.idempotency_key)],
    ['Model asked for', req.model],
    ['Created (UTC)', timeEl(rec.created_at)],
    ['Finished (UTC)', timeEl(rec.finished_at)],
    ['Attempts', String((rec.attempts || []).length)],
  ]));
  renderSummary(rec);
  renderCurl(rec.task_id, reason);
  renderTimeline(rec);
  renderRequest(req);
  renderRecord(rec);
  $('redaction-note').hidden = false;
  $('side-by-side').hidden = false;
}

function renderTimeline(rec) {
  const ol = $('timeline');
  ol.replaceChildren();
  const t0 = Date.parse(rec.created_at);
  const after = (iso) => {
    const t = Date.parse(iso);
    return Number.isNaN(t) || Number.isNaN(t0) ? '' : ` (+${fmtMs(t - t0)})`;
  };
  ol.append(h('li', { class: 'tl tl-created' },
    h('span', { class: 'tl-what' }, 'Created'), ' ', timeEl(rec.created_at)));
  for (const a of rec.attempts || []) {
    const outcome = a.outcome || a.state || 'unknown';
    const facts = [
      ['Provider', `${a.provider} · ${a.provider_model}`],
      ['Model', a.model],
      ['Class', a.class || (outcome === 'succeeded' ? 'none' : '—')],
      ['Code', a.code],
      ['Provider status', a.provider_status === null || a.provider_status === undefined ? '—' : String(a.provider_status)],
      ['Latency', a.latency_ms === null || a.latency_ms === undefined ? '—' : fmtMs(a.latency_ms)],
    ];
    const sent = a.sent_at || a.started_at;
    ol.append(h('li', { class: 'tl tl-attempt tl-' + outcomeClass(outcome) },
      h('span', { class: 'tl-what' }, `Attempt ${a.attempt}`), ' ',
      badge(outcome, 'outcome-' + outcomeClass(outcome)), ' sent ', timeEl(sent), after(sent),
      dl(facts, 'meta meta-inline')));
  }
  if (rec.finished_at) {
    ol.append(h('li', { class: 'tl tl-finished' },
      h('span', { class: 'tl-what' }, 'Finished'), ' ', statusBadge(rec.status), ' ',
      timeEl(rec.finished_at), after(rec.finished_at)));
  } else {
    ol.append(h('li', { class: 'tl tl-open' },
      h('span', { class: 'tl-what' }, 'Not finished'), ' ', statusBadge(rec.status)));
  }
  $('timeline-section').hidden = false;
}

function outcomeClass(o) {
  return ['succeeded', 'failed', 'unknown', 'ambiguous', 'sent'].includes(o) ? o : 'other';
}

// contentText is a message's content as text: a string, or its parts
// (an image shows as its stored description, never its bytes).
function contentText(content) {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  return content.map((p) => p.type === 'image_url' && p.image_url ?
    `[image: ${p.image_url.url}${p.image_url.detail ? ', detail ' + p.image_url.detail : ''}]` : (p.text || '')).join('\n');
}

// toolCallsText lists tool calls, one a line: name(arguments) and the id.
function toolCallsText(calls) {
  return (calls || []).map((c) => {
    const fn = c.function || c;
    return `→ ${fn.name}(${fn.arguments})  [${c.id}]`;
  }).join('\n');
}

function message(role, content, extra, m) {
  const known = ['system', 'user', 'assistant', 'tool'];
  const parts = [contentText(content)];
  if (m && m.tool_call_id) parts.unshift(`(result of ${m.tool_call_id})`);
  if (m && m.tool_calls && m.tool_calls.length) parts.push(toolCallsText(m.tool_calls));
  if (m && m.refusal) parts.push(`Refused: ${m.refusal}`);
  return h('div', { class: 'msg msg-' + (known.includes(role) ? role : 'other') },
    h('div', { class: 'msg-role' }, role, extra ? h('span', { class: 'hint' }, ' ' + extra) : null),
    h('div', { class: 'msg-content' }, highlighted(parts.filter(Boolean).join('\n'))));
}

// PARAMS are the sampling and control parameters shown when set.
const PARAMS = ['temperature', 'top_p', 'seed', 'stop', 'presence_penalty', 'frequency_penalty', 'logit_bias', 'logprobs',
  'top_logprobs', 'n', 'user', 'safety_identifier', 'reasoning_effort', 'verbosity', 'tool_choice', 'parallel_tool_calls',
  'json_mode', 'deadline_s'];

function renderRequest(req) {
  const box = $('request-view');
  const limit = req.max_completion_tokens ? `${req.max_completion_tokens} (max_completion_tokens)` :
    req.max_tokens === null || req.max_tokens === undefined ? '(default)' : String(req.max_tokens);
  box.replaceChildren(dl([
    ['Model', req.model || '(server default)'],
    ['Max tokens', limit],
  ]));
  const msgs = req.messages || [];
  if (msgs.length === 0) box.append(h('p', { class: 'hint' }, 'No messages stored.'));
  for (const m of msgs) box.append(message(m.role, m.content, m.name ? `(${m.name})` : '', m));
  const set = PARAMS.filter((k) => req[k] !== undefined && req[k] !== null);
  if (set.length) {
    box.append(h('h3', null, 'Parameters'), dl(set.map((k) => [k, typeof req[k] === 'object' ? JSON.stringify(req[k]) : String(req[k])])));
  }
  if (req.tools && req.tools.length) {
    box.append(h('h3', null, `Tools (${req.tools.length})`), h('pre', { class: 'json' }, highlighted(JSON.stringify(req.tools, null, 2))));
  }
  if (req.response_format) {
    box.append(h('h3', null, 'Response format'), h('pre', { class: 'json' }, highlighted(JSON.stringify(req.response_format, null, 2))));
  }
  if (req.passthrough) {
    box.append(h('h3', null, 'Passed through'), h('pre', { class: 'json' }, highlighted(JSON.stringify(req.passthrough, null, 2))));
  }
  if (req.metadata) {
    box.append(h('h3', null, 'Metadata'), h('pre', { class: 'json' }, highlighted(JSON.stringify(req.metadata, null, 2))));
  }
}

// usageText is a usage with its classes.
function usageText(u) {
  if (!u) return '';
  const cls = [];
  if (u.cached_input_tokens) cls.push(`${fmtInt(u.cached_input_tokens)} cached`);
  if (u.cache_write_tokens) cls.push(`${fmtInt(u.cache_write_tokens)} cache-written`);
  if (u.reasoning_tokens) cls.push(`${fmtInt(u.reasoning_tokens)} reasoning`);
  return `${fmtInt(u.input_tokens)} in, ${fmtInt(u.output_tokens)} out` + (cls.length ? ` (${cls.join(', ')})` : '');
}

// imagesText describes the images an attempt sent, never their bytes.
function imagesText(images) {
  return (images || []).map((i) => i.sha256 ?
    `message ${i.message}: ${i.media_type}, ${fmtInt(i.bytes)} bytes, sha256 ${i.sha256}` :
    `message ${i.message}: ${i.url}`).join('\n');
}

function renderRecord(rec) {
  const box = $('record-view');
  box.replaceChildren();
  const attempts = rec.attempts || [];
  if (attempts.length === 0) {
    box.append(h('p', { class: 'hint' }, 'No provider attempt was made.'));
    return;
  }
  for (const a of attempts) {
    const outcome = a.outcome || a.state || 'unknown';
    const headingId = `attempt-${a.attempt}-h`;
    const art = h('article', { class: 'attempt', 'aria-labelledby': headingId },
      h('h3', { id: headingId }, `Attempt ${a.attempt} `, badge(outcome, 'outcome-' + outcomeClass(outcome))));
    const params = a.parameters || {};
    art.append(dl([
      ['Provider', a.provider],
      ['Provider model', a.provider_model],
      ['Max tokens', params.max_tokens === undefined ? '—' : String(params.max_tokens) + (params.output_limit_param ? ` (${params.output_limit_param})` : '')],
      ['Choices', params.n ? String(params.n) : '1'],
      ['Tools', params.tools ? h('span', null, `${params.tools}, sha256 `, h('span', { class: 'mono wrap' }, params.tools_sha256 || '')) : 'none'],
      ['Response format', params.response_format ? params.response_format + (params.schema_name ? ` (${params.schema_name})` : '') : '—'],
      ['Images', params.images && params.images.length ? h('pre', { class: 'wrap' }, imagesText(params.images)) : 'none'],
      ['Timeout', a.timeout_ms === undefined ? '—' : fmtMs(a.timeout_ms)],
      ['Started (UTC)', timeEl(a.started_at)],
      ['Finished (UTC)', timeEl(a.finished_at)],
      ['Latency', a.latency_ms === null || a.latency_ms === undefined ? '—' : fmtMs(a.latency_ms)],
      ['Trace id', a.trace_id ? h('span', { class: 'mono' }, a.trace_id) : '—'],
      ['Build', a.build_version],
    ], 'meta meta-compact'));
    if (a.response) {
      const r = a.response;
      const usage = usageText(r.usage);
      const fp = r.system_fingerprint ? `fingerprint ${r.system_fingerprint}` : '';
      const choices = r.choices && r.choices.length ? r.choices : [r];
      choices.forEach((c, i) => {
        const call = c.tool_calls && c.tool_calls.map((t) => ({ id: t.id, function: { name: t.name, arguments: t.arguments } }));
        art.append(message(choices.length > 1 ? `response (choice ${c.index ?? i})` : 'response', c.content,
          [c.finish_reason ? `finish: ${c.finish_reason}` : '', i === 0 ? usage : '', i === 0 ? fp : ''].filter(Boolean).join(' · '),
          { tool_calls: call, refusal: c.refusal }));
      });
    }
    if (a.error) {
      art.append(h('p', { class: 'attempt-error' },
        `Failed: class ${a.error.class}, code ${a.error.code}` +
        (a.error.provider_status ? `, provider status ${a.error.provider_status}` : '') + '.'));
    }
    const red = Object.entries(a.redactions || {});
    if (red.length) {
      art.append(h('p', { class: 'hint' }, 'Redactions in this record: ' +
        red.map(([k, n]) => `${k} × ${n}`).join(', ') + '.'));
    }
    box.append(art);
  }
}

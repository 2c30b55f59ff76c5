// Calls to the API through the console's proxy, and the messages shown
// when they fail.
import { $ } from './dom.js';

let sessionEnded = () => {};

// onSessionEnd sets what happens when the API answers 401: the session
// expired or the key was revoked.
export function onSessionEnd(fn) {
  sessionEnded = fn;
}

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `The server answered ${status}.`);
    this.status = status;
    this.code = problem && problem.code;
    this.traceId = problem && problem.trace_id;
    this.tombstone = problem && problem.tombstone;
  }
}

export async function problemOf(res) {
  try { return await res.json(); } catch { return null; }
}

// api reads /console/api + path: the API's path, as the signed-in key.
export async function api(path, opts = {}) {
  const headers = { Accept: opts.text ? 'text/plain' : 'application/json' };
  if (opts.reason) headers['X-Reason'] = opts.reason;
  const res = await fetch('/console/api' + path, { headers, credentials: 'same-origin', cache: 'no-store' });
  if (res.status === 401) {
    const err = new ApiError(401, await problemOf(res));
    sessionEnded('Your session has ended. Please sign in again.');
    throw err;
  }
  if (!res.ok) throw new ApiError(res.status, await problemOf(res));
  return opts.text ? res.text() : res.json();
}

// showError shows a message, an ApiError or another error; null hides it.
export function showError(err) {
  const box = $('error');
  if (!err) {
    box.hidden = true;
    box.textContent = '';
    return;
  }
  let msg;
  if (typeof err === 'string') msg = err;
  else if (err instanceof ApiError) msg = err.message;
  else msg = 'Something went wrong: ' + (err.message || String(err));
  if (err.traceId) msg += ` (trace id ${err.traceId})`;
  box.textContent = msg;
  box.hidden = false;
}

// fail shows an error, except a 401, which already sent the user to sign in.
export function fail(err) {
  if (err && err.status === 401) return;
  showError(err);
}

export function announce(msg) {
  $('flash').textContent = msg;
}

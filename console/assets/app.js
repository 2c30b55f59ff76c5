// Tollgate console: sign-in, routing between pages, and start-up. Plain
// ES modules, no build step, no third-party code.
//
// The API key never reaches this page after sign-in: the server keeps it
// in the session and adds it to every /console/api/... call. Everything
// shown is what the API answers to that key; the role only picks pages.
import { $ } from './dom.js';
import { ApiError, problemOf, announce, showError, onSessionEnd } from './api.js';
import { state, defaultView } from './state.js';
import * as lists from './lists.js';
import * as task from './task.js';
import * as finance from './finance.js';
import * as ops from './ops.js';
import * as admin from './admin.js';

const VIEWS = {
  support: { roles: ['support', 'admin'], title: 'Find a task', enter: lists.enterSupport },
  tasks: { roles: ['client'], title: 'My tasks', enter: lists.enterTasks },
  task: { roles: ['client', 'support', 'admin'], title: 'Task', enter: task.enterTask },
  finance: { roles: ['finance', 'admin', 'client'], title: 'Spend', enter: finance.enterFinance },
  ops: { roles: ['admin'], title: 'Operations', enter: ops.enterOps, leave: ops.stopOps },
  audit: { roles: ['admin'], title: 'Audit log', enter: lists.enterAudit },
  keys: { roles: ['admin'], title: 'Keys and limits', enter: admin.enterKeys },
};

function setSession(sess) {
  state.session = sess;
  updateChrome();
}

function signedOut(message) {
  state.session = null;
  resetViews();
  updateChrome();
  showView('signin');
  showError(message || null);
}

function updateChrome() {
  const sess = state.session;
  $('nav').hidden = !sess;
  $('who').hidden = !sess;
  if (!sess) return;
  for (const a of document.querySelectorAll('#nav a')) {
    a.parentElement.hidden = !VIEWS[a.dataset.view].roles.includes(sess.role);
  }
  // A client's spend is its own: the page and its link say so.
  const own = sess.role === 'client';
  document.querySelector('#nav a[data-view="finance"]').textContent = own ? 'My spend' : 'Finance';
  $('f-owner').parentElement.hidden = own;
  $('who-text').textContent = `${sess.owner_id} · ${sess.role}` + (sess.workload ? ` · ${sess.workload}` : '');
}

async function signIn(ev) {
  ev.preventDefault();
  const input = $('signin-key');
  const key = input.value.trim();
  if (!key) return;
  const button = ev.submitter || ev.target.querySelector('button');
  button.disabled = true;
  showError(null);
  try {
    const res = await fetch('/console/session', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ api_key: key }),
      credentials: 'same-origin',
      cache: 'no-store',
    });
    if (!res.ok) {
      showError(new ApiError(res.status, await problemOf(res)));
      input.select();
      return;
    }
    input.value = '';
    setSession(await res.json());
    announce(`Signed in as ${state.session.owner_id}, role ${state.session.role}.`);
    // A page left open by an earlier session may not be this role's:
    // start on this role's own page instead of a refusal.
    const view = VIEWS[location.hash.replace(/^#/, '').split('/')[0]];
    if (view && !view.roles.includes(state.session.role)) {
      history.replaceState(null, '', location.pathname + location.search);
    }
    route();
  } catch (e) {
    showError(e);
  } finally {
    button.disabled = false;
  }
}

async function signOut() {
  const token = state.session ? state.session.csrf_token : '';
  try {
    await fetch('/console/session', {
      method: 'DELETE',
      headers: { 'X-CSRF-Token': token },
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    // Signed out locally either way; the session expires on its own.
  }
  if (location.hash) history.replaceState(null, '', location.pathname + location.search);
  signedOut('');
  announce('Signed out.');
}

function route() {
  showError(null);
  if (!state.session) {
    showView('signin');
    return;
  }
  const raw = location.hash.replace(/^#/, '');
  const slash = raw.indexOf('/');
  const name = slash < 0 ? raw : raw.slice(0, slash);
  const arg = slash < 0 ? '' : raw.slice(slash + 1);
  const role = state.session.role;
  if (!name) {
    const d = defaultView(role);
    if (d) {
      location.replace('#' + d);
    } else {
      showNone(`Keys with the role “${role}” have no pages in the console.`);
    }
    return;
  }
  const view = VIEWS[name];
  if (!view) {
    showNone('There is no such page.');
    return;
  }
  if (!view.roles.includes(role)) {
    showNone(`A ${role} key cannot open this page.`);
    return;
  }
  let decoded = arg;
  try { decoded = decodeURIComponent(arg); } catch { /* keep it raw */ }
  showView(name);
  view.enter(decoded);
}

function showNone(text) {
  $('none-text').textContent = text;
  showView('none');
}

function showView(name) {
  if (state.active && state.active !== name && VIEWS[state.active] && VIEWS[state.active].leave) {
    VIEWS[state.active].leave();
  }
  for (const sec of document.querySelectorAll('main > .view')) {
    sec.hidden = sec.id !== 'view-' + name;
  }
  const navName = name === 'task' ? state.listView : name;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.view === navName) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const title = VIEWS[name] ? VIEWS[name].title : name === 'signin' ? 'Sign in' : 'Console';
  document.title = `${title} · Tollgate console`;
  const changed = state.active !== name;
  state.active = name;
  const heading = document.querySelector(`#view-${name} h1`);
  if (heading && changed) heading.focus({ preventScroll: false });
}

// resetViews forgets everything the last session saw.
function resetViews() {
  state.ownerHints.clear();
  state.listView = null;
  $('none-text').textContent = '';
  for (const m of [lists, task, finance, ops, admin]) m.reset();
}

async function init() {
  $('signin-form').addEventListener('submit', signIn);
  $('sign-out').addEventListener('click', signOut);
  for (const m of [lists, task, finance, ops, admin]) m.wire();
  onSessionEnd(signedOut);
  window.addEventListener('hashchange', route);
  try {
    const res = await fetch('/console/session', { credentials: 'same-origin', cache: 'no-store' });
    if (res.ok) setSession(await res.json());
  } catch (e) {
    showError(e);
  }
  updateChrome();
  route();
}

init();

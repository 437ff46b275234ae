// Logging in and out.
//
// View (see main.js for the layers and the page's safety rules); routes
// through bus.js once logged in.

import { up } from './bus.js';
import { S } from './state.js';
import { plain, vis } from './text.js';
import { $ } from './dom.js';
import { api } from './api.js';
import { loadMyPasskeys } from './votes.js';
import { loadPending } from './inbox.js';
import { updateNotifyButton } from './notify.js';
import { connectEvents, setLive } from './live.js';

function takeTokenFromHash() {
  const hash = location.hash.replace(/^#/, '');
  if (!hash.includes('token=')) return null;
  const token = new URLSearchParams(hash).get('token');
  // Drop the secret from the address bar (and from history) before anything else.
  history.replaceState(null, '', location.pathname + location.search);
  return (token || '').trim();
}

/** Log in with a `#token=` link, if the address has one. */
export async function loginFromHash() {
  const token = takeTokenFromHash();
  if (token == null) return false;
  if (S.me) loggedOut(null);
  const r = await api('POST', 'v1/login', { token });
  if (r.ok) loggedIn(r.body);
  else showLogin(r.status === 401 || !token ? 'That login link is not valid (unknown or revoked token).' : r.error);
  return true;
}

export function showOnly(id) {
  for (const el of document.querySelectorAll('main > section')) el.hidden = el.id !== id;
}

export function showLogin(error) {
  showOnly('view-login');
  $('tabs').hidden = true;
  $('userbox').hidden = true;
  document.title = 'Log in · lev';
  const err = $('login-error');
  err.hidden = !error;
  err.replaceChildren(vis(error || ''));
  $('login-token').value = '';
  $('login-token').focus();
}

export async function submitLogin(ev) {
  ev.preventDefault();
  const token = $('login-token').value.trim();
  if (!token) return;
  $('login-submit').disabled = true;
  const r = await api('POST', 'v1/login', { token });
  $('login-submit').disabled = false;
  if (r.ok) loggedIn(r.body);
  else showLogin(r.status === 401 ? 'Unknown or revoked token.' : r.error);
}

export function loggedIn(me) {
  S.me = me;
  S.csrf = me.csrf_token || null;
  $('me-name').replaceChildren(vis(me.name));
  $('me-role').textContent = me.role || '';
  $('who').title = 'Logged in as ' + plain(me.name) + (me.role ? ' (' + me.role + ')' : '');
  $('tab-audit').hidden = me.role !== 'admin';
  $('tabs').hidden = false;
  $('userbox').hidden = false;
  updateNotifyButton();
  loadMyPasskeys();
  connectEvents();
  loadPending().then(() => {
    S.loadedOnce = true;
  });
  up.route();
}

export async function logout() {
  await api('POST', 'v1/logout');
  loggedOut(null);
}

export function loggedOut(message) {
  if (S.es) S.es.close();
  S.es = null;
  clearTimeout(S.reconnectTimer);
  S.me = null;
  S.csrf = null;
  S.items.clear();
  S.drafts.clear();
  S.operators.clear();
  S.operatorsChecked.clear();
  S.selected = null;
  S.loadedOnce = false;
  S.detailRenderedFor = null;
  setLive(false);
  showLogin(message);
}

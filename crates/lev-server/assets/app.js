// lev dashboard. Plain JavaScript, no framework, no build step.
//
// Safety rule for this file: everything that comes from an agent (prompts,
// args, names, titles, options, feedback, metadata, ids) is rendered as inert
// text through `vis()` (text nodes and createElement only). innerHTML is never
// used, no URL is ever built from agent data but blob links from a validated
// hex digest, and no inline script or handler exists (the page has a strict
// CSP). Bidirectional-override, zero-width and control characters are shown
// as visible ⟨U+XXXX⟩ tokens and the item is flagged.

'use strict';

// ---------------------------------------------------------------- state

const S = {
  me: null, // {name, role, csrf_token, attach_root?}
  csrf: null,
  items: new Map(), // id -> view {request, response, approval}
  selected: null, // id of the interaction shown in the detail pane
  session: '', // session filter ('' = all)
  view: 'inbox',
  es: null,
  live: false,
  reconnectTimer: null,
  reconnectDelay: 1000,
  loadedOnce: false,
  drafts: new Map(), // id -> draft form state
  mine: new Set(), // ids this page answered
  raced: new Map(), // id -> true when someone else answered first (shown once)
  operators: new Map(), // session id -> operator name ('' unknown), when connected
  operatorsChecked: new Set(), // sessions whose state was asked of the server
  tasks: new Map(),
  tasksAvailable: null,
  detailRenderedFor: null,
};

const KIND_LABEL = {
  free_text: 'Question',
  multiple_choice: 'Choice',
  tool_approval: 'Tool approval',
  interaction_points: 'Review points',
};

const SCOPE_LABEL = { once: 'once', session: 'for this session', always: 'always' };

// ---------------------------------------------------------------- inert text

// Bidirectional overrides and isolates, marks, zero-width characters: flagged.
const SUSPICIOUS_RE = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C\u200B-\u200D\u2060\uFEFF]/;
// What is made visible: the above, plus control characters (but tab and newline).
const SPECIAL_RE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C\u200B-\u200D\u2060\uFEFF]/g;
const CONTROL_RE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u2028\u2029]/;

const CHAR_NAMES = {
  0x202a: 'left-to-right embedding', 0x202b: 'right-to-left embedding',
  0x202c: 'pop directional formatting', 0x202d: 'left-to-right override',
  0x202e: 'right-to-left override', 0x2066: 'left-to-right isolate',
  0x2067: 'right-to-left isolate', 0x2068: 'first strong isolate',
  0x2069: 'pop directional isolate', 0x200e: 'left-to-right mark',
  0x200f: 'right-to-left mark', 0x061c: 'Arabic letter mark',
  0x200b: 'zero-width space', 0x200c: 'zero-width non-joiner',
  0x200d: 'zero-width joiner', 0x2060: 'word joiner',
  0xfeff: 'zero-width no-break space', 0x2028: 'line separator',
  0x2029: 'paragraph separator', 0x1b: 'escape',
};

function cpToken(ch) {
  return 'U+' + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
}

/** A fragment showing `s` as inert text, special characters as marked tokens. */
function vis(s) {
  s = s == null ? '' : String(s);
  const frag = document.createDocumentFragment();
  let last = 0;
  for (const m of s.matchAll(SPECIAL_RE)) {
    if (m.index > last) frag.append(document.createTextNode(s.slice(last, m.index)));
    const tok = document.createElement('span');
    tok.className = 'uc';
    const cp = m[0].codePointAt(0);
    tok.title = (CHAR_NAMES[cp] || (cp < 0xa0 ? 'control character' : 'invisible character')) +
      ' (made visible by lev)';
    tok.textContent = '⟨' + cpToken(m[0]) + '⟩';
    frag.append(tok);
    last = m.index + m[0].length;
  }
  if (last < s.length) frag.append(document.createTextNode(s.slice(last)));
  return frag;
}

/** `s` as plain text with special characters spelled out (titles, notifications). */
function plain(s) {
  return String(s == null ? '' : s).replace(SPECIAL_RE, (c) => '⟨' + cpToken(c) + '⟩');
}

function walkStrings(v, fn) {
  if (typeof v === 'string') return fn(v);
  if (Array.isArray(v)) return v.some((x) => walkStrings(x, fn));
  if (v && typeof v === 'object') {
    return Object.entries(v).some(([k, x]) => fn(k) || walkStrings(x, fn));
  }
  return false;
}

/** Whether anything in the interaction hides or reorders characters. */
function suspicious(view) {
  const req = view.request || {};
  const test = (s) => SUSPICIOUS_RE.test(s) || CONTROL_RE.test(s);
  if (walkStrings(req, test)) return true;
  if (req.kind && req.kind.type === 'tool_approval') {
    const parsed = parseJson(req.kind.args_json);
    if (parsed.ok && walkStrings(parsed.value, test)) return true;
  }
  return false;
}

// ---------------------------------------------------------------- DOM helpers

const $ = (id) => document.getElementById(id);

/**
 * createElement with attributes and children. String children become text
 * nodes (for our own labels); agent data must be passed through vis().
 * `on*` attributes become event listeners, never inline handlers.
 */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'value') el.value = v;
      else if (k === 'checked') el.checked = !!v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return el;
}

function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

function timeEl(iso, mode = 'ago') {
  if (!iso) return null;
  return h('time', { datetime: iso, title: new Date(iso).toLocaleString(), dataset: { rel: mode } }, rel(iso));
}

function rel(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const diff = (t - Date.now()) / 1000;
  const a = Math.abs(diff);
  let s;
  if (a < 45) return diff > 0 ? 'in a moment' : 'just now';
  if (a < 3600) s = Math.round(a / 60) + ' min';
  else if (a < 86400) s = Math.round(a / 3600) + ' h';
  else if (a < 86400 * 14) s = Math.round(a / 86400) + ' d';
  else return new Date(t).toLocaleDateString();
  return diff > 0 ? 'in ' + s : s + ' ago';
}

function refreshTimes() {
  for (const el of document.querySelectorAll('time[data-rel]')) {
    el.textContent = rel(el.getAttribute('datetime'));
  }
}

function toast(msg, kind = 'info') {
  const el = h('div', { class: 'toast ' + kind, role: 'status' }, msg);
  $('toasts').append(el);
  setTimeout(() => el.classList.add('out'), 3600);
  setTimeout(() => el.remove(), 4200);
}

// ---------------------------------------------------------------- JSON helpers

function parseJson(text) {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: e.message };
  }
}

function pretty(text) {
  const p = parseJson(text);
  return p.ok ? JSON.stringify(p.value, null, 2) : String(text);
}

/** JSON text without the whitespace outside strings; numbers kept as written. */
function minifyJson(text) {
  let out = '';
  let inStr = false;
  let esc = false;
  for (const ch of text) {
    if (inStr) {
      out += ch;
      if (esc) esc = false;
      else if (ch === '\\') esc = true;
      else if (ch === '"') inStr = false;
    } else if (ch === '"') {
      inStr = true;
      out += ch;
    } else if (ch !== ' ' && ch !== '\n' && ch !== '\r' && ch !== '\t') {
      out += ch;
    }
  }
  return out;
}

function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]));
}

function ptrEsc(k) {
  return String(k).replace(/~/g, '~0').replace(/\//g, '~1');
}

/** Differences between two JSON values, by JSON pointer. */
function jsonDiff(a, b, ptr = '', out = []) {
  if (deepEqual(a, b)) return out;
  const ao = a !== null && typeof a === 'object';
  const bo = b !== null && typeof b === 'object';
  if (ao && bo && Array.isArray(a) === Array.isArray(b)) {
    const keys = Array.isArray(a)
      ? Array.from({ length: Math.max(a.length, b.length) }, (_, i) => i)
      : [...new Set([...Object.keys(a), ...Object.keys(b)])];
    for (const k of keys) {
      const p = ptr + '/' + ptrEsc(k);
      const inA = Array.isArray(a) ? k < a.length : Object.prototype.hasOwnProperty.call(a, k);
      const inB = Array.isArray(b) ? k < b.length : Object.prototype.hasOwnProperty.call(b, k);
      if (!inA) out.push({ op: '+', p, to: b[k] });
      else if (!inB) out.push({ op: '-', p, from: a[k] });
      else jsonDiff(a[k], b[k], p, out);
    }
  } else {
    out.push({ op: '~', p: ptr || '(whole)', from: a, to: b });
  }
  return out;
}

/** Leaves of a JSON value: [pointer, value]. */
function leaves(v, ptr = '', out = []) {
  if (Array.isArray(v)) {
    if (v.length === 0) out.push([ptr, v]);
    v.forEach((x, i) => leaves(x, ptr + '/' + i, out));
  } else if (v !== null && typeof v === 'object') {
    const ks = Object.keys(v);
    if (ks.length === 0) out.push([ptr, v]);
    for (const k of ks) leaves(v[k], ptr + '/' + ptrEsc(k), out);
  } else {
    out.push([ptr, v]);
  }
  return out;
}

/** Escape for the server's regex syntax (as Rust's regex::escape does). */
function reEscape(s) {
  return s.replace(/[\\.+*?()|[\]{}^$#&\-~]/g, '\\$&');
}

/** The pattern that matches exactly this value, as a policy rule matches it. */
function exactPattern(v) {
  return '^' + reEscape(typeof v === 'string' ? v : JSON.stringify(v)) + '$';
}

/** A tool call's args in one line: a command line for `argv`, else compact JSON. */
function argsSummary(argsJson) {
  const p = parseJson(argsJson);
  if (!p.ok) return short(String(argsJson), 120);
  const v = p.value;
  const argv = v && typeof v === 'object' ? v.argv || v.command || v.cmd : null;
  if (Array.isArray(argv) && argv.every((a) => typeof a === 'string')) {
    return short(argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a))).join(' '), 120);
  }
  if (typeof argv === 'string') return short(argv, 120);
  return short(JSON.stringify(v), 120);
}

/** A JSON value in one line, strings quoted. */
function shortJson(v, n = 160) {
  return short(JSON.stringify(v), n);
}

function short(v, n = 160) {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > n ? s.slice(0, n) + '…' : s;
}

// ---------------------------------------------------------------- API

function errorMessage(status, body) {
  if (body && body.error && body.error.message) return body.error.message;
  if (status === 0) return 'The server cannot be reached.';
  return 'The server answered ' + status + '.';
}

async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  if (method !== 'GET' && method !== 'HEAD' && S.csrf) headers['X-CSRF-Token'] = S.csrf;
  let res;
  try {
    res = await fetch(path, init);
  } catch {
    return { status: 0, ok: false, body: null, code: 'network', error: errorMessage(0) };
  }
  let data = null;
  if ((res.headers.get('content-type') || '').includes('json')) {
    try {
      data = await res.json();
    } catch {
      data = null;
    }
  }
  const code = data && data.error ? data.error.code : null;
  if (res.status === 401 && S.me && path !== 'v1/login') {
    loggedOut('Your session has ended. Log in again.');
  }
  return { status: res.status, ok: res.ok, body: data, code, error: res.ok ? null : errorMessage(res.status, data) };
}

/** Collect `items` of a list answer whatever its wrapper. */
function listOf(body, ...keys) {
  if (Array.isArray(body)) return body;
  for (const k of ['items', ...keys]) if (body && Array.isArray(body[k])) return body[k];
  return [];
}

// ---------------------------------------------------------------- login

function takeTokenFromHash() {
  const hash = location.hash.replace(/^#/, '');
  if (!hash.includes('token=')) return null;
  const token = new URLSearchParams(hash).get('token');
  // Drop the secret from the address bar (and from history) before anything else.
  history.replaceState(null, '', location.pathname + location.search);
  return (token || '').trim();
}

async function boot() {
  applyTheme();
  bindStatic();
  if (await loginFromHash()) return;
  const r = await api('GET', 'v1/me');
  if (r.ok) return loggedIn(r.body);
  return showLogin(r.status === 401 || r.status === 404 ? null : r.error);
}

/** Log in with a `#token=` link, if the address has one. */
async function loginFromHash() {
  const token = takeTokenFromHash();
  if (token == null) return false;
  if (S.me) loggedOut(null);
  const r = await api('POST', 'v1/login', { token });
  if (r.ok) loggedIn(r.body);
  else showLogin(r.status === 401 || !token ? 'That login link is not valid (unknown or revoked token).' : r.error);
  return true;
}

function showOnly(id) {
  for (const el of document.querySelectorAll('main > section')) el.hidden = el.id !== id;
}

function showLogin(error) {
  showOnly('view-login');
  $('tabs').hidden = true;
  $('userbox').hidden = true;
  document.title = 'Log in · lev';
  const err = $('login-error');
  err.hidden = !error;
  err.textContent = error || '';
  $('login-token').value = '';
  $('login-token').focus();
}

async function submitLogin(ev) {
  ev.preventDefault();
  const token = $('login-token').value.trim();
  if (!token) return;
  $('login-submit').disabled = true;
  const r = await api('POST', 'v1/login', { token });
  $('login-submit').disabled = false;
  if (r.ok) loggedIn(r.body);
  else showLogin(r.status === 401 ? 'Unknown or revoked token.' : r.error);
}

function loggedIn(me) {
  S.me = me;
  S.csrf = me.csrf_token || null;
  $('me-name').replaceChildren(vis(me.name));
  $('me-role').textContent = me.role || '';
  $('who').title = 'Logged in as ' + plain(me.name) + (me.role ? ' (' + me.role + ')' : '');
  $('tab-audit').hidden = me.role !== 'admin';
  $('tabs').hidden = false;
  $('userbox').hidden = false;
  updateNotifyButton();
  connectEvents();
  loadPending().then(() => {
    S.loadedOnce = true;
  });
  route();
}

async function logout() {
  await api('POST', 'v1/logout');
  loggedOut(null);
}

function loggedOut(message) {
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

// ---------------------------------------------------------------- live events

function setLive(on, text) {
  S.live = on;
  const el = $('live');
  el.classList.toggle('on', on);
  $('live-text').textContent = text || (on ? 'Live' : 'Reconnecting');
  el.title = on ? 'Live: new questions appear at once' : 'Not connected to the live stream; retrying';
}

function connectEvents() {
  if (S.es) S.es.close();
  clearTimeout(S.reconnectTimer);
  const es = new EventSource('v1/events');
  S.es = es;
  es.addEventListener('open', () => {
    S.reconnectDelay = 1000;
    setLive(true);
    // Whatever happened while we were not listening: read the state again.
    if (S.loadedOnce) loadPending();
  });
  es.addEventListener('error', () => {
    setLive(false);
    if (es.readyState === EventSource.CLOSED && S.es === es) {
      // The browser gave up (an HTTP error): check the session, then retry.
      S.reconnectTimer = setTimeout(async () => {
        const r = await api('GET', 'v1/me');
        if (r.ok && S.me) connectEvents();
      }, S.reconnectDelay);
      S.reconnectDelay = Math.min(S.reconnectDelay * 2, 30000);
    }
  });
  for (const kind of ['interaction.created', 'interaction.answered', 'interaction.expired', 'interaction.cancelled']) {
    es.addEventListener(kind, (e) => {
      const data = parseJson(e.data);
      if (data.ok) onInteraction(kind, data.value);
    });
  }
  es.addEventListener('task.updated', (e) => {
    const data = parseJson(e.data);
    if (data.ok && data.value && data.value.id) {
      S.tasks.set(data.value.id, data.value);
      if (S.view === 'tasks') renderTasks();
    }
  });
  for (const kind of ['operator.connected', 'operator.disconnected']) {
    es.addEventListener(kind, (e) => {
      const data = parseJson(e.data);
      const sid = data.ok && data.value ? data.value.session_id : null;
      if (typeof sid !== 'string') return;
      S.operatorsChecked.add(sid);
      if (kind === 'operator.connected') S.operators.set(sid, typeof data.value.operator === 'string' ? data.value.operator : '');
      else S.operators.delete(sid);
      renderSessions();
      if (S.view === 'tasks') renderOperators();
    });
  }
}

/** An event's data as a view {request, response, approval}. */
function asView(data) {
  if (!data || typeof data !== 'object') return null;
  if (data.request && typeof data.request === 'object') return data;
  if (data.kind && data.id) return { request: data, response: data.response || null, approval: null };
  return null;
}

function idOf(view) {
  return view && view.request ? view.request.id : null;
}

function onInteraction(kind, data) {
  const view = asView(data);
  const id = idOf(view);
  if (!id) return;
  checkOperators([view.request.session_id]);
  const known = S.items.get(id);
  S.items.set(id, view);
  const status = view.request.status;
  if (kind === 'interaction.created' && !known && status === 'pending') {
    notifyNew(view);
    if (!S.selected || !S.items.has(S.selected) || S.items.get(S.selected).request.status !== 'pending') {
      if (window.matchMedia('(min-width: 761px)').matches) S.selected = id;
    }
  }
  if (status !== 'pending') {
    if (id !== S.selected) S.items.delete(id);
    else if (!S.mine.has(id)) S.raced.set(id, 'event');
  }
  renderInbox();
}

// ---------------------------------------------------------------- notifications

function updateNotifyButton() {
  const btn = $('notify-btn');
  btn.hidden = !('Notification' in window) || Notification.permission !== 'default';
}

async function askNotify() {
  if (!('Notification' in window)) return;
  try {
    await Notification.requestPermission();
  } catch {
    /* older browsers */
  }
  updateNotifyButton();
  if (Notification.permission === 'granted') toast('Desktop notifications are on.');
}

function notifyNew(view) {
  if (!S.loadedOnce || !('Notification' in window) || Notification.permission !== 'granted') return;
  if (!document.hidden && document.hasFocus()) return;
  const req = view.request;
  try {
    const n = new Notification('lev · ' + (KIND_LABEL[req.kind.type] || 'Question'), {
      body: plain(summary(req)).slice(0, 200) + '\n' + plain(req.session_id),
      tag: req.id,
    });
    n.addEventListener('click', () => {
      window.focus();
      location.hash = '#inbox';
      select(req.id);
      n.close();
    });
  } catch {
    /* not allowed here */
  }
}

// ---------------------------------------------------------------- inbox

async function loadPending() {
  const seen = new Set();
  let cursor = null;
  for (let page = 0; page < 20; page++) {
    const q = 'v1/interactions?status=pending&limit=200' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '');
    const r = await api('GET', q);
    if (!r.ok) {
      if (r.status !== 401) toast('Could not load the inbox: ' + r.error, 'error');
      return;
    }
    for (const v of listOf(r.body)) {
      const view = asView(v);
      const id = idOf(view);
      if (!id) continue;
      seen.add(id);
      S.items.set(id, view);
    }
    cursor = r.body && r.body.next_cursor;
    if (!cursor) break;
  }
  checkOperators([...S.items.values()].map((v) => v.request.session_id));
  // Pending items we hold that the server no longer lists were settled while
  // we were away: read their final state when shown, else forget them.
  for (const [id, v] of S.items) {
    if (v.request.status === 'pending' && !seen.has(id)) {
      if (id === S.selected) refreshOne(id);
      else S.items.delete(id);
    }
  }
  renderInbox();
}

async function refreshOne(id) {
  const r = await api('GET', 'v1/interactions/' + encodeURIComponent(id));
  if (r.ok) {
    const view = asView(r.body);
    if (idOf(view) === id) {
      S.items.set(id, view);
      renderInbox();
    }
  }
}

function pendingList() {
  return [...S.items.values()]
    .filter((v) => v.request.status === 'pending')
    .sort((a, b) => (b.request.created_at || '').localeCompare(a.request.created_at || '') ||
      (b.request.id || '').localeCompare(a.request.id || ''));
}

function visibleList() {
  const all = pendingList();
  return S.session ? all.filter((v) => v.request.session_id === S.session) : all;
}

function summary(req) {
  const k = req.kind || {};
  if (req.title) return req.title;
  if (k.type === 'tool_approval') return k.tool_name + ': ' + argsSummary(k.args_json);
  return (k.prompt || '').split('\n')[0];
}

function renderInbox() {
  const pend = pendingList();
  const n = pend.length;
  const count = $('inbox-count');
  count.hidden = n === 0;
  count.textContent = String(n);
  document.title = (n ? '(' + n + ') ' : '') + 'lev';
  if (S.session && !pend.some((v) => v.request.session_id === S.session)) S.session = '';
  renderSessions();

  const list = visibleList();
  const ul = clear($('inbox-list'));
  $('inbox-empty').hidden = list.length > 0;
  // Keep a selection: the selected item, even settled, stays in view until left.
  if (!S.selected || !S.items.has(S.selected)) {
    S.selected = list.length && window.matchMedia('(min-width: 761px)').matches ? idOf(list[0]) : null;
  }
  if (!S.selected) document.body.classList.remove('show-detail');
  for (const v of list) ul.append(listItem(v));
  renderDetailIfChanged();
}

function listItem(view) {
  const req = view.request;
  const k = req.kind || {};
  const flagged = suspicious(view);
  const li = h('li', {
    class: 'item' + (req.id === S.selected ? ' selected' : '') + (flagged ? ' flagged' : ''),
    role: 'option',
    tabindex: '-1',
    'aria-selected': req.id === S.selected ? 'true' : 'false',
    dataset: { id: req.id, kind: k.type || '' },
    onclick: () => select(req.id),
  },
  h('div', { class: 'item-top' },
    h('span', { class: 'kind kind-' + (k.type || 'unknown') }, KIND_LABEL[k.type] || 'Unknown'),
    flagged ? h('span', { class: 'warn-badge', title: 'Hidden or direction-changing characters' }, '⚠') : null,
    h('span', { class: 'spacer' }),
    timeEl(req.created_at)),
  h('div', { class: 'item-title' }, vis(summary(req))),
  h('div', { class: 'item-meta' },
    h('span', { class: 'session' }, vis(req.session_id)),
    req.caller ? h('span', { class: 'caller' }, '· ', vis(req.caller)) : null,
    req.expires_at ? h('span', { class: 'expires' }, '· expires ', timeEl(req.expires_at)) : null));
  return li;
}

function renderSessions() {
  const bar = clear($('sessions'));
  const counts = new Map();
  for (const v of pendingList()) counts.set(v.request.session_id, (counts.get(v.request.session_id) || 0) + 1);
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  if (counts.size < 2 && !S.session) {
    bar.hidden = counts.size === 0;
    if (counts.size === 1) {
      const [sid] = counts.keys();
      bar.append(h('span', { class: 'chip static' }, opDot(sid), vis(sid)));
    }
    return;
  }
  bar.hidden = false;
  bar.append(h('button', {
    type: 'button', class: 'chip' + (S.session === '' ? ' on' : ''),
    onclick: () => { S.session = ''; renderInbox(); },
  }, 'All ', h('span', { class: 'n' }, String(total))));
  for (const [sid, n] of [...counts].sort((a, b) => a[0].localeCompare(b[0]))) {
    bar.append(h('button', {
      type: 'button', class: 'chip' + (S.session === sid ? ' on' : ''), dataset: { session: sid },
      onclick: () => { S.session = S.session === sid ? '' : sid; S.selected = null; renderInbox(); },
    }, opDot(sid), vis(sid), ' ', h('span', { class: 'n' }, String(n))));
  }
}

function opDot(sid) {
  if (!S.operators.has(sid)) return null;
  const who = S.operators.get(sid);
  return h('span', { class: 'op-dot', title: 'An operator is connected to this session' + (who ? ': ' + plain(who) : '') });
}

/** Ask which of `sessions` have an operator connected (events keep it current after). */
async function checkOperators(sessions) {
  const fresh = [...new Set(sessions)].filter((sid) => sid && !S.operatorsChecked.has(sid)).slice(0, 500);
  if (!fresh.length) return;
  const r = await api('GET', 'v1/operators?sessions=' + encodeURIComponent(fresh.join(',')));
  if (!r.ok) return;
  for (const sid of fresh) S.operatorsChecked.add(sid);
  for (const row of listOf(r.body, 'sessions')) {
    if (!row || typeof row.session_id !== 'string') continue;
    if (row.connected) {
      if (!S.operators.has(row.session_id)) S.operators.set(row.session_id, '');
    } else {
      S.operators.delete(row.session_id);
    }
  }
  renderSessions();
  if (S.view === 'tasks') renderOperators();
}

function select(id) {
  if (S.selected && S.selected !== id) {
    const prev = S.items.get(S.selected);
    if (prev && prev.request.status !== 'pending') {
      S.items.delete(S.selected);
      S.raced.delete(S.selected);
    }
  }
  S.selected = id;
  document.body.classList.add('show-detail');
  renderInbox();
  const li = document.querySelector('#inbox-list li.selected');
  if (li) li.scrollIntoView({ block: 'nearest' });
}

function move(delta) {
  const list = visibleList();
  if (!list.length) return;
  let i = list.findIndex((v) => idOf(v) === S.selected);
  if (i < 0) i = delta > 0 ? -1 : list.length;
  const next = list[Math.max(0, Math.min(list.length - 1, i + delta))];
  select(idOf(next));
}

function back() {
  document.body.classList.remove('show-detail');
  if (S.selected) {
    const v = S.items.get(S.selected);
    if (v && v.request.status !== 'pending') S.items.delete(S.selected);
  }
  S.selected = null;
  renderInbox();
}

/** Move on from an item this page just answered. */
function advanceFrom(id) {
  const list = visibleList().filter((v) => idOf(v) !== id);
  S.items.delete(id);
  S.drafts.delete(id);
  S.selected = null;
  const wide = window.matchMedia('(min-width: 761px)').matches;
  if (list.length && wide) S.selected = idOf(list[0]);
  if (!wide) document.body.classList.remove('show-detail');
  renderInbox();
}

// ---------------------------------------------------------------- detail pane

function renderDetailIfChanged() {
  const id = S.selected;
  const view = id ? S.items.get(id) : null;
  const key = id
    ? [id, view ? view.request.status : '', view ? view.request.answered_by || '' : '', view && view.response ? 1 : 0, S.raced.get(id) || ''].join('|')
    : '';
  if (key === S.detailRenderedFor) return;
  S.detailRenderedFor = key;
  renderDetail();
}

function renderDetail() {
  const pane = clear($('detail'));
  const view = S.selected ? S.items.get(S.selected) : null;
  if (!view) {
    pane.append(h('div', { class: 'detail-empty' },
      h('p', { class: 'muted' }, pendingList().length ? 'Pick an item on the left, or press j.' : 'All caught up.')));
    return;
  }
  const req = view.request;
  const card = h('article', { class: 'card detail', dataset: { id: req.id, kind: req.kind.type, status: req.status } });
  card.append(h('button', { type: 'button', class: 'ghost small back', onclick: back }, '← Inbox'));
  card.append(detailHeader(view));
  if (suspicious(view)) {
    card.append(h('div', { class: 'banner warn', role: 'alert' },
      h('strong', null, 'Hidden or direction-changing characters. '),
      'This request contains invisible or bidirectional-control characters, shown here as ',
      h('span', { class: 'uc' }, '⟨U+…⟩'), '. Read it carefully: text may not be what it looks like.'));
  }
  card.append(question(view));
  if (req.status === 'pending') {
    const form = answerForm(view);
    card.append(form);
    const head = card.querySelector('.args .section-head');
    if (form.editBtn && head) head.insertBefore(form.editBtn, head.lastChild);
    card.classList.toggle('editing', !!(S.drafts.get(req.id) || {}).editing);
  } else {
    card.append(outcome(view, S.raced.get(req.id)));
  }
  pane.append(card);
}

function detailHeader(view) {
  const req = view.request;
  const k = req.kind;
  return h('header', { class: 'detail-head' },
    h('div', { class: 'detail-kicker' },
      h('span', { class: 'kind kind-' + k.type }, KIND_LABEL[k.type] || 'Unknown'),
      statusBadge(req.status),
      h('span', { class: 'spacer' }),
      h('span', { class: 'muted small' }, 'asked ', timeEl(req.created_at)),
      req.status === 'pending' && req.expires_at ? h('span', { class: 'muted small' }, ' · expires ', timeEl(req.expires_at)) : null),
    req.title || k.type === 'tool_approval'
      ? h('h2', { class: 'detail-title' }, req.title ? vis(req.title) : ['Run ', h('code', null, vis(k.tool_name)), '?'])
      : null,
    h('dl', { class: 'facts' },
      fact('Session', req.session_id, opDot(req.session_id)),
      fact('Conversation', req.conversation_id),
      fact('Turn', req.turn_id),
      fact('Caller', req.caller),
      fact('Id', req.id)));
}

function fact(label, value, extra) {
  if (value == null || value === '') return null;
  return h('div', { class: 'fact' }, h('dt', null, label), h('dd', null, extra, vis(value)));
}

function statusBadge(status) {
  return h('span', { class: 'status status-' + status }, status);
}

function question(view) {
  const req = view.request;
  const k = req.kind;
  const box = h('section', { class: 'question' });
  if (k.type === 'tool_approval') {
    box.append(toolFacts(k), argsView(view));
  } else {
    box.append(h('div', { class: 'prompt' + (req.title ? '' : ' lead') }, vis(k.prompt)));
    if (k.type === 'interaction_points') {
      box.append(h('ol', { class: 'points' }, (k.points || []).map((p) =>
        h('li', { class: 'point', dataset: { point: p.id } },
          h('span', { class: 'point-id' }, vis(p.id)), h('span', { class: 'point-text' }, vis(p.text))))));
    }
  }
  if (req.metadata != null) {
    box.append(h('details', { class: 'meta' }, h('summary', null, 'Metadata'),
      h('pre', { class: 'json' }, vis(JSON.stringify(req.metadata, null, 2)))));
  }
  return box;
}

function toolFacts(k) {
  return h('div', { class: 'tool-facts' },
    h('div', { class: 'tool-name' }, h('span', { class: 'label' }, 'Tool'), h('code', null, vis(k.tool_name))),
    h('div', { class: 'tool-sandbox' }, h('span', { class: 'label' }, 'Sandbox'),
      k.sandbox_mode ? h('code', null, vis(k.sandbox_mode)) : h('span', { class: 'muted' }, 'none given')),
    h('div', { class: 'tool-caps' }, h('span', { class: 'label' }, 'Needs'),
      (k.missing_capabilities || []).length
        ? k.missing_capabilities.map((c) => h('span', { class: 'cap' }, vis(c)))
        : h('span', { class: 'muted' }, 'nothing beyond its sandbox')));
}

function argsView(view) {
  const k = view.request.kind;
  const p = parseJson(k.args_json);
  const wrap = h('div', { class: 'args' });
  const pre = h('pre', { class: 'json args-pretty' }, vis(p.ok ? JSON.stringify(p.value, null, 2) : k.args_json));
  const raw = h('pre', { class: 'json args-raw', hidden: true }, vis(k.args_json));
  const toggle = h('button', {
    type: 'button', class: 'ghost small',
    onclick: () => {
      raw.hidden = !raw.hidden;
      pre.hidden = !raw.hidden;
      toggle.textContent = raw.hidden ? 'Exact text' : 'Formatted';
    },
  }, 'Exact text');
  wrap.append(h('div', { class: 'section-head' }, h('h3', null, 'Arguments'),
    p.ok ? null : h('span', { class: 'warn-text' }, 'not valid JSON'), h('span', { class: 'spacer' }), toggle), pre, raw);
  return wrap;
}

// ---------------------------------------------------------------- answering

function draftFor(id) {
  if (!S.drafts.has(id)) {
    S.drafts.set(id, {
      text: '', files: [], feedback: '', scope: 'once', narrow: false, editing: false,
      editText: null, grantRows: null, injected: '', reason: '', choice: null,
    });
  }
  return S.drafts.get(id);
}

function answerForm(view) {
  const t = view.request.kind.type;
  if (t === 'multiple_choice') return choiceForm(view);
  if (t === 'tool_approval') return approvalForm(view);
  return textForm(view);
}

function formError() {
  return h('p', { class: 'form-error', role: 'alert', hidden: true });
}

function showError(el, msg) {
  el.hidden = !msg;
  el.textContent = msg || '';
}

async function respond(view, body, errEl, buttons, doneMsg) {
  const id = view.request.id;
  for (const b of buttons) b.disabled = true;
  showError(errEl, null);
  S.mine.add(id);
  const r = await api('POST', 'v1/interactions/' + encodeURIComponent(id) + '/respond', { request_id: id, ...body });
  for (const b of buttons) b.disabled = false;
  if (r.ok) {
    toast(doneMsg, 'ok');
    advanceFrom(id);
    return;
  }
  S.mine.delete(id);
  if (r.status === 409 && r.code === 'already_answered') {
    // Lost the race: show the answer that won, not an error.
    const current = S.items.get(id) || view;
    S.items.set(id, {
      ...current,
      request: { ...current.request, status: 'answered' },
      response: r.body && r.body.response ? r.body.response : current.response,
    });
    S.raced.set(id, 'conflict');
    renderInbox();
    refreshOne(id);
    return;
  }
  if (r.status === 410) {
    S.raced.set(id, 'gone');
    await refreshOne(id);
    const cur = S.items.get(id);
    if (cur && cur.request.status === 'pending') {
      S.items.set(id, { ...cur, request: { ...cur.request, status: 'expired' } });
    }
    renderInbox();
    return;
  }
  showError(errEl, r.error);
}

function choiceForm(view) {
  const k = view.request.kind;
  const err = formError();
  const buttons = [];
  const form = h('section', { class: 'answer' }, h('h3', null, 'Pick one'));
  const list = h('div', { class: 'choices' });
  (k.options || []).forEach((opt, i) => {
    const b = h('button', {
      type: 'button', class: 'choice', dataset: { choice: String(i) },
      onclick: () => respond(view, { choice_index: i }, err, buttons, 'Answered: ' + plain(short(opt, 60))),
    }, i < 9 ? h('kbd', null, String(i + 1)) : h('span', { class: 'kbd-pad' }), h('span', { class: 'choice-text' }, vis(opt)));
    buttons.push(b);
    list.append(b);
  });
  form.append(list, err);
  return form;
}

function textForm(view) {
  const id = view.request.id;
  const d = draftFor(id);
  const err = formError();
  const ta = h('textarea', {
    class: 'reply', rows: '5', placeholder: 'Write your answer…', 'aria-label': 'Your answer',
    value: d.text, spellcheck: 'true',
    oninput: () => { d.text = ta.value; },
    onkeydown: (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); send(); }
    },
  });
  const fileInput = h('input', { type: 'file', multiple: true, class: 'visually-hidden', tabindex: '-1', onchange: () => { addFiles(fileInput.files); fileInput.value = ''; } });
  const fileList = h('ul', { class: 'files' });
  const sendBtn = h('button', { type: 'button', class: 'primary', onclick: () => send() }, 'Send answer');
  const buttons = [sendBtn];

  function renderFiles() {
    clear(fileList);
    d.files.forEach((f, i) => fileList.append(h('li', { class: 'file' },
      h('span', { class: 'file-icon', 'aria-hidden': 'true' }, '📎'),
      h('span', { class: 'file-name' }, vis(f.name)),
      h('span', { class: 'muted small' }, fmtSize(f.size)),
      h('button', { type: 'button', class: 'ghost small', title: 'Remove', onclick: () => { d.files.splice(i, 1); renderFiles(); } }, 'Remove'))));
  }
  async function addFiles(list) {
    for (const f of list) {
      if (f.size > 10 * 1024 * 1024) {
        showError(err, plain(f.name) + ' is larger than 10 MiB, the most one file may be.');
        continue;
      }
      try {
        d.files.push({ name: f.name, size: f.size, media_type: f.type || 'application/octet-stream', data: await readBase64(f) });
      } catch {
        showError(err, 'Could not read ' + plain(f.name) + '.');
      }
    }
    renderFiles();
  }
  function send() {
    const value = ta.value;
    if (!value.trim() && !d.files.length) {
      showError(err, 'Write an answer or attach a file first.');
      ta.focus();
      return;
    }
    const body = { value };
    if (d.files.length) body.parts = d.files.map(({ name, media_type, data }) => ({ name, media_type, data }));
    respond(view, body, err, buttons, 'Answer sent' + (d.files.length ? ' with ' + d.files.length + ' file(s)' : ''));
  }

  const drop = h('div', { class: 'drop', tabindex: '0', role: 'button', 'aria-label': 'Attach files',
    onclick: () => fileInput.click(),
    onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); fileInput.click(); } },
  }, h('span', null, 'Drop files here or ', h('span', { class: 'link' }, 'choose files')), fileInput);
  for (const evName of ['dragenter', 'dragover']) {
    drop.addEventListener(evName, (e) => { e.preventDefault(); drop.classList.add('over'); });
  }
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    if (e.dataTransfer && e.dataTransfer.files) addFiles(e.dataTransfer.files);
  });
  // Dropping anywhere on the textarea attaches too.
  ta.addEventListener('dragover', (e) => { if (e.dataTransfer && [...e.dataTransfer.types].includes('Files')) e.preventDefault(); });
  ta.addEventListener('drop', (e) => {
    if (e.dataTransfer && e.dataTransfer.files && e.dataTransfer.files.length) {
      e.preventDefault();
      addFiles(e.dataTransfer.files);
    }
  });
  renderFiles();

  const hint = S.me && S.me.attach_root
    ? h('p', { class: 'hint' }, 'Write ', h('code', null, '@path'), ' to attach a file that is on the server, below its attach root.')
    : null;
  return h('section', { class: 'answer' },
    h('h3', null, 'Your answer'),
    ta, hint, drop, fileList, err,
    h('div', { class: 'actions' }, sendBtn, h('span', { class: 'muted small' }, h('kbd', null, 'Ctrl'), '+', h('kbd', null, 'Enter'), ' to send')));
}

function readBase64(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onerror = () => reject(r.error);
    r.onload = () => {
      const s = String(r.result);
      resolve(s.slice(s.indexOf(',') + 1));
    };
    r.readAsDataURL(file);
  });
}

function fmtSize(n) {
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
  return (n / 1024 / 1024).toFixed(1) + ' MiB';
}

function approvalForm(view) {
  const req = view.request;
  const k = req.kind;
  const d = draftFor(req.id);
  const proposal = parseJson(k.args_json);
  const err = formError();
  const form = h('section', { class: 'answer approval' });

  // --- edit args in place
  if (d.editText == null) d.editText = proposal.ok ? JSON.stringify(proposal.value, null, 2) : k.args_json;
  const editor = h('textarea', {
    class: 'args-edit mono', rows: String(Math.min(18, Math.max(4, d.editText.split('\n').length + 1))),
    spellcheck: 'false', 'aria-label': 'Edited arguments (JSON)', value: d.editText,
    oninput: () => { d.editText = editor.value; checkEdit(); },
    onkeydown: (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); approve(); } },
  });
  const editStatus = h('p', { class: 'edit-status' });
  const diffBox = h('div', { class: 'diff' });
  const editBox = h('div', { class: 'edit-box', hidden: !d.editing },
    h('div', { class: 'section-head' }, h('h3', null, 'Edit arguments'), h('span', { class: 'spacer' }),
      h('button', { type: 'button', class: 'ghost small', onclick: () => { d.editText = proposal.ok ? JSON.stringify(proposal.value, null, 2) : k.args_json; editor.value = d.editText; checkEdit(); } }, 'Reset'),
      h('button', { type: 'button', class: 'ghost small', onclick: () => setEditing(false) }, 'Cancel edit')),
    editor, editStatus, diffBox);
  const editBtn = h('button', { type: 'button', class: 'ghost small edit-btn', onclick: () => setEditing(!d.editing) }, d.editing ? 'Cancel edit' : 'Edit arguments');

  function setEditing(on) {
    d.editing = on;
    editBox.hidden = !on;
    // While editing, the diff shows what changes; the proposal stays one click away.
    const shown = form.closest('.detail');
    if (shown) shown.classList.toggle('editing', on);
    editBtn.textContent = on ? 'Cancel edit' : 'Edit arguments';
    checkEdit();
    if (on) editor.focus();
  }
  /** The edit's state: {changed, valid, text (minified), value}. */
  function editState() {
    if (!d.editing) return { changed: false, valid: true };
    const p = parseJson(editor.value);
    if (!p.ok) return { changed: true, valid: false, error: p.error };
    const text = minifyJson(editor.value.trim());
    const same = proposal.ok ? deepEqual(p.value, proposal.value) : text === minifyJson(k.args_json);
    return { changed: !same, valid: true, text, value: p.value };
  }
  function checkEdit() {
    const st = editState();
    clear(diffBox);
    editor.classList.toggle('invalid', !st.valid);
    if (!d.editing) {
      editStatus.textContent = '';
    } else if (!st.valid) {
      editStatus.className = 'edit-status bad';
      editStatus.textContent = 'Not valid JSON: ' + st.error;
    } else if (!st.changed) {
      editStatus.className = 'edit-status';
      editStatus.textContent = 'Same as proposed.';
    } else {
      editStatus.className = 'edit-status good';
      editStatus.textContent = 'Valid JSON. The call will run with these arguments:';
      const changes = proposal.ok ? jsonDiff(proposal.value, st.value) : [{ op: '~', p: '(whole)', from: k.args_json, to: st.value }];
      diffBox.append(h('ul', { class: 'diff-list' }, changes.slice(0, 200).map((c) => h('li', { class: 'd-' + ({ '+': 'add', '-': 'del', '~': 'chg' })[c.op] },
        h('span', { class: 'd-op' }, c.op === '-' ? '−' : c.op), h('code', { class: 'd-ptr' }, vis(c.p)), ' ',
        c.op === '+' ? h('code', { class: 'd-new' }, vis(shortJson(c.to))) : null,
        c.op === '-' ? h('code', { class: 'd-old' }, vis(shortJson(c.from))) : null,
        c.op === '~' ? [h('code', { class: 'd-old' }, vis(shortJson(c.from))), ' → ', h('code', { class: 'd-new' }, vis(shortJson(c.to)))] : null))));
    }
    approveBtn.disabled = !st.valid;
    approveBtn.textContent = approveLabel(st.changed);
  }

  // --- options of the tool approval
  let optionsBox = null;
  if ((k.options || []).length) {
    optionsBox = h('fieldset', { class: 'options' }, h('legend', null, 'Answer'),
      k.options.map((opt, i) => h('label', { class: 'radio' },
        h('input', { type: 'radio', name: 'opt-' + req.id, value: String(i), checked: d.choice === i, onchange: () => { d.choice = i; } }),
        h('span', null, vis(opt)))),
      h('label', { class: 'radio' }, h('input', { type: 'radio', name: 'opt-' + req.id, value: '', checked: d.choice == null, onchange: () => { d.choice = null; } }), h('span', { class: 'muted' }, 'none')));
  }

  // --- scope and grant narrowing
  const scopeBox = h('div', { class: 'seg', role: 'radiogroup', 'aria-label': 'Scope' });
  for (const [val, label] of [['once', 'Once'], ['session', 'For this session'], ['always', 'Always']]) {
    scopeBox.append(h('label', { class: 'seg-item' },
      h('input', { type: 'radio', name: 'scope-' + req.id, value: val, checked: d.scope === val, onchange: () => { d.scope = val; syncScope(); } }),
      h('span', null, label)));
  }
  const rowsBox = h('div', { class: 'grant-rows' });
  if (d.grantRows == null) {
    d.grantRows = proposal.ok
      ? leaves(proposal.value).slice(0, 64).map(([p, v]) => ({ ptr: p, value: v, on: true, re: exactPattern(v) }))
      : [];
  }
  for (const row of d.grantRows) {
    const cb = h('input', { type: 'checkbox', checked: row.on, onchange: () => { row.on = cb.checked; inp.disabled = !cb.checked; } });
    const inp = h('input', { type: 'text', class: 'mono', value: row.re, spellcheck: 'false', disabled: !row.on, 'aria-label': 'Pattern for ' + plain(row.ptr), oninput: () => { row.re = inp.value; } });
    rowsBox.append(h('label', { class: 'grant-row' }, cb, h('code', { class: 'ptr' }, vis(row.ptr || '(whole)')), inp));
  }
  const narrowBox = h('div', { class: 'narrow', hidden: d.scope === 'once' },
    h('div', { class: 'narrow-choice' },
      h('label', { class: 'radio' }, h('input', { type: 'radio', name: 'narrow-' + req.id, value: 'any', checked: !d.narrow, onchange: () => { d.narrow = false; rowsWrap.hidden = true; } }),
        h('span', null, 'Any call of ', h('code', null, vis(k.tool_name)))),
      h('label', { class: 'radio' }, h('input', { type: 'radio', name: 'narrow-' + req.id, value: 'like', checked: d.narrow, disabled: !d.grantRows.length, onchange: () => { d.narrow = true; rowsWrap.hidden = false; } }),
        h('span', null, 'Only calls like this one'))));
  const rowsWrap = h('div', { class: 'rows-wrap', hidden: !d.narrow },
    h('p', { class: 'hint' }, 'A later call is approved only when every checked argument matches its pattern (a regular expression).'), rowsBox);
  narrowBox.append(rowsWrap);

  function syncScope() {
    narrowBox.hidden = d.scope === 'once';
    checkEdit();
  }
  function approveLabel(edited) {
    return 'Approve ' + SCOPE_LABEL[d.scope] + (edited ? ' with edits' : '');
  }

  // --- more: injected context, reason
  const injected = h('textarea', { rows: '2', placeholder: 'Context for the agent before the tool runs (optional)', value: d.injected, 'aria-label': 'Injected context', oninput: () => { d.injected = injected.value; } });
  const reason = h('input', { type: 'text', placeholder: 'Reason, for the record (optional)', value: d.reason, 'aria-label': 'Reason', oninput: () => { d.reason = reason.value; } });
  const more = h('details', { class: 'more', open: d.injected || d.reason ? true : null },
    h('summary', null, 'Injected context and reason'),
    h('label', { class: 'field' }, h('span', null, 'Injected context'), injected),
    h('label', { class: 'field' }, h('span', null, 'Reason'), reason));

  // --- deny with feedback
  const feedback = h('textarea', {
    class: 'feedback', rows: '2', placeholder: 'Tell the agent what to do instead (optional)', value: d.feedback,
    'aria-label': 'Deny feedback',
    oninput: () => { d.feedback = feedback.value; },
    onkeydown: (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); deny(); } },
  });

  const approveBtn = h('button', { type: 'button', class: 'approve-btn success', onclick: () => approve() }, approveLabel(false));
  const denyBtn = h('button', { type: 'button', class: 'deny-btn danger', onclick: () => deny() }, 'Deny');
  const buttons = [approveBtn, denyBtn];

  function approve() {
    const st = editState();
    if (!st.valid) {
      showError(err, 'The edited arguments are not valid JSON; fix them or cancel the edit.');
      editor.focus();
      return;
    }
    const body = { approved: true, scope: d.scope };
    if (d.choice != null) body.choice_index = d.choice;
    if (st.changed) body.modified_args_json = st.text;
    if (d.scope !== 'once' && d.narrow) {
      const ga = {};
      for (const row of d.grantRows) if (row.on && row.re) ga[row.ptr] = row.re;
      if (!Object.keys(ga).length) {
        showError(err, 'Check at least one argument, or choose "Any call".');
        return;
      }
      body.grant_args = ga;
    }
    if (injected.value.trim()) body.injected_context = injected.value;
    if (reason.value.trim()) body.reason = reason.value.trim();
    respond(view, body, err, buttons, 'Approved ' + SCOPE_LABEL[d.scope] + ': ' + plain(k.tool_name) + (st.changed ? ' (edited)' : ''));
  }
  function deny() {
    const body = { approved: false, scope: 'once' };
    const fb = feedback.value.trim();
    if (fb) body.feedback = fb;
    if (d.choice != null) body.choice_index = d.choice;
    if (reason.value.trim()) body.reason = reason.value.trim();
    respond(view, body, err, buttons, 'Denied: ' + plain(k.tool_name) + (fb ? ' (with feedback)' : ''));
  }
  form.approve = approve;
  form.deny = deny;
  form.edit = () => setEditing(true);
  form.focusFeedback = () => feedback.focus();

  form.editBtn = editBtn;
  append(form, [
    editBox,
    optionsBox,
    h('div', { class: 'block' }, h('h3', null, 'Approve'), scopeBox, narrowBox, more,
      h('div', { class: 'actions' }, approveBtn, h('span', { class: 'muted small' }, h('kbd', null, 'a')))),
    h('div', { class: 'block deny-block' }, h('h3', null, 'Or deny'), feedback,
      h('div', { class: 'actions' }, denyBtn, h('span', { class: 'muted small' }, h('kbd', null, 'd'), ' · ', h('kbd', null, 'f'), ' to write feedback'))),
    err]);
  checkEdit();
  return form;
}

// ---------------------------------------------------------------- outcomes

/** A settled interaction's answer, described for a person. */
function describe(req, resp) {
  const k = req.kind || {};
  if (req.status === 'expired') return [h('strong', null, 'Expired'), ' without an answer (treated as a deny).'];
  if (req.status === 'cancelled') return [h('strong', null, 'Cancelled'), req.answered_by ? [' by ', vis(req.answered_by)] : null, '.'];
  if (!resp) return [h('strong', null, 'Answered')];
  if (k.type === 'tool_approval' || resp.approved != null) {
    if (resp.approved) {
      const out = [h('strong', { class: 'ok-text' }, 'Approved ' + SCOPE_LABEL[resp.scope || 'once'])];
      if (resp.grant_args && Object.keys(resp.grant_args).length) {
        out.push(' for calls like this one (', Object.entries(resp.grant_args).map(([p, re], i) =>
          [i ? ', ' : '', h('code', null, vis(p)), ' ~ ', h('code', null, vis(re))]), ')');
      }
      if (resp.modified_args_json) out.push(', with edited arguments ', h('code', { class: 'inline-json' }, vis(short(resp.modified_args_json, 300))));
      if (resp.choice_index != null && (k.options || [])[resp.choice_index] != null) out.push(', option ', h('q', null, vis(k.options[resp.choice_index])));
      if (resp.injected_context) out.push(h('div', { class: 'sub' }, 'Injected context: ', vis(resp.injected_context)));
      if (resp.reason) out.push(h('div', { class: 'sub' }, 'Reason: ', vis(resp.reason)));
      return out;
    }
    const out = [h('strong', { class: 'bad-text' }, 'Denied')];
    if (resp.feedback) out.push(h('div', { class: 'sub' }, 'Feedback: ', h('q', null, vis(resp.feedback))));
    if (resp.reason) out.push(h('div', { class: 'sub' }, 'Reason: ', vis(resp.reason)));
    return out;
  }
  if (resp.choice_index != null) {
    const opt = (k.options || [])[resp.choice_index];
    return [h('strong', null, 'Chose '), opt != null ? h('q', null, vis(opt)) : 'option ' + (resp.choice_index + 1)];
  }
  const out = [h('strong', null, 'Replied'), h('div', { class: 'reply-text' }, vis(resp.value))];
  if ((resp.parts || []).length) {
    out.push(h('ul', { class: 'files' }, resp.parts.map((p) => h('li', { class: 'file' },
      h('span', { class: 'file-icon', 'aria-hidden': 'true' }, '📎'),
      /^[0-9a-f]{64}$/.test(p.sha256 || '')
        ? h('a', { href: 'v1/blobs/' + p.sha256, download: plain(p.name), rel: 'noopener' }, vis(p.name))
        : h('span', null, vis(p.name)),
      h('span', { class: 'muted small' }, vis(p.media_type), ' · ', fmtSize(p.size || 0))))));
  }
  return out;
}

function outcome(view, raced) {
  const req = view.request;
  const box = h('section', { class: 'outcome outcome-' + req.status });
  if (raced && req.status === 'answered') {
    box.append(h('div', { class: 'banner info', role: 'status' },
      h('strong', null, req.answered_by ? ['Answered by ', vis(req.answered_by), ' first. '] : 'Someone else answered first. '),
      'Their answer stands; yours was not sent.'));
  } else if (raced) {
    box.append(h('div', { class: 'banner info', role: 'status' },
      req.status === 'expired'
        ? 'This interaction timed out before an answer; the agent was told it was denied.'
        : req.status === 'cancelled'
          ? 'This question was cancelled (by the agent, or by its timeout); it can no longer be answered.'
          : 'This interaction can no longer be answered.'));
  }
  box.append(h('div', { class: 'outcome-body' }, describe(req, view.response)),
    h('p', { class: 'muted small' },
      req.answered_by ? ['by ', h('span', { class: 'answered-by' }, vis(req.answered_by))] : null,
      req.answered_at ? [' · ', timeEl(req.answered_at)] : null));
  const next = pendingList().find((v) => idOf(v) !== req.id);
  box.append(h('div', { class: 'actions' },
    next ? h('button', { type: 'button', class: 'primary', onclick: () => select(idOf(next)) }, 'Next waiting item') : null,
    h('button', { type: 'button', class: 'ghost', onclick: back }, 'Close')));
  return box;
}

// ---------------------------------------------------------------- history

const H = { items: [], cursor: null, loading: false };

async function loadHistory(more = false) {
  if (H.loading) return;
  H.loading = true;
  const status = $('history-status').value;
  const sid = $('history-session').value.trim();
  let q = 'v1/interactions?limit=50&status=' + (status === 'finished' ? 'all' : status);
  if (sid) q += '&session_id=' + encodeURIComponent(sid);
  if (more && H.cursor) q += '&cursor=' + encodeURIComponent(H.cursor);
  const r = await api('GET', q);
  H.loading = false;
  const body = $('history-body');
  if (!r.ok) {
    clear(body).append(unavailable(r, 'history'));
    return;
  }
  const items = listOf(r.body).map(asView).filter((v) => v && v.request.status !== 'pending');
  H.items = more ? H.items.concat(items) : items;
  H.cursor = r.body && r.body.next_cursor;
  renderHistory();
}

function renderHistory() {
  const body = clear($('history-body'));
  if (!H.items.length && !H.cursor) {
    body.append(h('div', { class: 'empty' }, h('p', null, 'No finished interactions yet.')));
    return;
  }
  const ul = h('ul', { class: 'history' });
  for (const v of H.items) {
    const req = v.request;
    const k = req.kind || {};
    const details = h('details', { class: 'hist card' + (suspicious(v) ? ' flagged' : ''), dataset: { id: req.id, status: req.status } },
      h('summary', null,
        h('div', { class: 'hist-top' },
          statusBadge(req.status),
          h('span', { class: 'kind kind-' + k.type }, KIND_LABEL[k.type] || 'Unknown'),
          suspicious(v) ? h('span', { class: 'warn-badge', title: 'Hidden or direction-changing characters' }, '⚠') : null,
          h('span', { class: 'hist-title' }, vis(summary(req))),
          h('span', { class: 'spacer' }),
          h('span', { class: 'muted small' }, vis(req.session_id))),
        h('div', { class: 'hist-how' }, describeShort(req, v.response),
          req.answered_by ? [' · by ', h('strong', { class: 'answered-by' }, vis(req.answered_by))] : null,
          ' · ', timeEl(req.answered_at || req.expires_at || req.created_at))));
    details.addEventListener('toggle', () => {
      if (details.open && !details.dataset.filled) {
        details.dataset.filled = '1';
        details.append(h('div', { class: 'hist-body' }, question(v), h('div', { class: 'outcome-body' }, describe(req, v.response))));
      }
    }, { once: false });
    ul.append(h('li', null, details));
  }
  body.append(ul);
  if (H.cursor) body.append(h('div', { class: 'more-row' }, h('button', { type: 'button', class: 'ghost', onclick: () => loadHistory(true) }, 'Load more')));
}

function describeShort(req, resp) {
  if (req.status === 'expired') return 'Expired';
  if (req.status === 'cancelled') return 'Cancelled';
  if (!resp) return 'Answered';
  if (resp.approved === true) return 'Approved ' + SCOPE_LABEL[resp.scope || 'once'] + (resp.modified_args_json ? ' with edits' : '') + (resp.grant_args ? ' (narrowed)' : '');
  if (resp.approved === false) return resp.feedback ? ['Denied: ', h('q', null, vis(short(resp.feedback, 80)))] : 'Denied';
  if (resp.choice_index != null) {
    const opt = ((req.kind || {}).options || [])[resp.choice_index];
    return ['Chose ', opt != null ? h('q', null, vis(short(opt, 60))) : '#' + (resp.choice_index + 1)];
  }
  return ['Replied ', h('q', null, vis(short(resp.value || '', 80))), (resp.parts || []).length ? ' + ' + resp.parts.length + ' file(s)' : ''];
}

function unavailable(r, what) {
  if (r.status === 404 || r.status === 405 || r.status === 501) {
    return h('div', { class: 'empty unavailable', dataset: { unavailable: what } },
      h('p', null, h('strong', null, 'Not available on this server.')),
      h('p', { class: 'muted' }, 'This lev server does not offer ' + what + ' yet.'));
  }
  if (r.status === 403) {
    return h('div', { class: 'empty' }, h('p', null, 'Your token may not see ' + what + '.'));
  }
  return h('div', { class: 'empty' }, h('p', { class: 'form-error' }, 'Could not load ' + what + ': ' + r.error));
}

// ---------------------------------------------------------------- grants

async function loadGrants() {
  const body = $('grants-body');
  const r = await api('GET', 'v1/grants');
  clear(body);
  if (!r.ok) {
    body.append(unavailable(r, 'grants'));
    return;
  }
  const grants = listOf(r.body, 'grants');
  if (!grants.length) {
    body.append(h('div', { class: 'empty' }, h('p', null, 'No grants.'), h('p', { class: 'muted' }, 'Approving a tool call "for this session" or "always" makes one.')));
    return;
  }
  const table = h('table', { class: 'table' },
    h('thead', null, h('tr', null, ['Tool', 'Scope', 'Caller', 'Conversation', 'Sandbox', 'Covers', 'Only when', 'By', 'Made', ''].map((t) => h('th', null, t)))));
  const tbody = h('tbody');
  for (const g of grants) {
    const revoke = h('button', { type: 'button', class: 'danger small', dataset: { grant: g.id } }, 'Revoke');
    revoke.addEventListener('click', async () => {
      if (!revoke.classList.contains('confirm')) {
        revoke.classList.add('confirm');
        revoke.textContent = 'Really revoke?';
        setTimeout(() => { revoke.classList.remove('confirm'); revoke.textContent = 'Revoke'; }, 4000);
        return;
      }
      revoke.disabled = true;
      const d = await api('DELETE', 'v1/grants/' + encodeURIComponent(g.id));
      if (d.ok || d.status === 404) {
        toast('Grant revoked.', 'ok');
        loadGrants();
      } else {
        revoke.disabled = false;
        toast('Could not revoke: ' + d.error, 'error');
      }
    });
    tbody.append(h('tr', { dataset: { grant: g.id } },
      h('td', { 'data-label': 'Tool' }, h('code', null, vis(g.tool_name))),
      h('td', { 'data-label': 'Scope' }, h('span', { class: 'status status-' + g.scope }, vis(g.scope))),
      h('td', { 'data-label': 'Caller' }, vis(g.caller || '—')),
      h('td', { 'data-label': 'Conversation' }, vis(g.conversation_id || (g.scope === 'always' ? 'any' : '—'))),
      h('td', { 'data-label': 'Sandbox' }, vis(g.sandbox_mode || '—')),
      h('td', { 'data-label': 'Covers' }, (g.covered_capabilities || []).length ? g.covered_capabilities.map((c) => h('span', { class: 'cap' }, vis(c))) : '—'),
      h('td', { 'data-label': 'Only when', class: 'wide' }, g.grant_args && Object.keys(g.grant_args).length
        ? h('ul', { class: 'plain' }, Object.entries(g.grant_args).map(([p, re]) => h('li', null, h('code', null, vis(p)), ' ~ ', h('code', null, vis(re)))))
        : h('span', { class: 'muted' }, 'any args')),
      h('td', { 'data-label': 'By' }, vis(g.approver || '')),
      h('td', { 'data-label': 'Made', class: 'nowrap' }, timeEl(g.created_at)),
      h('td', { class: 'right' }, revoke)));
  }
  table.append(tbody);
  body.append(h('div', { class: 'table-wrap' }, table));
}

// ---------------------------------------------------------------- tasks and operators

async function loadTasks() {
  const r = await api('GET', 'v1/tasks');
  S.tasksAvailable = r.ok ? true : r;
  if (r.ok) {
    S.tasks.clear();
    for (const t of listOf(r.body, 'tasks')) if (t && t.id) S.tasks.set(t.id, t);
    await checkOperators([...S.tasks.values()].map((t) => t.session_id));
  }
  renderTasks();
  renderOperators();
}

function renderOperators() {
  const body = clear($('operators-body'));
  if (!S.operators.size) {
    body.append(h('div', { class: 'empty slim' }, h('p', { class: 'muted' }, 'No session has an operator connected.')));
    return;
  }
  body.append(h('ul', { class: 'op-list' }, [...S.operators].sort((a, b) => a[0].localeCompare(b[0])).map(([sid, who]) =>
    h('li', { class: 'chip static', dataset: { session: sid } }, h('span', { class: 'op-dot' }), vis(sid),
      who ? h('span', { class: 'n' }, ' · ', vis(who)) : null))));
}

function renderTasks() {
  const body = clear($('tasks-body'));
  if (S.tasksAvailable !== true) {
    if (S.tasksAvailable) body.append(unavailable(S.tasksAvailable, 'tasks'));
    return;
  }
  const tasks = [...S.tasks.values()].sort((a, b) => (b.created_at || '').localeCompare(a.created_at || ''));
  if (!tasks.length) {
    body.append(h('div', { class: 'empty' }, h('p', null, 'No tasks.'), h('p', { class: 'muted' }, 'Sub-agents an operator spawns show here.')));
    return;
  }
  const ul = h('ul', { class: 'history' });
  for (const t of tasks) {
    ul.append(h('li', null, h('details', { class: 'hist card', dataset: { task: t.id } },
      h('summary', null, h('div', { class: 'hist-top' },
        h('span', { class: 'status status-' + t.status }, vis(t.status)),
        h('code', null, vis(t.id)),
        h('span', { class: 'hist-title' }, vis(short(t.spawn, 100))),
        h('span', { class: 'spacer' }),
        opDot(t.session_id), h('span', { class: 'muted small' }, vis(t.session_id), ' · ', timeEl(t.updated_at || t.created_at)))),
      h('div', { class: 'hist-body' },
        h('h4', null, 'Spawn'), h('pre', { class: 'json' }, vis(JSON.stringify(t.spawn, null, 2))),
        t.last_result != null ? [h('h4', null, 'Last result'), h('pre', { class: 'json' }, vis(JSON.stringify(t.last_result, null, 2)))] : null,
        t.error ? [h('h4', null, 'Error'), h('pre', { class: 'json bad-text' }, vis(t.error))] : null,
        t.output_tail ? [h('h4', null, 'Output'), h('pre', { class: 'json' }, vis(t.output_tail))] : null))));
  }
  body.append(ul);
}

// ---------------------------------------------------------------- audit

const A = { entries: [], head: null, after: 0 };

async function loadAudit(more = false) {
  const body = $('audit-body');
  if (!more) {
    A.entries = [];
    A.after = 0;
  }
  const r = await api('GET', 'v1/audit?after=' + A.after);
  if (!r.ok) {
    clear(body).append(unavailable(r, 'the audit log'));
    return;
  }
  const entries = listOf(r.body, 'entries');
  A.head = r.body && r.body.head;
  A.entries = A.entries.concat(entries);
  if (entries.length) A.after = entries[entries.length - 1].seq;
  renderAudit(entries.length > 0 && A.head && A.after < A.head.seq);
}

function renderAudit(hasMore) {
  const body = clear($('audit-body'));
  if (A.head) {
    const kid = A.head.signature && A.head.signature.signatures && A.head.signature.signatures[0] ? A.head.signature.signatures[0].keyid : '';
    body.append(h('div', { class: 'head-card card' },
      h('div', null, h('span', { class: 'label' }, 'Chain head'), ' #', String(A.head.seq)),
      h('div', { class: 'mono hash' }, vis(A.head.hash)),
      kid ? h('div', { class: 'muted small' }, 'signed by key ', h('code', null, vis(kid))) : null));
  }
  if (!A.entries.length) {
    body.append(h('div', { class: 'empty' }, h('p', null, 'The audit log is empty.')));
    return;
  }
  const tbody = h('tbody');
  for (const e of [...A.entries].reverse()) {
    tbody.append(h('tr', null,
      h('td', { 'data-label': '#' }, String(e.seq)),
      h('td', { 'data-label': 'When' }, timeEl(e.at)),
      h('td', { 'data-label': 'What' }, h('code', null, vis(e.action))),
      h('td', { 'data-label': 'Who' }, vis(e.actor)),
      h('td', { 'data-label': 'Details', class: 'audit-data wide' }, h('details', null, h('summary', null, vis(short(e.data, 90))),
        h('pre', { class: 'json' }, vis(JSON.stringify(e.data, null, 2))),
        h('div', { class: 'muted small mono' }, 'hash ', vis(e.hash)))))); 
  }
  body.append(h('div', { class: 'table-wrap' }, h('table', { class: 'table audit' },
    h('thead', null, h('tr', null, ['#', 'When', 'What', 'Who', 'Details'].map((t) => h('th', null, t)))), tbody)));
  if (hasMore) body.append(h('div', { class: 'more-row' }, h('button', { type: 'button', class: 'ghost', onclick: () => loadAudit(true) }, 'Load more')));
}

// ---------------------------------------------------------------- routing, keys, theme

async function onHashChange() {
  // A login link opened in a tab that already shows the page.
  if (await loginFromHash()) return;
  route();
}

function route() {
  if (!S.me) return;
  let v = location.hash.replace(/^#/, '') || 'inbox';
  if (!['inbox', 'history', 'grants', 'tasks', 'audit'].includes(v)) v = 'inbox';
  if (v === 'audit' && S.me.role !== 'admin') v = 'inbox';
  // Coming back to the inbox from another tab shows the list (on a phone).
  if (v === 'inbox' && S.view !== 'inbox') back();
  S.view = v;
  showOnly('view-' + v);
  for (const a of document.querySelectorAll('#tabs a')) a.classList.toggle('on', a.dataset.view === v);
  if (v === 'inbox') renderInbox();
  if (v === 'history') loadHistory();
  if (v === 'grants') loadGrants();
  if (v === 'tasks') loadTasks();
  if (v === 'audit') loadAudit();
}

function currentForm() {
  return document.querySelector('#detail .answer');
}

function onKey(e) {
  if (!S.me || S.view !== 'inbox' || e.altKey || e.ctrlKey || e.metaKey) return;
  const t = e.target;
  const typing = t && (t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || (t.tagName === 'INPUT' && !['radio', 'checkbox', 'button'].includes(t.type)));
  if (typing) {
    if (e.key === 'Escape') t.blur();
    return;
  }
  if ($('help').open) return;
  const form = currentForm();
  const view = S.selected ? S.items.get(S.selected) : null;
  const kind = view && view.request.status === 'pending' ? view.request.kind.type : null;
  let handled = true;
  switch (e.key) {
    case 'j': case 'ArrowDown': move(1); break;
    case 'k': case 'ArrowUp': move(-1); break;
    case '?': $('help').showModal(); break;
    case 'a': if (kind === 'tool_approval' && form) form.approve(); else handled = false; break;
    case 'd': if (kind === 'tool_approval' && form) form.deny(); else handled = false; break;
    case 'f': if (kind === 'tool_approval' && form) form.focusFeedback(); else handled = false; break;
    case 'e': if (kind === 'tool_approval' && form) form.edit(); else handled = false; break;
    case 'r': {
      const ta = form && form.querySelector('textarea.reply');
      if (ta) ta.focus(); else handled = false;
      break;
    }
    case 'Escape': if (document.body.classList.contains('show-detail')) back(); else handled = false; break;
    default:
      if (/^[1-9]$/.test(e.key) && kind === 'multiple_choice' && form) {
        const b = form.querySelector('button.choice[data-choice="' + (Number(e.key) - 1) + '"]');
        if (b) b.click(); else handled = false;
      } else handled = false;
  }
  if (handled) e.preventDefault();
}

const THEMES = ['auto', 'light', 'dark'];

function applyTheme() {
  let t = 'auto';
  try {
    t = localStorage.getItem('lev-theme') || 'auto';
  } catch {
    /* storage off */
  }
  if (!THEMES.includes(t)) t = 'auto';
  if (t === 'auto') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
  const btn = $('theme-btn');
  if (btn) btn.title = 'Theme: ' + (t === 'auto' ? 'follows the system' : t) + ' (click to change)';
}

function cycleTheme() {
  let t = document.documentElement.dataset.theme || 'auto';
  t = THEMES[(THEMES.indexOf(t) + 1) % THEMES.length];
  try {
    localStorage.setItem('lev-theme', t);
  } catch {
    /* storage off */
  }
  applyTheme();
}

function bindStatic() {
  $('login-form').addEventListener('submit', submitLogin);
  $('logout-btn').addEventListener('click', logout);
  $('notify-btn').addEventListener('click', askNotify);
  $('theme-btn').addEventListener('click', cycleTheme);
  $('help-btn').addEventListener('click', () => $('help').showModal());
  $('history-status').addEventListener('change', () => loadHistory());
  $('history-refresh').addEventListener('click', () => loadHistory());
  let timer = null;
  $('history-session').addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => loadHistory(), 300);
  });
  window.addEventListener('hashchange', onHashChange);
  document.addEventListener('keydown', onKey);
  setInterval(refreshTimes, 30000);
}

boot();

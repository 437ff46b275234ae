// lev dashboard: routing, keys, theme and boot. Plain JavaScript in ES
// modules, no framework, no build step; the server embeds each module and
// serves it as /assets/NAME.js, and index.html preloads them all. (The
// server writes its version into the page's and the imports' addresses,
// ?v=..., so the browser keeps the modules until the binary changes.)
//
// Safety rule for every module: everything that comes from an agent
// (prompts, args, names, titles, options, feedback, metadata, ids) is
// rendered as inert text through `vis()` (text nodes and createElement
// only). innerHTML is never used, no URL is ever built from agent data but
// blob links from a validated hex digest, and no inline script or handler
// exists (the page has a strict CSP). Hidden characters
// (lev_protocol::text::HIDDEN: controls, bidi controls, zero-width
// characters, tags, variation selectors, fillers) are shown as visible
// ⟨U+XXXX⟩ tokens and the item is flagged. Agent JSON is read losslessly
// (jsonParse), never through JSON.parse/JSON.stringify.
//
// The modules, in layers: a module imports only modules on the lines above
// it (and, within the base, only the ones before it), so no import loop
// exists. dashboard.rs's tests read the imports and hold this.
//
//   base (imports no view)   bus  state  json  text  dom  api
//   views on the base        votes  outcomes  tasks  grants  audit  stats
//                            answer (votes)
//                            detail (answer, outcomes, votes, tasks)
//                            inbox (detail, tasks)
//                            notify (inbox)  history (inbox, detail, outcomes)
//                            live (inbox, tasks, notify)
//                            login (inbox, live, notify, votes)
//   the page                 main (every view)
//
// The few calls that go down-up (a 401 logs out, the detail pane's buttons
// go back to the list, login routes) go through bus.js's `up`, which this
// module binds once before booting.

import { bindUp } from './bus.js';
import { S } from './state.js';
import { $, refreshTimes } from './dom.js';
import { api } from './api.js';
import { addPasskey } from './votes.js';
import { loadTasks } from './tasks.js';
import { loadGrants } from './grants.js';
import { loadAudit } from './audit.js';
import { loadStats } from './stats.js';
import { advanceFrom, back, move, refreshOne, renderInbox, renderSessions, select } from './inbox.js';
import { askNotify } from './notify.js';
import { loadHistory } from './history.js';
import { loggedIn, loggedOut, loginFromHash, logout, showLogin, showOnly, submitLogin } from './login.js';

async function onHashChange() {
  // A login link opened in a tab that already shows the page.
  if (await loginFromHash()) return;
  route();
}

function route() {
  if (!S.me) return;
  let v = location.hash.replace(/^#/, '') || 'inbox';
  if (!['inbox', 'history', 'grants', 'tasks', 'stats', 'audit'].includes(v)) v = 'inbox';
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
  if (v === 'stats') loadStats();
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

/** auto -> the opposite of what the system shows -> the same -> auto: the
 *  first click always changes what is on screen. */
function cycleTheme() {
  const t0 = document.documentElement.dataset.theme || 'auto';
  const sys = window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
  const other = sys === 'dark' ? 'light' : 'dark';
  const order = ['auto', other, sys];
  let t = order[(order.indexOf(t0) + 1) % order.length];
  if (!THEMES.includes(t)) t = 'auto';
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
  $('passkey-btn').addEventListener('click', addPasskey);
  $('theme-btn').addEventListener('click', cycleTheme);
  $('inbox-search').addEventListener('input', (e) => { S.query = e.target.value; renderInbox(); });
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

async function boot() {
  applyTheme();
  bindStatic();
  if (await loginFromHash()) return;
  const r = await api('GET', 'v1/me');
  if (r.ok) return loggedIn(r.body);
  return showLogin(r.status === 401 || r.status === 404 ? null : r.error);
}

bindUp({ loggedOut, route, renderInbox, renderSessions, select, back, advanceFrom, refreshOne });
boot();

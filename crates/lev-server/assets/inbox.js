// The inbox: what is waiting, the session bar, the filter, the selection.
//
// View (see main.js for the layers and the page's safety rules).

import { asView, idOf, KIND_LABEL, pendingList, S } from './state.js';
import { argsSummary } from './json.js';
import { suspicious, vis } from './text.js';
import { $, clear, h, timeEl, toast } from './dom.js';
import { api, nextCursor, pageItems } from './api.js';
import { checkOperators, opDot } from './tasks.js';
import { highRisk, renderDetailIfChanged, riskOf } from './detail.js';

export async function loadPending() {
  const seen = new Set();
  let cursor = null;
  for (let page = 0; page < 20; page++) {
    const q = 'v1/interactions?status=pending&limit=200' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '');
    const r = await api('GET', q);
    if (!r.ok) {
      if (r.status !== 401) toast('Could not load the inbox: ' + r.error, 'error');
      return;
    }
    for (const v of pageItems(r.body)) {
      const view = asView(v);
      const id = idOf(view);
      if (!id) continue;
      seen.add(id);
      S.items.set(id, view);
    }
    cursor = nextCursor(r.body);
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

export async function refreshOne(id) {
  const r = await api('GET', 'v1/interactions/' + encodeURIComponent(id));
  if (r.ok) {
    const view = asView(r.body);
    if (idOf(view) === id) {
      S.items.set(id, view);
      renderInbox();
    }
  }
}

function visibleList() {
  const all = pendingList();
  const bySession = S.session ? all.filter((v) => v.request.session_id === S.session) : all;
  return bySession.filter(matchesQuery);
}

/**
 * The inbox filter: every word must match. `session:`, `caller:`, `tool:`
 * and `kind:` words match that field (by prefix, any case); other words
 * match anywhere in the item's text (title, prompt, points, tool, args,
 * reason, session, caller).
 */
function matchesQuery(view) {
  const q = (S.query || '').trim().toLowerCase();
  if (!q) return true;
  const req = view.request;
  const k = req.kind || {};
  const fields = {
    session: [req.session_id], caller: [req.caller], tool: [k.tool_name],
    kind: [k.type, KIND_LABEL[k.type]],
  };
  const text = [req.title, k.prompt, k.tool_name, k.args_json, req.reason, req.session_id, req.caller, req.id,
    KIND_LABEL[k.type], ...(k.points || []).map((p) => p.id + ' ' + p.text), ...(k.options || [])]
    .filter(Boolean).join('\n').toLowerCase();
  return q.split(/\s+/).every((word) => {
    const m = /^(session|caller|tool|kind):(.*)$/.exec(word);
    if (m) return fields[m[1]].some((f) => f != null && String(f).toLowerCase().replace(/ /g, '_').startsWith(m[2]));
    return text.includes(word);
  });
}

export function summary(req) {
  const k = req.kind || {};
  if (req.title) return req.title;
  if (k.type === 'tool_approval') return k.tool_name + ': ' + argsSummary(k.args_json);
  return (k.prompt || '').split('\n')[0];
}

export function renderInbox() {
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
  // "Nothing is waiting" only when nothing is; a filter that hides all says so.
  $('inbox-empty').hidden = n > 0;
  $('inbox-nomatch').hidden = !(n > 0 && list.length === 0);
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
  const risky = riskOf(k).length > 0 || highRisk(req);
  const li = h('li', {
    class: 'item' + (req.id === S.selected ? ' selected' : '') + (flagged ? ' flagged' : '') + (risky ? ' risky' : ''),
    role: 'option',
    tabindex: '-1',
    'aria-selected': req.id === S.selected ? 'true' : 'false',
    dataset: { id: req.id, kind: k.type || '' },
    onclick: () => select(req.id),
  },
  h('div', { class: 'item-top' },
    h('span', { class: 'kind kind-' + (k.type || 'unknown') }, KIND_LABEL[k.type] || 'Unknown'),
    flagged ? h('span', { class: 'warn-badge', title: 'Hidden or direction-changing characters' }, '⚠') : null,
    risky ? h('span', {
      class: 'risk-badge',
      title: 'Risky: ' + [...(highRisk(req) ? ['marked high risk by the policy'] : []),
        ...riskOf(k).map(([, m]) => m)].join(', '),
    }, highRisk(req) ? 'high risk' : 'risky') : null,
    h('span', { class: 'spacer' }),
    timeEl(req.created_at)),
  h('div', { class: 'item-title' }, vis(summary(req))),
  h('div', { class: 'item-meta' },
    h('span', { class: 'session' }, vis(req.session_id)),
    req.caller ? h('span', { class: 'caller' }, '· ', vis(req.caller)) : null,
    req.expires_at ? h('span', { class: 'expires' }, '· expires ', timeEl(req.expires_at)) : null));
  return li;
}

export function renderSessions() {
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

export function select(id) {
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

export function move(delta) {
  const list = visibleList();
  if (!list.length) return;
  let i = list.findIndex((v) => idOf(v) === S.selected);
  if (i < 0) i = delta > 0 ? -1 : list.length;
  const next = list[Math.max(0, Math.min(list.length - 1, i + delta))];
  select(idOf(next));
}

export function back() {
  document.body.classList.remove('show-detail');
  if (S.selected) {
    const v = S.items.get(S.selected);
    if (v && v.request.status !== 'pending') S.items.delete(S.selected);
  }
  S.selected = null;
  renderInbox();
}

/** Move on from an item this page just answered. */
export function advanceFrom(id) {
  const list = visibleList().filter((v) => idOf(v) !== id);
  S.items.delete(id);
  S.drafts.delete(id);
  S.selected = null;
  const wide = window.matchMedia('(min-width: 761px)').matches;
  if (list.length && wide) S.selected = idOf(list[0]);
  if (!wide) document.body.classList.remove('show-detail');
  renderInbox();
}

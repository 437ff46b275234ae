// Tasks and operators: which sessions have an operator connected, and the
// tasks page.
//
// View (see main.js for the layers and the page's safety rules); the inbox's
// session bar is redrawn through bus.js.

import { up } from './bus.js';
import { S } from './state.js';
import { short } from './json.js';
import { plain, vis } from './text.js';
import { $, clear, h, jsonBlock, timeEl, unavailable } from './dom.js';
import { api, getPages } from './api.js';

export function opDot(sid) {
  if (!S.operators.has(sid)) return null;
  const who = S.operators.get(sid);
  return h('span', { class: 'op-dot', title: 'An operator is connected to this session' + (who ? ': ' + plain(who) : '') });
}

/** Ask which of `sessions` have an operator connected (events keep it current after). */
export async function checkOperators(sessions) {
  const fresh = [...new Set(sessions)].filter((sid) => sid && !S.operatorsChecked.has(sid)).slice(0, 500);
  if (!fresh.length) return;
  const r = await api('GET', 'v1/operators?sessions=' + encodeURIComponent(fresh.join(',')));
  if (!r.ok) return;
  for (const sid of fresh) S.operatorsChecked.add(sid);
  for (const row of (r.body && Array.isArray(r.body.sessions) ? r.body.sessions : [])) {
    if (!row || typeof row.session_id !== 'string') continue;
    if (row.connected) {
      if (!S.operators.has(row.session_id)) S.operators.set(row.session_id, '');
    } else {
      S.operators.delete(row.session_id);
    }
  }
  up.renderSessions();
  if (S.view === 'tasks') renderOperators();
}

export async function loadTasks() {
  // The newest tasks: up to five pages of 100.
  const r = await getPages('v1/tasks?limit=100', 5);
  S.tasksAvailable = r.ok ? true : r;
  if (r.ok) {
    S.tasks.clear();
    for (const t of r.items) if (t && t.id) S.tasks.set(t.id, t);
    await checkOperators([...S.tasks.values()].map((t) => t.session_id));
  }
  renderTasks();
  renderOperators();
}

export function renderOperators() {
  const body = clear($('operators-body'));
  if (!S.operators.size) {
    body.append(h('div', { class: 'empty slim' }, h('p', { class: 'muted' }, 'No session has an operator connected.')));
    return;
  }
  body.append(h('ul', { class: 'op-list' }, [...S.operators].sort((a, b) => a[0].localeCompare(b[0])).map(([sid, who]) =>
    h('li', { class: 'chip static', dataset: { session: sid } }, h('span', { class: 'op-dot' }), vis(sid),
      who ? h('span', { class: 'n' }, ' · ', vis(who)) : null))));
}

export function renderTasks() {
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
        h('h4', null, 'Spawn'), jsonBlock(t.spawn),
        t.last_result != null ? [h('h4', null, 'Last result'), jsonBlock(t.last_result)] : null,
        t.error ? [h('h4', null, 'Error'), h('pre', { class: 'json bad-text' }, vis(t.error))] : null,
        t.output_tail ? [h('h4', null, 'Output'), h('pre', { class: 'json' }, vis(t.output_tail))] : null))));
  }
  body.append(ul);
}

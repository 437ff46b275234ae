// Live events: the event stream, reconnecting, and what each event changes.
//
// View (see main.js for the layers and the page's safety rules).

import { asView, idOf, S } from './state.js';
import { readJson } from './json.js';
import { $ } from './dom.js';
import { api } from './api.js';
import { checkOperators, renderOperators, renderTasks } from './tasks.js';
import { loadPending, renderInbox, renderSessions } from './inbox.js';
import { notifyNew } from './notify.js';

export function setLive(on, text) {
  S.live = on;
  const el = $('live');
  el.classList.toggle('on', on);
  $('live-text').textContent = text || (on ? 'Live' : 'Reconnecting');
  el.title = on ? 'Live: new questions appear at once' : 'Not connected to the live stream; retrying';
}

export function connectEvents() {
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
  for (const kind of ['interaction.created', 'interaction.answered', 'interaction.expired', 'interaction.cancelled', 'interaction.voted', 'interaction.escalated']) {
    es.addEventListener(kind, (e) => {
      const data = readJson(e.data);
      if (data) onInteraction(kind, data);
    });
  }
  es.addEventListener('task.updated', (e) => {
    const data = readJson(e.data);
    if (data && typeof data.id === 'string') {
      S.tasks.set(data.id, data);
      if (S.view === 'tasks') renderTasks();
    }
  });
  for (const kind of ['operator.connected', 'operator.disconnected']) {
    es.addEventListener(kind, (e) => {
      const data = readJson(e.data);
      const sid = data ? data.session_id : null;
      if (typeof sid !== 'string') return;
      S.operatorsChecked.add(sid);
      if (kind === 'operator.connected') S.operators.set(sid, typeof data.operator === 'string' ? data.operator : '');
      else S.operators.delete(sid);
      renderSessions();
      if (S.view === 'tasks') renderOperators();
    });
  }
}

/**
 * A form's kind with its properties in the order its schema wrote them: an
 * event's JSON has its object keys sorted, the interaction's own read keeps
 * the order, so the copy already held is kept, else the form is read once.
 */
async function orderedForm(id, view) {
  const k = view.request.kind;
  if (!k || k.type !== 'form') return view;
  const held = S.items.get(id);
  let kind = held && held.request.kind && held.request.kind.type === 'form' ? held.request.kind : null;
  if (!kind) {
    const r = await api('GET', 'v1/interactions/' + encodeURIComponent(id));
    const fresh = r.ok ? asView(r.body) : null;
    if (fresh && idOf(fresh) === id) kind = fresh.request.kind;
  }
  return kind ? { ...view, request: { ...view.request, kind } } : view;
}

async function onInteraction(kind, data) {
  const first = asView(data);
  const id = idOf(first);
  if (!id) return;
  const view = await orderedForm(id, first);
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

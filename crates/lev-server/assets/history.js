// The history page: finished interactions.
//
// View (see main.js for the layers and the page's safety rules).

import { asView, KIND_LABEL, SCOPE_LABEL } from './state.js';
import { short } from './json.js';
import { suspicious, vis } from './text.js';
import { $, clear, h, timeEl, unavailable } from './dom.js';
import { api, nextCursor, pageItems } from './api.js';
import { describe } from './outcomes.js';
import { question, statusBadge } from './detail.js';
import { summary } from './inbox.js';

const H = { items: [], cursor: null, loading: false };

export async function loadHistory(more = false) {
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
  const items = pageItems(r.body).map(asView).filter((v) => v && v.request.status !== 'pending');
  H.items = more ? H.items.concat(items) : items;
  H.cursor = nextCursor(r.body);
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
  if (resp.fields) return ['Filled in ', h('q', null, vis(short(Object.keys(resp.fields).map((k) => k + '=' + String(resp.fields[k])).join(', '), 80)))];
  return ['Replied ', h('q', null, vis(short(resp.value || '', 80))), (resp.parts || []).length ? ' + ' + resp.parts.length + ' file(s)' : ''];
}

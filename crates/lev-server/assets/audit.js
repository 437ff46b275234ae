// The audit log page: its entries, their chain links and the signed head.
//
// View (see main.js for the layers and the page's safety rules).

import { short } from './json.js';
import { vis } from './text.js';
import { $, clear, h, jsonBlock, timeEl, unavailable } from './dom.js';
import { api, nextCursor, pageItems } from './api.js';

const A = { entries: [], head: null, cursor: null };

export async function loadAudit(more = false) {
  const body = $('audit-body');
  if (!more) {
    A.entries = [];
    A.cursor = null;
  }
  const r = await api('GET', 'v1/audit' + (more && A.cursor ? '?cursor=' + encodeURIComponent(A.cursor) : ''));
  if (!r.ok) {
    clear(body).append(unavailable(r, 'the audit log'));
    return;
  }
  const entries = pageItems(r.body);
  A.head = r.body && r.body.head;
  A.entries = A.entries.concat(entries);
  A.cursor = nextCursor(r.body);
  renderAudit(entries.length > 0 && A.cursor !== null);
}

/** What an audit entry is about: an interaction, a grant, a token, a call. */
function auditSubject(e) {
  const d = e.data && typeof e.data === 'object' ? e.data : {};
  for (const key of ['interaction_id', 'id', 'grant_id', 'task_id', 'request_id', 'name', 'kid']) {
    if (typeof d[key] === 'string' && d[key]) return d[key];
  }
  if (d.request && typeof d.request.id === 'string') return d.request.id;
  return '';
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
  // The links this page can check: each entry names the one before it, and
  // the newest loaded is the signed head. (`lev audit --verify` rehashes
  // every entry and checks the head's signature.)
  const broken = A.entries.filter((e, i) => i > 0 && e.prev_hash !== A.entries[i - 1].hash).map((e) => e.seq);
  const last = A.entries[A.entries.length - 1];
  const atHead = A.head && last.seq === A.head.seq;
  const headOk = !atHead || last.hash === A.head.hash;
  const ok = !broken.length && headOk;
  body.append(h('p', { class: 'chain-status ' + (ok ? 'good' : 'bad'), role: 'status' },
    ok
      ? ['✓ Chain links intact for entries #', String(A.entries[0].seq), '–#', String(last.seq), atHead ? ', ending at the signed head.' : ' (load more to reach the head).']
      : ['✗ Chain broken', broken.length ? ' before entr' + (broken.length === 1 ? 'y #' : 'ies #') + broken.join(', #') : '', headOk ? '' : '; the newest entry is not the signed head', '. Run ', h('code', null, 'lev audit --verify'), '.']));
  const tbody = h('tbody');
  for (const e of [...A.entries].reverse()) {
    tbody.append(h('tr', { class: broken.includes(e.seq) ? 'chain-break' : null },
      h('td', { 'data-label': '#' }, String(e.seq)),
      h('td', { 'data-label': 'When' }, timeEl(e.at)),
      h('td', { 'data-label': 'Who' }, vis(e.actor)),
      h('td', { 'data-label': 'What' }, h('code', null, vis(e.action))),
      h('td', { 'data-label': 'Subject', class: 'mono' }, vis(auditSubject(e))),
      h('td', { 'data-label': 'Details', class: 'audit-data wide' }, h('details', null, h('summary', null, vis(short(e.data, 90))),
        jsonBlock(e.data),
        h('div', { class: 'muted small mono' }, 'hash ', vis(e.hash)))))); 
  }
  body.append(h('div', { class: 'table-wrap' }, h('table', { class: 'table audit' },
    h('thead', null, h('tr', null, ['#', 'When', 'Who', 'What', 'Subject', 'Details'].map((t) => h('th', null, t)))), tbody)));
  if (hasMore) body.append(h('div', { class: 'more-row' }, h('button', { type: 'button', class: 'ghost', onclick: () => loadAudit(true) }, 'Load more')));
}

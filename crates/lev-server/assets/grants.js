// The grants page: session and always approvals, and revoking one.
//
// View (see main.js for the layers and the page's safety rules).

import { vis } from './text.js';
import { $, clear, h, timeEl, toast, unavailable } from './dom.js';
import { api, getPages } from './api.js';

export async function loadGrants() {
  const body = $('grants-body');
  const r = await getPages('v1/grants');
  clear(body);
  if (!r.ok) {
    body.append(unavailable(r, 'grants'));
    return;
  }
  const grants = r.items;
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

// The stats page: how human review performed over a window (GET /v1/stats),
// per kind and policy rule, with a chart drawn as inline SVG.
//
// View (see main.js for the layers and the page's safety rules).

import { vis } from './text.js';
import { $, clear, h, unavailable } from './dom.js';
import { api } from './api.js';

const NS = 'http://www.w3.org/2000/svg';

/** An SVG element with attributes and children. */
function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c);
  return el;
}

const WINDOWS = [['24h', 'Last 24 hours'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days']];
let since = '7d';

export async function loadStats() {
  const body = $('stats-body');
  const r = await api('GET', 'v1/stats?since=' + encodeURIComponent(since));
  if (!r.ok) {
    clear(body).append(unavailable(r, 'the stats'));
    return;
  }
  renderStats(r.body);
}

function pct(x) {
  return typeof x === 'number' ? Math.round(x * 100) + '%' : '–';
}

function secs(x) {
  if (typeof x !== 'number') return '–';
  if (x < 120) return Math.round(x) + ' s';
  if (x < 7200) return (x / 60).toFixed(1) + ' min';
  return (x / 3600).toFixed(1) + ' h';
}

/** The outcomes a bar is split into, with their colours (CSS classes). */
const PARTS = [['approved', 'Approved'], ['denied', 'Denied'], ['answered', 'Answered'], ['expired', 'Expired'], ['cancelled', 'Cancelled'], ['pending', 'Pending']];

/** One horizontal stacked bar per group: its outcomes, to scale. */
function chart(groups) {
  const rows = groups.slice(0, 12);
  const max = Math.max(1, ...rows.map((g) => g.asked));
  const label = 210;
  const width = 720;
  const bar = 22;
  const gap = 10;
  const top = 30;
  const height = top + rows.length * (bar + gap);
  const svg = s('svg', { viewBox: '0 0 ' + width + ' ' + height, class: 'stats-chart', role: 'img', 'aria-label': 'Interactions asked per kind and rule, split by outcome' });
  let x = label;
  for (const [key, name] of PARTS) {
    svg.append(s('rect', { x, y: 4, width: 12, height: 12, class: 'part-' + key }));
    svg.append(s('text', { x: x + 16, y: 14, class: 'legend' }, name));
    x += 16 + name.length * 7 + 14;
  }
  rows.forEach((g, i) => {
    const y = top + i * (bar + gap);
    // Words the server makes (a kind's type, `line N`, `none`), set as text.
    svg.append(s('text', { x: label - 8, y: y + bar * 0.7, 'text-anchor': 'end', class: 'row-label' }, String(g.kind) + ' · ' + String(g.rule)));
    let at = label;
    for (const [key, name] of PARTS) {
      const n = g[key] || 0;
      if (!n) continue;
      const w = ((width - label - 40) * n) / max;
      const rect = s('rect', { x: at, y, width: Math.max(w, 1), height: bar, class: 'part-' + key, 'data-part': key });
      rect.append(s('title', {}, name + ': ' + n));
      svg.append(rect);
      at += w;
    }
    svg.append(s('text', { x: at + 6, y: y + bar * 0.7, class: 'row-count' }, String(g.asked)));
  });
  return svg;
}

function renderStats(st) {
  const body = clear($('stats-body'));
  const picker = h('div', { class: 'stats-windows', role: 'group', 'aria-label': 'Window' },
    WINDOWS.map(([w, name]) => h('button', { type: 'button', class: 'ghost small' + (w === since ? ' on' : ''), 'data-since': w, onclick: () => { since = w; loadStats(); } }, name)));
  body.append(picker);
  const t = st.total;
  body.append(h('div', { class: 'stats-cards' },
    card('Asked', String(t.asked)),
    card('Pending', String(t.pending)),
    card('Approval rate', pct(t.approval_rate)),
    card('Denial rate', pct(t.denial_rate)),
    card('Median to decision', secs(t.p50_decision_s)),
    card('95th percentile', secs(t.p95_decision_s)),
    card('Expired', String(t.expired))));
  if (!st.groups.length) {
    body.append(h('div', { class: 'empty' }, h('p', null, 'Nothing was asked in this window.')));
    return;
  }
  body.append(h('div', { class: 'card chart-card' }, chart(st.groups)));
  const tbody = h('tbody');
  for (const g of st.groups) {
    tbody.append(h('tr', null,
      h('td', { 'data-label': 'Kind' }, vis(g.kind)),
      h('td', { 'data-label': 'Rule' }, vis(g.rule)),
      h('td', { 'data-label': 'Asked', class: 'num' }, String(g.asked)),
      h('td', { 'data-label': 'Pending', class: 'num' }, String(g.pending)),
      h('td', { 'data-label': 'Approved', class: 'num' }, pct(g.approval_rate)),
      h('td', { 'data-label': 'Denied', class: 'num' }, pct(g.denial_rate)),
      h('td', { 'data-label': 'Expired', class: 'num' }, String(g.expired)),
      h('td', { 'data-label': 'Median', class: 'num' }, secs(g.p50_decision_s)),
      h('td', { 'data-label': 'p95', class: 'num' }, secs(g.p95_decision_s)),
      h('td', { 'data-label': 'Answered most' }, g.top_answerers.flatMap((a, i) => [i ? ', ' : '', vis(a.name), ' (' + a.count + ')']))));
  }
  body.append(h('div', { class: 'table-wrap' }, h('table', { class: 'table stats' },
    h('thead', null, h('tr', null, ['Kind', 'Rule', 'Asked', 'Pending', 'Approved', 'Denied', 'Expired', 'Median', 'p95', 'Answered most'].map((x) => h('th', null, x)))), tbody)));
  if (st.truncated) body.append(h('p', { class: 'muted small' }, 'The window holds more interactions than one report reads; the most recent were counted.'));
}

function card(name, value) {
  return h('div', { class: 'card stat' }, h('div', { class: 'label' }, name), h('div', { class: 'stat-value' }, value));
}

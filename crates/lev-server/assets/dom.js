// DOM helpers: elements made with createElement (never from HTML), times,
// toasts, JSON shown as inert text.
//
// Base module (see main.js for the layers).

import { inexactNumbers, NUM_FLAG, valueNode, writeJson } from './json.js';
import { vis } from './text.js';

export const $ = (id) => document.getElementById(id);

/**
 * createElement with attributes and children. String children become text
 * nodes (for our own labels); agent data must be passed through vis().
 * `on*` attributes become event listeners, never inline handlers.
 */
export function h(tag, attrs, ...children) {
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

/** A paper clip, drawn inline: no emoji font needed. */
export function clipIcon() {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  for (const [k, v] of Object.entries({ viewBox: '0 0 24 24', width: '1em', height: '1em', fill: 'none', stroke: 'currentColor', 'stroke-width': '2', 'stroke-linecap': 'round', 'stroke-linejoin': 'round', class: 'clip' })) svg.setAttribute(k, v);
  const path = document.createElementNS(NS, 'path');
  path.setAttribute('d', 'M21.4 11.1l-9.2 9.2a6 6 0 0 1-8.5-8.5l9.2-9.2a4 4 0 0 1 5.7 5.7l-9.2 9.2a2 2 0 0 1-2.8-2.8l8.5-8.5');
  svg.append(path);
  return svg;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function timeEl(iso, mode = 'ago') {
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

export function refreshTimes() {
  for (const el of document.querySelectorAll('time[data-rel]')) {
    el.textContent = rel(el.getAttribute('datetime'));
  }
}

export function toast(msg, kind = 'info') {
  const el = h('div', { class: 'toast ' + kind, role: 'status' }, typeof msg === 'string' ? vis(msg) : msg);
  $('toasts').append(el);
  setTimeout(() => el.classList.add('out'), 3600);
  setTimeout(() => el.remove(), 4200);
}

/** A node shown as inert text: hidden characters as tokens, inexact numbers marked. */
export function jsonView(node, indent = 2) {
  const frag = document.createDocumentFragment();
  writeJson(node, indent, (t, num) => {
    if (num && !num.exact) frag.append(h('span', { class: 'inexact-num', title: NUM_FLAG }, t));
    else frag.append(vis(t));
  });
  return frag;
}

/** The visible warning about the numbers of `node` JavaScript cannot hold exactly, if any. */
export function numFlag(node) {
  const nums = node ? inexactNumbers(node) : [];
  if (!nums.length) return null;
  return h('p', { class: 'num-flag warn-text', role: 'note' }, '⚠ ', NUM_FLAG, ' ',
    nums.slice(0, 8).map((raw, i) => [i ? ', ' : '', h('code', null, raw)]), nums.length > 8 ? ' …' : '');
}

/** A JSON value (ordinary, from readJson) in a block: formatted, numbers kept, flagged. */
export function jsonBlock(v) {
  const node = valueNode(v);
  return [h('pre', { class: 'json' }, jsonView(node)), numFlag(node)];
}

export function fmtSize(n) {
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
  return (n / 1024 / 1024).toFixed(1) + ' MiB';
}

export function unavailable(r, what) {
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

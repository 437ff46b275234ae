// lev dashboard. Plain JavaScript, no framework, no build step.
//
// Safety rule for this file: everything that comes from an agent (prompts,
// args, names, titles, options, feedback, metadata, ids) is rendered as inert
// text through `vis()` (text nodes and createElement only). innerHTML is never
// used, no URL is ever built from agent data but blob links from a validated
// hex digest, and no inline script or handler exists (the page has a strict
// CSP). Hidden characters (lev_protocol::text::HIDDEN: controls, bidi
// controls, zero-width characters, tags, variation selectors, fillers) are
// shown as visible ⟨U+XXXX⟩ tokens and the item is flagged. Agent JSON is
// read losslessly (jsonParse), never through JSON.parse/JSON.stringify.

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
  escalationTimer: null,
  passkeys: [], // this person's passkeys for this host (from GET /v1/people/keys)
};

const KIND_LABEL = {
  free_text: 'Question',
  multiple_choice: 'Choice',
  tool_approval: 'Tool approval',
  interaction_points: 'Review points',
};

const SCOPE_LABEL = { once: 'once', session: 'for this session', always: 'always' };

// ---------------------------------------------------------------- inert text

// Hidden or confusable code points (controls, bidirectional controls,
// zero-width characters, tags, variation selectors, fillers...), as inclusive
// [first, last] ranges. The server writes lev_protocol::text::HIDDEN here when
// it serves this file: the page, the CLI and any other interface share one
// definition.
const HIDDEN_RANGES = [/* lev_protocol::text::HIDDEN */];

/** Whether code point `cp` is hidden or confusable (a binary search of HIDDEN_RANGES). */
function isHidden(cp) {
  let lo = 0;
  let hi = HIDDEN_RANGES.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [first, last] = HIDDEN_RANGES[mid];
    if (cp < first) hi = mid - 1;
    else if (cp > last) lo = mid + 1;
    else return true;
  }
  return false;
}

/** Shown as a token and flagged: hidden, but tab and line breaks; lone surrogates. */
function isSpecial(cp) {
  if (cp === 0x09 || cp === 0x0a || cp === 0x0d) return false;
  return isHidden(cp) || (cp >= 0xd800 && cp <= 0xdfff);
}

/** Whether `s` holds a character that is shown as a token. */
function hasHidden(s) {
  for (const ch of String(s)) if (isSpecial(ch.codePointAt(0))) return true;
  return false;
}

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
  0x2029: 'paragraph separator', 0x1b: 'escape', 0xad: 'soft hyphen',
  0x034f: 'combining grapheme joiner', 0x115f: 'Hangul choseong filler',
  0x1160: 'Hangul jungseong filler', 0x3164: 'Hangul filler', 0xffa0: 'halfwidth Hangul filler',
  0x180e: 'Mongolian vowel separator', 0x2800: 'Braille pattern blank',
};

function charName(cp) {
  if (CHAR_NAMES[cp]) return CHAR_NAMES[cp];
  if (cp >= 0xe0020 && cp <= 0xe007e) return 'tag character “' + String.fromCharCode(cp - 0xe0000) + '”';
  if (cp >= 0xe0000 && cp <= 0xe007f) return 'tag character';
  if ((cp >= 0xfe00 && cp <= 0xfe0f) || (cp >= 0xe0100 && cp <= 0xe01ef) || (cp >= 0x180b && cp <= 0x180f)) return 'variation selector';
  if (cp >= 0xd800 && cp <= 0xdfff) return 'lone surrogate';
  if (cp < 0xa0) return 'control character';
  return 'invisible or format character';
}

function cpToken(ch) {
  return 'U+' + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
}

/**
 * A fragment showing `s` as inert text, hidden characters as marked ⟨U+XXXX⟩
 * tokens. A run of tag characters (which can spell a whole hidden sentence)
 * is followed by the text it spells.
 */
function vis(s) {
  s = s == null ? '' : String(s);
  const frag = document.createDocumentFragment();
  let text = '';
  let tags = '';
  const flushTags = () => {
    if (tags.length > 1) {
      const t = document.createElement('span');
      t.className = 'uc tag-text';
      t.title = 'What the hidden tag characters before this spell (made visible by lev)';
      t.textContent = '⟨hidden tag text: “' + tags + '”⟩';
      frag.append(t);
    }
    tags = '';
  };
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    if (!isSpecial(cp)) {
      flushTags();
      text += ch;
      continue;
    }
    if (text) frag.append(document.createTextNode(text));
    text = '';
    const tok = document.createElement('span');
    tok.className = 'uc';
    tok.title = charName(cp) + ' (made visible by lev)';
    tok.textContent = '⟨' + cpToken(ch) + '⟩';
    frag.append(tok);
    if (cp >= 0xe0020 && cp <= 0xe007e) tags += String.fromCharCode(cp - 0xe0000);
    else flushTags();
  }
  flushTags();
  if (text) frag.append(document.createTextNode(text));
  return frag;
}

/** `s` as plain text with hidden characters spelled out (titles, notifications, toasts). */
function plain(s) {
  let out = '';
  for (const ch of String(s == null ? '' : s)) out += isSpecial(ch.codePointAt(0)) ? '⟨' + cpToken(ch) + '⟩' : ch;
  return out;
}

function walkStrings(v, fn) {
  if (typeof v === 'string') return fn(v);
  if (Array.isArray(v)) return v.some((x) => walkStrings(x, fn));
  if (v && typeof v === 'object' && !(v instanceof JsonNum)) {
    return Object.entries(v).some(([k, x]) => fn(k) || walkStrings(x, fn));
  }
  return false;
}

/** Whether anything in the interaction hides or reorders characters. */
function suspicious(view) {
  const req = view.request || {};
  if (walkStrings(req, hasHidden)) return true;
  if (req.kind && req.kind.type === 'tool_approval') {
    const parsed = argsOf(req.kind.args_json);
    if (parsed.ok && nodeStrings(parsed.node).some(hasHidden)) return true;
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

/** A paper clip, drawn inline: no emoji font needed. */
function clipIcon() {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  for (const [k, v] of Object.entries({ viewBox: '0 0 24 24', width: '1em', height: '1em', fill: 'none', stroke: 'currentColor', 'stroke-width': '2', 'stroke-linecap': 'round', 'stroke-linejoin': 'round', class: 'clip' })) svg.setAttribute(k, v);
  const path = document.createElementNS(NS, 'path');
  path.setAttribute('d', 'M21.4 11.1l-9.2 9.2a6 6 0 0 1-8.5-8.5l9.2-9.2a4 4 0 0 1 5.7 5.7l-9.2 9.2a2 2 0 0 1-2.8-2.8l8.5-8.5');
  svg.append(path);
  return svg;
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
  const el = h('div', { class: 'toast ' + kind, role: 'status' }, typeof msg === 'string' ? vis(msg) : msg);
  $('toasts').append(el);
  setTimeout(() => el.classList.add('out'), 3600);
  setTimeout(() => el.remove(), 4200);
}

// ---------------------------------------------------------------- JSON, read losslessly
//
// Agent JSON is never read with JSON.parse nor written with JSON.stringify:
// they turn every number into a double (9007199254740993 becomes
// 9007199254740992, 123456789012345678901234567890 becomes
// 1.2345678901234568e+29) and put integer-like keys first. The reader below
// keeps each number as the text it was written as; that text is what is shown
// and what is sent.

const NUM_FLAG = 'This number cannot be represented exactly by JavaScript; it is shown and sent as written.';

/** A number of an API answer that JavaScript cannot hold exactly, kept as its text. */
class JsonNum {
  constructor(raw) {
    this.raw = raw;
    Object.freeze(this);
  }

  toString() {
    return this.raw;
  }
}

/** The key order of an object read by toPlain (JavaScript puts integer-like keys first). */
const KEYS = Symbol('json key order');

/** A decimal number's value as a canonical string: sign, significant digits, exponent. */
function decKey(raw) {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(raw);
  if (!m) return raw;
  let digits = m[2] + (m[3] || '');
  let exp = Number(m[4] || '0') + m[2].length;
  const lead = digits.length - digits.replace(/^0+/, '').length;
  digits = digits.slice(lead).replace(/0+$/, '');
  exp -= lead;
  if (!digits) return '0';
  return m[1] + '0.' + digits + 'e' + exp;
}

/** Whether a double holds the number `raw` exactly as written (its shortest form has the same value). */
function numExact(raw) {
  const n = Number(raw);
  return Number.isFinite(n) && decKey(String(n)) === decKey(raw);
}

/**
 * Read JSON text without losing anything: {ok, node} or {ok: false, error}.
 * Nodes: {t: 'o', e: [[key, node]...]} (keys in order), {t: 'a', v: [node]},
 * {t: 's', v}, {t: 'n', raw, exact}, {t: 'b', v}, {t: 'z'} (null). An object
 * holding a key twice is refused, as the server refuses it.
 */
function jsonParse(text) {
  text = String(text);
  const n = text.length;
  let i = 0;
  const NUM = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  const fail = (msg) => {
    throw new SyntaxError(msg + ' at character ' + (i + 1));
  };
  const ws = () => {
    while (i < n && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++;
  };
  const ESC = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
  function str() {
    i++; // the opening quote
    let out = '';
    let start = i;
    for (;;) {
      if (i >= n) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        out += text.slice(start, i);
        i++;
        return out;
      }
      if (c < 0x20) fail('unescaped control character in a string');
      if (c !== 0x5c) {
        i++;
        continue;
      }
      out += text.slice(start, i);
      const e = text[i + 1];
      if (e === 'u') {
        const hex = text.slice(i + 2, i + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('bad \\u escape');
        out += String.fromCharCode(parseInt(hex, 16));
        i += 6;
      } else if (e !== undefined && Object.prototype.hasOwnProperty.call(ESC, e)) {
        out += ESC[e];
        i += 2;
      } else {
        fail('bad escape');
      }
      start = i;
    }
  }
  function value(depth) {
    if (depth > 512) fail('nested too deeply');
    ws();
    if (i >= n) fail('unexpected end of text');
    const c = text[i];
    if (c === '{' || c === '[') {
      const obj = c === '{';
      const close = obj ? '}' : ']';
      const items = [];
      const seen = new Set();
      i++;
      ws();
      if (text[i] === close) {
        i++;
        return obj ? { t: 'o', e: items } : { t: 'a', v: items };
      }
      for (;;) {
        if (obj) {
          ws();
          if (text[i] !== '"') fail('expected a key in quotes');
          const k = str();
          if (seen.has(k)) fail('the key ' + JSON.stringify(k) + ' appears twice');
          seen.add(k);
          ws();
          if (text[i] !== ':') fail('expected ":"');
          i++;
          items.push([k, value(depth + 1)]);
        } else {
          items.push(value(depth + 1));
        }
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === close) {
          i++;
          return obj ? { t: 'o', e: items } : { t: 'a', v: items };
        }
        fail('expected "," or "' + close + '"');
      }
    }
    if (c === '"') return { t: 's', v: str() };
    for (const [word, node] of [['true', { t: 'b', v: true }], ['false', { t: 'b', v: false }], ['null', { t: 'z' }]]) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return node;
      }
    }
    NUM.lastIndex = i;
    const m = NUM.exec(text);
    if (!m) fail('unexpected character');
    i += m[0].length;
    return { t: 'n', raw: m[0], exact: numExact(m[0]) };
  }
  try {
    const node = value(0);
    ws();
    if (i < n) fail('unexpected text after the value');
    return { ok: true, node };
  } catch (e) {
    return { ok: false, error: e instanceof RangeError ? 'nested too deeply' : e.message };
  }
}

const PARSED = new Map();

/** jsonParse of a tool call's args_json, remembered (the list renders often). */
function argsOf(text) {
  let p = PARSED.get(text);
  if (!p) {
    if (PARSED.size > 500) PARSED.clear();
    p = jsonParse(text);
    PARSED.set(text, p);
  }
  return p;
}

/** A node as ordinary values: numbers a double holds exactly become numbers, the rest JsonNum. */
function toPlain(node) {
  switch (node.t) {
    case 'o': {
      const o = {};
      // defineProperty, not assignment: a "__proto__" key stays a plain key.
      for (const [k, v] of node.e) Object.defineProperty(o, k, { value: toPlain(v), enumerable: true, writable: true, configurable: true });
      Object.defineProperty(o, KEYS, { value: node.e.map(([k]) => k) });
      return o;
    }
    case 'a': return node.v.map(toPlain);
    case 'n': return node.exact ? Number(node.raw) : new JsonNum(node.raw);
    case 'z': return null;
    default: return node.v;
  }
}

/** JSON text (an API answer, an event) as ordinary values, numbers kept; null when not JSON. */
function readJson(text) {
  const p = jsonParse(text);
  return p.ok ? toPlain(p.node) : null;
}

/** An ordinary value (from readJson) as a node again. */
function valueNode(v) {
  if (v instanceof JsonNum) return { t: 'n', raw: v.raw, exact: false };
  if (v == null) return { t: 'z' };
  if (typeof v === 'string') return { t: 's', v };
  if (typeof v === 'number') return Number.isFinite(v) ? { t: 'n', raw: String(v), exact: true } : { t: 'z' };
  if (typeof v === 'boolean') return { t: 'b', v };
  if (Array.isArray(v)) return { t: 'a', v: v.map(valueNode) };
  if (typeof v !== 'object') return { t: 'z' };
  const keys = (v[KEYS] || Object.keys(v)).filter((k) => Object.prototype.hasOwnProperty.call(v, k));
  return { t: 'o', e: keys.map((k) => [k, valueNode(v[k])]) };
}

/** Write a node: `emit(text, node)` per piece, `node` given for numbers. */
function writeJson(node, indent, emit, depth = 0) {
  switch (node.t) {
    case 's': return emit(JSON.stringify(node.v));
    case 'n': return emit(node.raw, node);
    case 'b': return emit(node.v ? 'true' : 'false');
    case 'z': return emit('null');
    default: break;
  }
  const obj = node.t === 'o';
  const items = obj ? node.e : node.v;
  if (!items.length) return emit(obj ? '{}' : '[]');
  const pad = indent ? '\n' + ' '.repeat(indent * (depth + 1)) : '';
  emit(obj ? '{' : '[');
  items.forEach((item, idx) => {
    emit((idx ? ',' : '') + pad);
    if (obj) {
      emit(JSON.stringify(item[0]) + (indent ? ': ' : ':'));
      writeJson(item[1], indent, emit, depth + 1);
    } else {
      writeJson(item, indent, emit, depth + 1);
    }
  });
  emit((indent ? '\n' + ' '.repeat(indent * depth) : '') + (obj ? '}' : ']'));
}

/** A node as JSON text, numbers as written. */
function nodeText(node, indent = 0) {
  let out = '';
  writeJson(node, indent, (t) => {
    out += t;
  });
  return out;
}

/** Numbers of a node that JavaScript cannot hold exactly, as written. */
function inexactNumbers(node, out = []) {
  if (node.t === 'n' && !node.exact) out.push(node.raw);
  else if (node.t === 'o') for (const [, v] of node.e) inexactNumbers(v, out);
  else if (node.t === 'a') for (const v of node.v) inexactNumbers(v, out);
  return out;
}

/** Every string and key of a node. */
function nodeStrings(node, out = []) {
  if (node.t === 's') out.push(node.v);
  else if (node.t === 'o') for (const [k, v] of node.e) { out.push(k); nodeStrings(v, out); }
  else if (node.t === 'a') for (const v of node.v) nodeStrings(v, out);
  return out;
}

/** A node shown as inert text: hidden characters as tokens, inexact numbers marked. */
function jsonView(node, indent = 2) {
  const frag = document.createDocumentFragment();
  writeJson(node, indent, (t, num) => {
    if (num && !num.exact) frag.append(h('span', { class: 'inexact-num', title: NUM_FLAG }, t));
    else frag.append(vis(t));
  });
  return frag;
}

/** The visible warning about the numbers of `node` JavaScript cannot hold exactly, if any. */
function numFlag(node) {
  const nums = node ? inexactNumbers(node) : [];
  if (!nums.length) return null;
  return h('p', { class: 'num-flag warn-text', role: 'note' }, '⚠ ', NUM_FLAG, ' ',
    nums.slice(0, 8).map((raw, i) => [i ? ', ' : '', h('code', null, raw)]), nums.length > 8 ? ' …' : '');
}

/** A JSON value (ordinary, from readJson) in a block: formatted, numbers kept, flagged. */
function jsonBlock(v) {
  const node = valueNode(v);
  return [h('pre', { class: 'json' }, jsonView(node)), numFlag(node)];
}

/** Whether two nodes hold the same value (numbers compared by value as written, key order aside). */
function nodeEqual(a, b) {
  if (a.t !== b.t) return false;
  switch (a.t) {
    case 'z': return true;
    case 'n': return decKey(a.raw) === decKey(b.raw);
    case 'a': return a.v.length === b.v.length && a.v.every((x, i) => nodeEqual(x, b.v[i]));
    case 'o': {
      if (a.e.length !== b.e.length) return false;
      const m = new Map(b.e);
      return a.e.every(([k, v]) => m.has(k) && nodeEqual(v, m.get(k)));
    }
    default: return a.v === b.v;
  }
}

function ptrEsc(k) {
  return String(k).replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * A longest-common-subsequence alignment of `a` and `b`: ['=', i, j],
 * ['-', i] and ['+', j] in order. Positional past 250k cells (never slow).
 */
function lcsOps(a, b, eq) {
  const n = a.length;
  const m = b.length;
  if (n * m > 250000) {
    const ops = [];
    for (let k = 0; k < Math.max(n, m); k++) {
      if (k < n && k < m) ops.push(eq(a[k], b[k]) ? ['=', k, k] : ['-', k], ...(eq(a[k], b[k]) ? [] : [['+', k]]));
      else if (k < n) ops.push(['-', k]);
      else ops.push(['+', k]);
    }
    return ops;
  }
  const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) L[i][j] = eq(a[i], b[j]) ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  }
  const ops = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (eq(a[i], b[j])) { ops.push(['=', i, j]); i++; j++; }
    else if (L[i + 1][j] >= L[i][j + 1]) ops.push(['-', i++]);
    else ops.push(['+', j++]);
  }
  while (i < n) ops.push(['-', i++]);
  while (j < m) ops.push(['+', j++]);
  return ops;
}

/** Differences between two nodes, by JSON pointer: arrays aligned by their
 *  longest common subsequence (removing one argument is one removal), a
 *  string of several lines diffed by line. */
function nodeDiff(a, b, ptr = '', out = []) {
  if (nodeEqual(a, b)) return out;
  if (a.t === 'o' && b.t === 'o') {
    const ma = new Map(a.e);
    const mb = new Map(b.e);
    for (const [k, v] of a.e) {
      const p = ptr + '/' + ptrEsc(k);
      if (!mb.has(k)) out.push({ op: '-', p, from: v });
      else nodeDiff(v, mb.get(k), p, out);
    }
    for (const [k, v] of b.e) if (!ma.has(k)) out.push({ op: '+', p: ptr + '/' + ptrEsc(k), to: v });
  } else if (a.t === 'a' && b.t === 'a') {
    const ops = lcsOps(a.v, b.v, nodeEqual);
    // A run of removals and additions between two kept items: pair them up
    // as changes (diffed inside), the rest stay removals or additions.
    for (let x = 0; x < ops.length;) {
      if (ops[x][0] === '=') { x++; continue; }
      const dels = [];
      const adds = [];
      while (x < ops.length && ops[x][0] !== '=') (ops[x][0] === '-' ? dels : adds).push(ops[x++][1]);
      const pairs = Math.min(dels.length, adds.length);
      for (let q = 0; q < pairs; q++) nodeDiff(a.v[dels[q]], b.v[adds[q]], ptr + '/' + dels[q], out);
      for (const i of dels.slice(pairs)) out.push({ op: '-', p: ptr + '/' + i, from: a.v[i] });
      for (const j of adds.slice(pairs)) out.push({ op: '+', p: ptr + '/' + j, to: b.v[j] });
    }
  } else if (a.t === 's' && b.t === 's' && (a.v.includes('\n') || b.v.includes('\n'))) {
    const la = a.v.split('\n');
    const lb = b.v.split('\n');
    for (const op of lcsOps(la, lb, (x, y) => x === y)) {
      if (op[0] === '-') out.push({ op: '-', p: (ptr || '(whole)') + ' line ' + (op[1] + 1), from: { t: 's', v: la[op[1]] } });
      else if (op[0] === '+') out.push({ op: '+', p: (ptr || '(whole)') + ' line ' + (op[1] + 1), to: { t: 's', v: lb[op[1]] } });
    }
  } else {
    out.push({ op: '~', p: ptr || '(whole)', from: a, to: b });
  }
  return out;
}

/** Leaves of a node: [pointer, node]. */
function leaves(node, ptr = '', out = []) {
  if (node.t === 'a') {
    if (!node.v.length) out.push([ptr, node]);
    node.v.forEach((x, i) => leaves(x, ptr + '/' + i, out));
  } else if (node.t === 'o') {
    if (!node.e.length) out.push([ptr, node]);
    for (const [k, v] of node.e) leaves(v, ptr + '/' + ptrEsc(k), out);
  } else {
    out.push([ptr, node]);
  }
  return out;
}

/**
 * Escape for the server's regex syntax (as Rust's regex::escape does); a
 * hidden character is written as `\x{...}`, so the pattern box shows it.
 */
function reEscape(s) {
  let out = '';
  for (const ch of s.replace(/[\\.+*?()|[\]{}^$#&\-~]/g, '\\$&')) {
    out += isSpecial(ch.codePointAt(0)) ? '\\x{' + ch.codePointAt(0).toString(16).toUpperCase() + '}' : ch;
  }
  return out;
}

/** The pattern that matches exactly this value (a node), as a policy rule matches it. */
function exactPattern(node) {
  return '^' + reEscape(node.t === 's' ? node.v : nodeText(node)) + '$';
}

/** A tool call's args in one line: a command line for `argv`, else compact JSON as written. */
function argsSummary(argsJson) {
  const p = argsOf(argsJson);
  if (!p.ok) return short(String(argsJson), 120);
  const node = p.node;
  if (node.t === 'o') {
    const m = new Map(node.e);
    const argv = ['argv', 'command', 'cmd'].map((k) => m.get(k)).find((v) => v && !(v.t === 's' && !v.v) && v.t !== 'z');
    if (argv && argv.t === 'a' && argv.v.every((a) => a.t === 's')) {
      return short(argv.v.map((a) => shQuote(a.v)).join(' '), 120);
    }
    if (argv && argv.t === 's') return short(argv.v, 120);
  }
  return short(nodeText(node), 120);
}

/** A value on one line: a string as is, anything else as JSON with its numbers as written. */
function short(v, n = 160) {
  const s = typeof v === 'string' ? v : nodeText(valueNode(v));
  if (s.length <= n) return s;
  // Cut between code points, never inside a surrogate pair.
  const cps = Array.from(s);
  return cps.length <= n ? s : cps.slice(0, n).join('') + '…';
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
      // Read without JSON.parse: numbers keep their exact value.
      data = readJson(await res.text());
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

/** The items of a page: every list route answers `{items, next_cursor}`. */
function pageItems(body) {
  return body && Array.isArray(body.items) ? body.items : [];
}

/** The cursor of the page after `body`, or null on the last page. */
function nextCursor(body) {
  return body && typeof body.next_cursor === 'string' && body.next_cursor ? body.next_cursor : null;
}

/**
 * GET the list at `path` page after page, following `next_cursor` (at most
 * `maxPages` pages). Answers as api() does, with every page's `items`.
 */
async function getPages(path, maxPages = 20) {
  const items = [];
  let cursor = null;
  for (let n = 0; n < maxPages; n++) {
    const sep = path.includes('?') ? '&' : '?';
    const r = await api('GET', cursor ? path + sep + 'cursor=' + encodeURIComponent(cursor) : path);
    if (!r.ok) return { ...r, items };
    items.push(...pageItems(r.body));
    cursor = nextCursor(r.body);
    if (!cursor) break;
  }
  return { status: 200, ok: true, body: null, code: null, error: null, items };
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
  err.replaceChildren(vis(error || ''));
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
  loadMyPasskeys();
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

/** Capabilities whose lack makes a call risky, and what each means. */
const RISKY_CAPS = {
  'net': 'reaches the network',
  'fs-write': 'writes files',
  'proc-exec': 'runs programs',
};

/** The risky capabilities a tool approval lacks, as [cap, meaning] pairs. */
function riskOf(k) {
  if (!k || k.type !== 'tool_approval') return [];
  return (k.missing_capabilities || []).filter((c) => Object.hasOwn(RISKY_CAPS, c)).map((c) => [c, RISKY_CAPS[c]]);
}

/** Whether the policy rule that stopped the call marks it high risk. */
function highRisk(req) {
  return Boolean(req && req.gate && req.gate.risk === 'high');
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
  for (const row of (r.body && Array.isArray(r.body.sessions) ? r.body.sessions : [])) {
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
  // A quorum's escalation changes who may vote with nothing else changing:
  // whether it is open is part of what the pane shows.
  const esc = view ? escalatesAt(view.request) : null;
  const key = id
    ? [id, view ? view.request.status : '', view ? view.request.answered_by || '' : '', view && view.response ? 1 : 0, S.raced.get(id) || '', view ? (view.request.votes || []).length : 0, esc != null && Date.now() >= esc ? 'escalated' : ''].join('|')
    : '';
  if (key === S.detailRenderedFor) return;
  S.detailRenderedFor = key;
  renderDetail();
}

/** Show the escalation when its time comes, event or not (the server's
 * `interaction.escalated` also re-renders, a little later). */
function scheduleEscalation(view) {
  clearTimeout(S.escalationTimer);
  S.escalationTimer = null;
  const esc = view && view.request.status === 'pending' ? escalatesAt(view.request) : null;
  const wait = esc == null ? -1 : esc - Date.now();
  // setTimeout holds at most ~24.8 days; an escalation is at most 7 days off.
  if (wait >= 0 && wait < 2 ** 31 - 1) {
    S.escalationTimer = setTimeout(() => { S.escalationTimer = null; renderDetailIfChanged(); }, wait + 50);
  }
}

function renderDetail() {
  const pane = clear($('detail'));
  const view = S.selected ? S.items.get(S.selected) : null;
  scheduleEscalation(view);
  if (!view) {
    // With nothing pending the list says so ("Nothing is waiting."): once.
    pane.append(h('div', { class: 'detail-empty' },
      pendingList().length ? h('p', { class: 'muted' }, 'Pick an item on the left, or press j.') : null));
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
  // The agent's own word on why it wants this: agent text, shown as such.
  const reason = req.reason
    ? h('blockquote', { class: 'agent-reason' }, h('span', { class: 'label' }, 'The agent says why'), h('span', { class: 'reason-text' }, vis(req.reason)))
    : null;
  if (k.type === 'tool_approval') {
    box.append(whyStopped(k, req.gate), reason || '', toolFacts(k), votesView(req) || '', argsView(view));
  } else {
    box.append(h('div', { class: 'prompt' + (req.title ? '' : ' lead') }, vis(k.prompt)));
    if (reason) box.append(reason);
    if (k.type === 'interaction_points') {
      box.append(h('ol', { class: 'points' }, (k.points || []).map((p) =>
        h('li', { class: 'point', dataset: { point: p.id } },
          h('span', { class: 'point-id' }, vis(p.id)), h('span', { class: 'point-text' }, vis(p.text))))));
    }
  }
  if (req.metadata != null) {
    box.append(h('details', { class: 'meta' }, h('summary', null, 'Metadata'),
      jsonBlock(req.metadata)));
  }
  return box;
}

/**
 * Why the gate stopped this call for a person, and how risky it is: the
 * policy rule that asked (from the server's `gate` note, which no client can
 * set), the capabilities its sandbox lacks, and the risk either implies.
 */
function whyStopped(k, gate) {
  const risk = riskOf(k);
  const high = highRisk({ gate });
  const missing = k.missing_capabilities || [];
  const mode = k.sandbox_mode ? h('code', null, vis(k.sandbox_mode)) : 'its sandbox';
  const lacks = [mode, ' does not grant ', missing.map((c, i) => [i ? ', ' : '', h('code', null, vis(c))])];
  const rule = gate && gate.rule_line != null
    ? ['the policy rule at line ', h('code', { class: 'rule-line' }, String(gate.rule_line)),
      gate.rule_tool ? [' (tool ', h('code', null, vis(gate.rule_tool)), ')'] : '',
      ' asks a person', gate.rule_reason ? [': ', h('q', { class: 'rule-reason' }, vis(gate.rule_reason))] : '']
    : null;
  let why;
  if (rule) {
    why = ['Stopped here: ', rule, missing.length ? ['; also, ', lacks] : '', '.'];
  } else if (missing.length) {
    why = ['Stopped here: ', lacks, ', and no rule or grant allows the call.'];
  } else {
    why = ['Stopped here: the policy\'s default asks a person for every call no rule allows.'];
  }
  return h('div', { class: 'why-stopped' + (risk.length || high ? ' risky' : ''), role: 'note' },
    high ? h('p', { class: 'risk-line high-risk' }, h('strong', null, '⚠ High risk: '),
      'the policy marks this call high risk (rule at line ' + String(gate.rule_line) + ').') : null,
    risk.length ? h('p', { class: 'risk-line' }, h('strong', null, '⚠ Risky: '),
      'this call ' + risk.map(([c, m]) => m + ' (' + c + ')').join(', ') + '.') : null,
    h('p', { class: 'why-line' }, why));
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
  const p = argsOf(k.args_json);
  const wrap = h('div', { class: 'args' });
  // What the call will do, read as a person reads it: a command line, a
  // file's text, an HTTP request; else JSON formatted from a lossless
  // reading (every number as the agent wrote it).
  const readable = p.ok ? callView(k.tool_name, p.node) : null;
  const pre = h('pre', { class: 'json args-pretty', hidden: !!readable }, p.ok ? jsonView(p.node) : vis(k.args_json));
  const raw = h('pre', { class: 'json args-raw', hidden: true }, vis(k.args_json));
  // One click to each view: what it does, formatted JSON, the exact text.
  const views = [readable ? ['readable', 'What it does', readable] : null, ['json', readable ? 'JSON' : 'Formatted', pre], ['exact', 'Exact text', raw]].filter(Boolean);
  const tabs = h('div', { class: 'view-tabs', role: 'group', 'aria-label': 'Show the arguments as' });
  const show = (name) => {
    for (const [n, , el] of views) el.hidden = n !== name;
    for (const b of tabs.children) b.setAttribute('aria-pressed', String(b.dataset.view === name));
  };
  for (const [n, label] of views) tabs.append(h('button', { type: 'button', class: 'ghost small', dataset: { view: n }, onclick: () => show(n) }, label));
  show(views[0][0]);
  append(wrap, [h('div', { class: 'section-head' }, h('h3', null, 'Arguments'),
    p.ok ? null : h('span', { class: 'warn-text' }, 'not valid JSON'), h('span', { class: 'spacer' }), tabs), readable, pre, raw,
    p.ok ? numFlag(p.node) : null]);
  return wrap;
}

/** A word as a POSIX shell needs it: bare when safe, else single-quoted. */
function shQuote(w) {
  if (/^[\w@%+=:,./-]+$/.test(w)) return w;
  return "'" + w.replace(/'/g, "'\\''") + "'";
}

/** The string value of `key` in an object node, or null. */
function strField(node, ...keys) {
  if (node.t !== 'o') return null;
  const m = new Map(node.e);
  for (const key of keys) {
    const v = m.get(key);
    if (v && v.t === 's') return v.v;
  }
  return null;
}

/** A call's args as what it does: a shell command line (with its cwd), a
 *  file write's text with line numbers, an HTTP request; null for anything
 *  else (shown as formatted JSON). */
function callView(tool, node) {
  if (node.t !== 'o') return null;
  const m = new Map(node.e);
  const argv = ['argv', 'command', 'cmd'].map((key) => m.get(key)).find((v) => v && v.t !== 'z');
  if (argv && ((argv.t === 'a' && argv.v.length && argv.v.every((a) => a.t === 's')) || (argv.t === 's' && argv.v))) {
    const line = argv.t === 'a' ? argv.v.map((a) => shQuote(a.v)).join(' ') : argv.v;
    const cwd = strField(node, 'cwd', 'workdir', 'dir');
    return h('div', { class: 'call-view call-shell' },
      h('pre', { class: 'cmdline' }, h('span', { class: 'prompt-sign', 'aria-hidden': 'true' }, '$ '), h('code', { class: 'cmd' }, vis(line))),
      cwd != null ? h('p', { class: 'call-where' }, 'in ', h('code', { class: 'cwd' }, vis(cwd))) : null);
  }
  const path = strField(node, 'path', 'file_path', 'file', 'filename');
  const content = strField(node, 'content', 'contents', 'text', 'data');
  if (path != null && content != null) {
    const lines = content.split('\n');
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    return h('div', { class: 'call-view call-file' },
      h('p', { class: 'call-where' }, 'writes ', h('code', { class: 'file-path' }, vis(path)),
        h('span', { class: 'muted small' }, ' · ' + lines.length + (lines.length === 1 ? ' line' : ' lines'))),
      h('ol', { class: 'file-lines' }, lines.map((l) => h('li', null, h('code', null, vis(l))))));
  }
  const url = strField(node, 'url', 'uri', 'endpoint');
  if (url != null) {
    const method = (strField(node, 'method', 'verb') || 'GET').toUpperCase();
    const headers = m.get('headers');
    const body = m.get('body') || m.get('data') || m.get('json');
    return h('div', { class: 'call-view call-http' },
      h('pre', { class: 'http-line' }, h('strong', { class: 'method' }, vis(method)), ' ', h('code', { class: 'url' }, vis(url))),
      headers && headers.t === 'o' && headers.e.length
        ? h('dl', { class: 'http-headers' }, headers.e.map(([hk, hv]) => h('div', null, h('dt', null, vis(hk) , ':'), h('dd', null, vis(hv.t === 's' ? hv.v : nodeText(hv))))))
        : null,
      body && body.t !== 'z'
        ? h('pre', { class: 'json http-body' }, body.t === 's' ? vis(body.v) : jsonView(body))
        : null);
  }
  return null;
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
  el.replaceChildren(vis(msg || ''));
}

async function respond(view, body, errEl, buttons, doneMsg) {
  const id = view.request.id;
  for (const b of buttons) b.disabled = true;
  showError(errEl, null);
  // A decision on a tool call is this person's vote: signed with their
  // passkey when they have one here (the passkey asks them to confirm).
  if (view.request.kind.type === 'tool_approval' && S.passkeys.length) {
    try {
      body = { ...body, vote: await passkeyVote(view, body) };
    } catch (e) {
      for (const b of buttons) b.disabled = false;
      showError(errEl, 'Your passkey did not sign the vote: ' + (e && e.message ? e.message : String(e)));
      return;
    }
  }
  S.mine.add(id);
  const r = await api('POST', 'v1/interactions/' + encodeURIComponent(id) + '/respond', { request_id: id, ...body });
  for (const b of buttons) b.disabled = false;
  if (r.ok && r.status === 202 && r.body) {
    // A vote recorded; more people must approve. The question stays open.
    S.mine.delete(id);
    const votes = r.body.votes || [];
    const current = S.items.get(id) || view;
    S.items.set(id, { ...current, request: { ...current.request, votes } });
    S.drafts.delete(id);
    const approvals = votes.filter((v) => v.approved).length;
    toast('Your vote is in' + (body.vote ? ' (signed with your passkey)' : '') + ': ' + approvals + ' of ' + (r.body.approvals_needed || 1) + ' approvals.', 'ok');
    S.detailRenderedFor = null;
    renderInbox();
    return;
  }
  if (r.ok) {
    toast(doneMsg + (body.vote ? ' (signed with your passkey)' : ''), 'ok');
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

/** Per-point answers of an interaction_points question: accept, comment. */
function pointsBox(view, d) {
  const k = view.request.kind;
  if (k.type !== 'interaction_points' || !(k.points || []).length) return null;
  if (!d.points) d.points = {};
  return h('fieldset', { class: 'point-answers' }, h('legend', null, 'Point by point'),
    k.points.map((p) => {
      const st = d.points[p.id] || (d.points[p.id] = { accept: false, comment: '' });
      const cb = h('input', { type: 'checkbox', class: 'point-accept', checked: st.accept, onchange: () => { st.accept = cb.checked; } });
      const note = h('input', { type: 'text', class: 'point-comment', value: st.comment, placeholder: 'Comment (optional)', 'aria-label': 'Comment on ' + plain(p.id), oninput: () => { st.comment = note.value; } });
      return h('div', { class: 'point-answer', dataset: { point: p.id } },
        h('span', { class: 'point-id' }, vis(p.id)),
        h('label', { class: 'check' }, cb, ' Accept'),
        note);
    }));
}

/** The per-point answers as text the agent reads: one line per point
 *  (`p1: accept`, `p2: comment: ...`, `p3: no answer`); '' when none. */
function pointsText(view, d) {
  const k = view.request.kind;
  if (k.type !== 'interaction_points' || !d.points) return '';
  const lines = (k.points || []).map((p) => {
    const st = d.points[p.id] || { accept: false, comment: '' };
    const comment = st.comment.trim().replace(/\s*\n\s*/g, ' ');
    const parts = [st.accept ? 'accept' : null, comment ? 'comment: ' + comment : null].filter(Boolean);
    return { id: p.id, text: parts.length ? parts.join('; ') : 'no answer', answered: parts.length > 0 };
  });
  if (!lines.some((l) => l.answered)) return '';
  return lines.map((l) => l.id + ': ' + l.text).join('\n');
}

function textForm(view) {
  const id = view.request.id;
  const d = draftFor(id);
  const err = formError();
  const points = pointsBox(view, d);
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
      h('span', { class: 'file-icon', 'aria-hidden': 'true' }, clipIcon()),
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
    const perPoint = pointsText(view, d);
    const value = perPoint ? perPoint + (ta.value.trim() ? '\n\n' + ta.value : '') : ta.value;
    if (!value.trim() && !d.files.length) {
      showError(err, points ? 'Accept or comment on a point, write an answer or attach a file first.' : 'Write an answer or attach a file first.');
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
    points, ta, hint, drop, fileList, err,
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
  const proposal = argsOf(k.args_json);
  const err = formError();
  const form = h('section', { class: 'answer approval' });

  // --- edit args in place: the editor starts from the exact text the agent
  // sent, and what it holds is what is sent (as modified_args_json).
  if (d.editText == null) d.editText = k.args_json;
  const editor = h('textarea', {
    class: 'args-edit mono', rows: String(Math.min(18, Math.max(4, d.editText.split('\n').length + 1))),
    spellcheck: 'false', 'aria-label': 'Edited arguments (JSON)', value: d.editText,
    oninput: () => { d.editText = editor.value; checkEdit(); },
    onkeydown: (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); approve(); } },
  });
  const editStatus = h('p', { class: 'edit-status' });
  const editNums = h('div', { class: 'edit-nums' });
  const diffBox = h('div', { class: 'diff' });
  const editBox = h('div', { class: 'edit-box', hidden: !d.editing },
    h('div', { class: 'section-head' }, h('h3', null, 'Edit arguments'), h('span', { class: 'spacer' }),
      h('button', { type: 'button', class: 'ghost small', onclick: () => { d.editText = k.args_json; editor.value = d.editText; checkEdit(); } }, 'Reset')),
    editor, editStatus, editNums, diffBox);
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
  /**
   * The edit's state: {changed, valid, text, node}. `text` is the editor's
   * text exactly, what is sent; `node` its lossless reading, which the diff
   * is computed on.
   */
  function editState() {
    if (!d.editing) return { changed: false, valid: true };
    const text = editor.value;
    const p = jsonParse(text);
    if (!p.ok) return { changed: true, valid: false, error: p.error };
    const same = proposal.ok ? nodeEqual(p.node, proposal.node) : text === k.args_json;
    return { changed: !same, valid: true, text, node: p.node };
  }
  let narrowReady = false;
  function checkEdit() {
    const st = editState();
    if (narrowReady) narrowAfterEdit(st);
    clear(diffBox);
    clear(editNums);
    if (d.editing && hasHidden(editor.value)) {
      // A text box cannot show them; say so (the diff and the view above spell them out).
      editNums.append(h('p', { class: 'hidden-flag warn-text', role: 'note' },
        '⚠ This text holds hidden characters, invisible in this box: ',
        h('code', null, plain([...new Set([...editor.value].filter((c) => isSpecial(c.codePointAt(0))))].slice(0, 12).join(''))), '.'));
    }
    if (d.editing && st.valid && st.node) append(editNums, [numFlag(st.node)]);
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
      const changes = proposal.ok ? nodeDiff(proposal.node, st.node) : [{ op: '~', p: '(whole)', from: { t: 's', v: k.args_json }, to: st.node }];
      const val = (node, cls) => h('code', { class: cls }, node.t === 'n' ? jsonView(node, 0) : vis(short(nodeText(node), 160)));
      diffBox.append(h('ul', { class: 'diff-list' }, changes.slice(0, 200).map((c) => h('li', { class: 'd-' + ({ '+': 'add', '-': 'del', '~': 'chg' })[c.op] },
        h('span', { class: 'd-op' }, c.op === '-' ? '−' : c.op), h('code', { class: 'd-ptr' }, vis(c.p)), ' ',
        c.op === '+' ? val(c.to, 'd-new') : null,
        c.op === '-' ? val(c.from, 'd-old') : null,
        c.op === '~' ? [val(c.from, 'd-old'), ' → ', val(c.to, 'd-new')] : null))));
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
  // Where several people (or signed votes) must approve each call, no grant
  // can stand in for them: once only.
  const onceOnly = (req.approvals_needed || 1) > 1 || !!(req.quorum && req.quorum.require_signed_votes);
  if (onceOnly) d.scope = 'once';
  for (const [val, label] of (onceOnly ? [['once', 'Once']] : [['once', 'Once'], ['session', 'For this session'], ['always', 'Always']])) {
    scopeBox.append(h('label', { class: 'seg-item' },
      h('input', { type: 'radio', name: 'scope-' + req.id, value: val, checked: d.scope === val, onchange: () => { d.scope = val; syncScope(); } }),
      h('span', null, label)));
  }
  const rowsBox = h('div', { class: 'grant-rows' });
  const rowsOf = (node) => leaves(node).slice(0, 64).map(([p, v]) => ({ ptr: p, on: true, re: exactPattern(v) }));
  if (d.grantRows == null) d.grantRows = proposal.ok ? rowsOf(proposal.node) : [];
  function renderRows() {
    clear(rowsBox);
    for (const row of d.grantRows) {
      const cb = h('input', { type: 'checkbox', checked: row.on, onchange: () => { row.on = cb.checked; inp.disabled = !cb.checked; d.narrowChosen = true; } });
      const inp = h('input', { type: 'text', class: 'mono', value: row.re, spellcheck: 'false', disabled: !row.on, 'aria-label': 'Pattern for ' + plain(row.ptr), oninput: () => { row.re = inp.value; d.narrowChosen = true; } });
      rowsBox.append(h('label', { class: 'grant-row' }, cb, h('code', { class: 'ptr' }, vis(row.ptr || '(whole)')), inp));
    }
  }
  renderRows();
  const anyRadio = h('input', { type: 'radio', name: 'narrow-' + req.id, value: 'any', checked: !d.narrow, onchange: () => { d.narrow = false; d.narrowChosen = true; rowsWrap.hidden = true; } });
  const likeRadio = h('input', { type: 'radio', name: 'narrow-' + req.id, value: 'like', checked: d.narrow, disabled: !d.grantRows.length, onchange: () => { d.narrow = true; d.narrowChosen = true; rowsWrap.hidden = false; } });
  const narrowBox = h('div', { class: 'narrow', hidden: d.scope === 'once' },
    h('div', { class: 'narrow-choice' },
      h('label', { class: 'radio' }, anyRadio,
        h('span', null, 'Any call of ', h('code', null, vis(k.tool_name)))),
      h('label', { class: 'radio' }, likeRadio,
        h('span', null, 'Only calls like this one'))));
  const rowsWrap = h('div', { class: 'rows-wrap', hidden: !d.narrow },
    h('p', { class: 'hint' }, 'A later call is approved only when every checked argument matches its pattern (a regular expression).'), rowsBox);
  narrowBox.append(rowsWrap);
  narrowReady = true;

  /** After an edit, the narrower grant is the default: calls like the
   *  edited one (until the person picks a scope themselves). */
  function narrowAfterEdit(st) {
    if (d.narrowChosen || !st.valid) return;
    const node = st.changed ? st.node : (proposal.ok ? proposal.node : null);
    if (!node) return;
    d.grantRows = rowsOf(node);
    d.narrow = st.changed && d.grantRows.length > 0;
    renderRows();
    likeRadio.disabled = !d.grantRows.length;
    likeRadio.checked = d.narrow;
    anyRadio.checked = !d.narrow;
    rowsWrap.hidden = !d.narrow;
  }
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

// ---------------------------------------------------------------- votes and passkeys

/** A tool approval's votes: how many must approve, who voted, who may still, and when it escalates. */
function votesView(req) {
  const needed = req.approvals_needed || 1;
  const q = req.quorum || null;
  const votes = req.votes || [];
  if (needed <= 1 && !q && !votes.length) return null;
  const approvals = votes.filter((v) => v.approved).length;
  const box = h('div', { class: 'votes', role: 'group', 'aria-label': 'Votes' },
    h('div', { class: 'section-head' }, h('h3', null, 'Votes'), h('span', { class: 'spacer' }),
      h('span', { class: 'vote-count' + (approvals ? ' some' : '') }, approvals + ' of ' + needed + ' approvals')),
    q && q.require_signed_votes ? h('p', { class: 'hint' }, 'Each vote must be signed with the voter\'s own key (a passkey, or lev key init).') : null);
  if (votes.length) {
    box.append(h('ul', { class: 'vote-list' }, votes.map((v) => h('li', { class: 'vote ' + (v.approved ? 'vote-yes' : 'vote-no'), dataset: { voter: v.voter } },
      h('span', { class: 'voter' }, vis(v.voter)), ' ',
      h('strong', { class: v.approved ? 'ok-text' : 'bad-text' }, v.approved ? 'approved' : 'denied'),
      v.response && v.response.modified_args_json ? h('span', { class: 'muted small' }, ' with edited arguments') : null,
      ' ', h('span', { class: 'signed-flag ' + (v.signed ? 'signed' : 'unsigned') }, v.signed ? 'signed' : 'unsigned'),
      ' ', h('span', { class: 'muted small' }, timeEl(v.at))))));
  }
  if (req.status === 'pending') {
    const voted = new Set(votes.map((v) => v.voter));
    let may;
    if (!q || !(q.approvers || []).length) {
      may = 'any approver who has not voted';
    } else {
      const esc = escalatesAt(req);
      const open = esc != null && Date.now() >= esc;
      const names = [...new Set([...(q.approvers || []), ...(open ? q.escalate_to || [] : [])])].filter((n) => !voted.has(n));
      may = names.length ? names.join(', ') : 'nobody';
    }
    box.append(h('p', { class: 'may-vote' }, h('span', { class: 'label' }, 'May still vote '), vis(may)));
    const esc = escalatesAt(req);
    if (esc != null && q) {
      const iso = new Date(esc).toISOString();
      box.append(h('p', { class: 'escalates' }, h('span', { class: 'label' }, 'Escalates '),
        vis((q.escalate_to || []).join(', ')), Date.now() < esc ? [' may vote too ', timeEl(iso, 'in')] : [' may vote too (since ', timeEl(iso), ')']));
    }
    if (S.me && voted.has(S.me.name)) box.append(h('p', { class: 'muted small you-voted' }, 'You have voted on this call.'));
  }
  return box;
}

/** When `escalate_to` may vote too (ms since the epoch), or null. */
function escalatesAt(req) {
  const s = req.quorum && req.quorum.escalate_after_s;
  if (s == null) return null;
  const t = Date.parse(req.created_at);
  return Number.isFinite(t) ? t + Number(s) * 1000 : null;
}

const b64 = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf)));
const b64url = (buf) => b64(buf).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
function fromB64url(text) {
  const s = text.replace(/-/g, '+').replace(/_/g, '/');
  const bin = atob(s + '='.repeat((4 - (s.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}
async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
}
const hexOf = (bytes) => [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');

/** DSSE's pre-authentication encoding of `type` and `payload` (bytes). */
function pae(type, payload) {
  const enc = new TextEncoder();
  const t = enc.encode(type);
  const head = enc.encode('DSSEv1 ' + t.length + ' ' + type + ' ' + payload.length + ' ');
  const out = new Uint8Array(head.length + payload.length);
  out.set(head);
  out.set(payload, head.length);
  return out;
}

const VOTE_TYPE = 'application/vnd.lev.vote+json; version=1';

/** This person's passkeys registered on this server, for this host. */
async function loadMyPasskeys() {
  S.passkeys = [];
  const btn = $('passkey-btn');
  const usable = window.PublicKeyCredential && window.isSecureContext && S.me && ['approver', 'admin'].includes(S.me.role);
  btn.hidden = !usable;
  if (!usable) return;
  const r = await api('GET', 'v1/people/keys');
  if (!r.ok) return;
  const prefix = 'person:' + S.me.name + ':';
  S.passkeys = ((r.body && r.body.keys) || []).filter((k) => typeof k.kid === 'string' && k.kid.startsWith(prefix)
    && k.rp_id === location.hostname && typeof k.credential_id === 'string');
  btn.textContent = S.passkeys.length ? 'Passkey: on' : 'Add a passkey';
  btn.title = S.passkeys.length
    ? 'Your votes on tool calls are signed with your passkey (' + S.passkeys.map((k) => k.kid).join(', ') + '). Click to add another.'
    : 'Sign your votes on tool calls with a passkey of this device, so they can be checked without trusting the server';
}

/** Make a passkey and register it: the server keeps only its public key. */
async function addPasskey() {
  const r = await api('GET', 'v1/people/passkeys/options');
  if (!r.ok) { toast(r.error || 'Passkeys are not available here.', 'error'); return; }
  const o = r.body;
  let cred;
  try {
    cred = await navigator.credentials.create({ publicKey: {
      challenge: fromB64url(o.challenge),
      rp: { id: o.rp_id, name: o.rp_name },
      user: { id: fromB64url(o.user_id), name: o.user_name, displayName: o.user_name },
      pubKeyCredParams: [{ type: 'public-key', alg: -7 }, { type: 'public-key', alg: -8 }],
      excludeCredentials: (o.exclude_credentials || []).map((id) => ({ type: 'public-key', id: fromB64url(id) })),
      authenticatorSelection: { residentKey: 'preferred', userVerification: 'preferred' },
      attestation: 'none',
      timeout: 120000,
    } });
  } catch (e) {
    toast('No passkey was made: ' + (e && e.message ? e.message : String(e)), 'error');
    return;
  }
  const resp = cred.response;
  const spki = resp.getPublicKey ? resp.getPublicKey() : null;
  if (!spki) { toast('This browser does not give the passkey\'s public key; use another browser or lev key init.', 'error'); return; }
  const reg = await api('POST', 'v1/people/passkeys', {
    credential_id: b64url(cred.rawId),
    public_key: b64(spki),
    alg: resp.getPublicKeyAlgorithm(),
    client_data_json: b64(resp.clientDataJSON),
  });
  if (!reg.ok) { toast('The passkey was not registered: ' + reg.error, 'error'); return; }
  toast('Passkey registered as ' + plain(reg.body.key.kid) + ': your votes are signed with it.', 'ok');
  await loadMyPasskeys();
}

/** This person's signed vote on `view` for the answer `body`, by passkey. */
async function passkeyVote(view, body) {
  const req = view.request;
  const b = req.vote_binding;
  if (!b) throw new Error('this interaction was stored before votes could be signed');
  const approved = body.approved === true;
  const edit = approved && body.modified_args_json ? body.modified_args_json : '';
  const effective = edit ? hexOf(await sha256(new TextEncoder().encode(edit))) : b.args_sha256;
  const payload = {
    v: 1, request_id: b.request_id, tool_name: b.tool_name, args_sha256: b.args_sha256,
    effective_args_sha256: effective, conversation_id: b.conversation_id, caller: b.caller,
    sandbox_mode: b.sandbox_mode, approved, scope: approved ? (body.scope || 'once') : 'once',
    voter: S.me.name, issued_at: new Date().toISOString(),
  };
  const bytes = new TextEncoder().encode(JSON.stringify(payload));
  const challenge = await sha256(pae(VOTE_TYPE, bytes));
  const got = await navigator.credentials.get({ publicKey: {
    challenge, rpId: location.hostname, timeout: 120000, userVerification: 'preferred',
    allowCredentials: S.passkeys.map((k) => ({ type: 'public-key', id: fromB64url(k.credential_id) })),
  } });
  const used = b64url(got.rawId);
  const key = S.passkeys.find((k) => k.credential_id === used) || S.passkeys[0];
  return {
    payloadType: VOTE_TYPE,
    payload: b64(bytes),
    signatures: [{
      keyid: key.kid,
      sig: b64(got.response.signature),
      authenticator_data: b64(got.response.authenticatorData),
      client_data_json: b64(got.response.clientDataJSON),
    }],
  };
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
      h('span', { class: 'file-icon', 'aria-hidden': 'true' }, clipIcon()),
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

// ---------------------------------------------------------------- tasks and operators

async function loadTasks() {
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
        h('h4', null, 'Spawn'), jsonBlock(t.spawn),
        t.last_result != null ? [h('h4', null, 'Last result'), jsonBlock(t.last_result)] : null,
        t.error ? [h('h4', null, 'Error'), h('pre', { class: 'json bad-text' }, vis(t.error))] : null,
        t.output_tail ? [h('h4', null, 'Output'), h('pre', { class: 'json' }, vis(t.output_tail))] : null))));
  }
  body.append(ul);
}

// ---------------------------------------------------------------- audit

const A = { entries: [], head: null, cursor: null };

async function loadAudit(more = false) {
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

boot();

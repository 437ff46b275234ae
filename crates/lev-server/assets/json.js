// JSON, read losslessly: a reader, a writer and a diff of the reader's nodes.
//
// Agent JSON is never read with JSON.parse nor written with JSON.stringify:
// they turn every number into a double (9007199254740993 becomes
// 9007199254740992, 123456789012345678901234567890 becomes
// 1.2345678901234568e+29) and put integer-like keys first. The reader below
// keeps each number as the text it was written as; that text is what is shown
// and what is sent.
//
// Base module (see main.js for the layers): no DOM either.

export const NUM_FLAG = 'This number cannot be represented exactly by JavaScript; it is shown and sent as written.';

/** A number of an API answer that JavaScript cannot hold exactly, kept as its text. */
export class JsonNum {
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
export function jsonParse(text) {
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
export function argsOf(text) {
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

/** An object's keys in the order its JSON text wrote them (readJson keeps it). */
export function keysOf(v) {
  if (!v || typeof v !== 'object') return [];
  return (v[KEYS] || Object.keys(v)).filter((k) => Object.prototype.hasOwnProperty.call(v, k));
}

/** JSON text (an API answer, an event) as ordinary values, numbers kept; null when not JSON. */
export function readJson(text) {
  const p = jsonParse(text);
  return p.ok ? toPlain(p.node) : null;
}

/** An ordinary value (from readJson) as a node again. */
export function valueNode(v) {
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
export function writeJson(node, indent, emit, depth = 0) {
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
export function nodeText(node, indent = 0) {
  let out = '';
  writeJson(node, indent, (t) => {
    out += t;
  });
  return out;
}

/** Numbers of a node that JavaScript cannot hold exactly, as written. */
export function inexactNumbers(node, out = []) {
  if (node.t === 'n' && !node.exact) out.push(node.raw);
  else if (node.t === 'o') for (const [, v] of node.e) inexactNumbers(v, out);
  else if (node.t === 'a') for (const v of node.v) inexactNumbers(v, out);
  return out;
}

/** Every string and key of a node. */
export function nodeStrings(node, out = []) {
  if (node.t === 's') out.push(node.v);
  else if (node.t === 'o') for (const [k, v] of node.e) { out.push(k); nodeStrings(v, out); }
  else if (node.t === 'a') for (const v of node.v) nodeStrings(v, out);
  return out;
}

/** Whether two nodes hold the same value (numbers compared by value as written, key order aside). */
export function nodeEqual(a, b) {
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
export function nodeDiff(a, b, ptr = '', out = []) {
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
export function leaves(node, ptr = '', out = []) {
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

/** A tool call's args in one line: a command line for `argv`, else compact JSON as written. */
export function argsSummary(argsJson) {
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
export function short(v, n = 160) {
  const s = typeof v === 'string' ? v : nodeText(valueNode(v));
  if (s.length <= n) return s;
  // Cut between code points, never inside a surrogate pair.
  const cps = Array.from(s);
  return cps.length <= n ? s : cps.slice(0, n).join('') + '…';
}

/** A word as a POSIX shell needs it: bare when safe, else single-quoted. */
export function shQuote(w) {
  if (/^[\w@%+=:,./-]+$/.test(w)) return w;
  return "'" + w.replace(/'/g, "'\\''") + "'";
}

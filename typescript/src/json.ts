/**
 * JSON read the way serde_json reads lev's Rust types, so that this verifier
 * accepts and refuses the same bytes as the Rust one (and python/lev/_json.py).
 *
 * `JSON.parse` cannot be used for signed payloads: it keeps the last of two
 * equal keys without a word, turns `18446744073709551616` into a float that
 * is not that number, and accepts lone surrogates. This parser keeps every
 * number as its text (`JNum`), every object's keys in order with the ones it
 * held more than once (`JObj.dups`), and refuses what RFC 8259 refuses.
 *
 * What serde_json does, and the readers here with it:
 * - A struct is read from a JSON object, or from an array of its fields in
 *   declaration order (a field with a default may be left off the end).
 * - A strict struct (`deny_unknown_fields`) refuses a field it does not know;
 *   a lenient one ignores it and never looks inside its value.
 *   A known field given twice is refused either way.
 * - Every key is read, so a key holding a lone surrogate (or, from bytes,
 *   text that is not UTF-8) is refused; a string value only when it is read.
 * - `-0`, and integers outside the 64-bit ranges, are floating point numbers.
 */

/** Text that is not JSON, or JSON that is not the type it should be. */
export class JsonError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "JsonError";
  }
}

/** A JSON number, kept as its exact text. */
export class JNum {
  constructor(readonly raw: string) {}
  /** Whether serde_json reads it as an integer (not `-0`, within i64 or u64). */
  get isInteger(): boolean {
    if (this.raw === "-0" || !/^-?(0|[1-9][0-9]*)$/.test(this.raw)) return false;
    const n = BigInt(this.raw);
    return n >= -(2n ** 63n) && n < 2n ** 64n;
  }
}

/** A JSON object: its keys in order (each once), and the keys it held more than once. */
export class JObj {
  readonly map = new Map<string, JVal>();
  readonly dups = new Set<string>();
  set(key: string, value: JVal): void {
    if (this.map.has(key)) this.dups.add(key);
    else this.map.set(key, value);
  }
}

export type JVal = null | boolean | string | JNum | JObj | JVal[];

/** serde_json's recursion limit. */
export const MAX_DEPTH = 128;

/**
 * Bytes to a string the way Python's `surrogateescape` does: each byte that
 * is not part of valid UTF-8 becomes the lone surrogate U+DC80 + byte, which
 * a reader then refuses wherever it looks.
 */
export function decodeUtf8Lossless(bytes: Uint8Array): string {
  const out: string[] = [];
  let i = 0;
  const n = bytes.length;
  const bad = (b: number) => out.push(String.fromCharCode(0xdc00 + b));
  while (i < n) {
    const b0 = bytes[i] as number;
    if (b0 < 0x80) {
      out.push(String.fromCharCode(b0));
      i += 1;
      continue;
    }
    let len = 0;
    let min = 0;
    let cp = 0;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      len = 2;
      cp = b0 & 0x1f;
      min = 0x80;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      len = 3;
      cp = b0 & 0x0f;
      min = 0x800;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      len = 4;
      cp = b0 & 0x07;
      min = 0x10000;
    } else {
      bad(b0);
      i += 1;
      continue;
    }
    if (i + len > n) {
      bad(b0);
      i += 1;
      continue;
    }
    let ok = true;
    for (let k = 1; k < len; k++) {
      const b = bytes[i + k] as number;
      if ((b & 0xc0) !== 0x80) {
        ok = false;
        break;
      }
      cp = (cp << 6) | (b & 0x3f);
    }
    if (!ok || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      bad(b0);
      i += 1;
      continue;
    }
    out.push(String.fromCodePoint(cp));
    i += len;
  }
  return out.join("");
}

/** Whether `s` is valid Unicode (no lone surrogate). */
export function isWellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i += 1;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return false;
    }
  }
  return true;
}

class Parser {
  i = 0;
  constructor(readonly s: string) {}

  fail(what: string): never {
    throw new JsonError(`${what} at character ${this.i}`);
  }

  ws(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.i += 1;
      else break;
    }
  }

  value(depth: number): JVal {
    this.ws();
    const c = this.s[this.i];
    switch (c) {
      case "{":
        return this.object(depth + 1);
      case "[":
        return this.array(depth + 1);
      case '"':
        return this.string();
      case "t":
        return this.word("true", true);
      case "f":
        return this.word("false", false);
      case "n":
        return this.word("null", null);
      case undefined:
        return this.fail("EOF while parsing a value");
      default:
        if (c === "-" || (c >= "0" && c <= "9")) return this.number();
        return this.fail("expected value");
    }
  }

  word<T extends JVal>(w: string, v: T): T {
    if (this.s.startsWith(w, this.i)) {
      this.i += w.length;
      return v;
    }
    return this.fail("expected value");
  }

  number(): JNum {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(
      this.s.slice(this.i, this.i + 4096),
    );
    if (!m || m[0] === "-") return this.fail("invalid number");
    const raw = m[0];
    this.i += raw.length;
    const next = this.s[this.i];
    if (next !== undefined && /[0-9.eE+-]/.test(next)) this.fail("invalid number");
    if (!/^-?(0|[1-9][0-9]*)$/.test(raw) && !Number.isFinite(Number(raw))) {
      this.fail("number out of range");
    }
    return new JNum(raw);
  }

  string(): string {
    const s = this.s;
    this.i += 1; // the opening quote
    let out = "";
    let start = this.i;
    for (;;) {
      if (this.i >= s.length) this.fail("EOF while parsing a string");
      const c = s.charCodeAt(this.i);
      if (c === 0x22) {
        out += s.slice(start, this.i);
        this.i += 1;
        return out;
      }
      if (c < 0x20) this.fail("control character (\\u0000-\\u001F) found while parsing a string");
      if (c === 0x5c) {
        out += s.slice(start, this.i);
        const e = s[this.i + 1];
        this.i += 2;
        switch (e) {
          case '"':
            out += '"';
            break;
          case "\\":
            out += "\\";
            break;
          case "/":
            out += "/";
            break;
          case "b":
            out += "\b";
            break;
          case "f":
            out += "\f";
            break;
          case "n":
            out += "\n";
            break;
          case "r":
            out += "\r";
            break;
          case "t":
            out += "\t";
            break;
          case "u": {
            const hex = s.slice(this.i, this.i + 4);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail("invalid escape");
            out += String.fromCharCode(Number.parseInt(hex, 16));
            this.i += 4;
            break;
          }
          default:
            this.i -= 1;
            this.fail("invalid escape");
        }
        start = this.i;
        continue;
      }
      this.i += 1;
    }
  }

  array(depth: number): JVal[] {
    if (depth > MAX_DEPTH) this.fail("recursion limit exceeded");
    this.i += 1;
    const out: JVal[] = [];
    this.ws();
    if (this.s[this.i] === "]") {
      this.i += 1;
      return out;
    }
    for (;;) {
      out.push(this.value(depth));
      this.ws();
      const c = this.s[this.i];
      this.i += 1;
      if (c === "]") return out;
      if (c !== ",") {
        this.i -= 1;
        this.fail("expected `,` or `]`");
      }
    }
  }

  object(depth: number): JObj {
    if (depth > MAX_DEPTH) this.fail("recursion limit exceeded");
    this.i += 1;
    const out = new JObj();
    this.ws();
    if (this.s[this.i] === "}") {
      this.i += 1;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') this.fail("key must be a string");
      const key = this.string();
      this.ws();
      if (this.s[this.i] !== ":") this.fail("expected `:`");
      this.i += 1;
      out.set(key, this.value(depth));
      this.ws();
      const c = this.s[this.i];
      this.i += 1;
      if (c === "}") return out;
      if (c !== ",") {
        this.i -= 1;
        this.fail("expected `,` or `}`");
      }
    }
  }
}

/** Parse JSON text (or UTF-8 bytes: invalid bytes are refused where read). */
export function parse(data: string | Uint8Array): JVal {
  const text = typeof data === "string" ? data : decodeUtf8Lossless(data);
  const p = new Parser(text);
  const v = p.value(0);
  p.ws();
  if (p.i !== text.length) p.fail("trailing characters");
  return v;
}

/** A plain JavaScript value (objects, arrays, strings, booleans, null, numbers) as a JVal. */
export function fromPlain(v: unknown): JVal {
  if (v === null || typeof v === "boolean" || typeof v === "string") return v;
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new JsonError("a number that is not finite");
    return new JNum(Object.is(v, -0) ? "-0" : String(v));
  }
  if (typeof v === "bigint") return new JNum(v.toString());
  if (v instanceof JNum || v instanceof JObj) return v;
  if (Array.isArray(v)) return v.map(fromPlain);
  if (typeof v === "object") {
    const o = new JObj();
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (x !== undefined) o.set(k, fromPlain(x));
    }
    return o;
  }
  throw new JsonError(`a ${typeof v} is not JSON`);
}

/** A JVal as a plain JavaScript value (integers beyond 2^53 stay exact as bigint). */
export function toPlain(v: JVal): unknown {
  if (v instanceof JNum) {
    if (v.isInteger) {
      const n = BigInt(v.raw);
      return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER)
        ? Number(n)
        : n;
    }
    return Number(v.raw);
  }
  if (v instanceof JObj) {
    const o: Record<string, unknown> = {};
    for (const [k, x] of v.map) o[k] = toPlain(x);
    return o;
  }
  if (Array.isArray(v)) return v.map(toPlain);
  return v;
}

function kind(v: JVal): string {
  if (v === null) return "null";
  if (typeof v === "boolean") return `boolean \`${v}\``;
  if (typeof v === "string") return "string";
  if (v instanceof JNum) return v.isInteger ? `integer \`${v.raw}\`` : "floating point";
  if (Array.isArray(v)) return "sequence";
  return "map";
}

function valid(s: JVal): string {
  if (typeof s !== "string") throw new JsonError(`invalid type: ${kind(s)}, expected a string`);
  if (!isWellFormed(s))
    throw new JsonError("a string that is not valid Unicode (a lone surrogate)");
  return s;
}

export type Reader<T> = (v: JVal) => T;

export const text: Reader<string> = valid;

export const boolean: Reader<boolean> = (v) => {
  if (typeof v !== "boolean") throw new JsonError(`invalid type: ${kind(v)}, expected a boolean`);
  return v;
};

export const u32: Reader<number> = (v) => {
  if (!(v instanceof JNum) || !v.isInteger) {
    throw new JsonError(`invalid type: ${kind(v)}, expected u32`);
  }
  const n = BigInt(v.raw);
  if (n < 0n || n > 0xffffffffn)
    throw new JsonError(`invalid value: integer \`${v.raw}\`, expected u32`);
  return Number(n);
};

/** `null` or what `read` reads. */
export function optional<T>(read: Reader<T>): Reader<T | null> {
  return (v) => (v === null ? null : read(v));
}

/** An array of what `read` reads. */
export function seq<T>(read: Reader<T>): Reader<T[]> {
  return (v) => {
    if (!Array.isArray(v)) throw new JsonError(`invalid type: ${kind(v)}, expected a sequence`);
    return v.map(read);
  };
}

/** A struct field: its JSON name, its reader, and whether it may be absent (then `dflt`). */
export interface Field {
  name: string;
  read: Reader<unknown>;
  optional?: boolean;
  dflt?: unknown;
}

export function field(
  name: string,
  read: Reader<unknown>,
  optional = false,
  dflt: unknown = null,
): Field {
  return { name, read, optional, dflt };
}

/** A reader of the struct `name`: a record of every field, by JSON name. */
export function struct(
  name: string,
  fields: Field[],
  opts: { strict: boolean },
): Reader<Record<string, unknown>> {
  const byName = new Map(fields.map((f) => [f.name, f]));
  const expected = `struct ${name} with ${fields.length} elements`;

  const fromMap = (v: JObj): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    const seen = new Set<string>();
    for (const [key, x] of v.map) {
      valid(key);
      const f = byName.get(key);
      if (f === undefined) {
        if (opts.strict) throw new JsonError(`unknown field \`${key}\``);
        continue;
      }
      if (v.dups.has(key)) throw new JsonError(`duplicate field \`${key}\``);
      try {
        out[key] = f.read(x);
      } catch (e) {
        if (e instanceof JsonError) throw new JsonError(`${key}: ${e.message}`);
        throw e;
      }
      seen.add(key);
    }
    for (const f of fields) {
      if (!seen.has(f.name)) {
        if (!f.optional) throw new JsonError(`missing field \`${f.name}\``);
        out[f.name] = f.dflt;
      }
    }
    return out;
  };

  const fromSeq = (v: JVal[]): Record<string, unknown> => {
    if (v.length > fields.length)
      throw new JsonError(`invalid length ${v.length}, expected ${expected}`);
    const out: Record<string, unknown> = {};
    fields.forEach((f, i) => {
      const x = v[i];
      if (x !== undefined) {
        try {
          out[f.name] = f.read(x);
        } catch (e) {
          if (e instanceof JsonError) throw new JsonError(`${f.name}: ${e.message}`);
          throw e;
        }
      } else if (f.optional) {
        out[f.name] = f.dflt;
      } else {
        throw new JsonError(`invalid length ${v.length}, expected ${expected}`);
      }
    });
    return out;
  };

  return (v) => {
    if (v instanceof JObj) return fromMap(v);
    if (Array.isArray(v)) return fromSeq(v);
    throw new JsonError(`invalid type: ${kind(v)}, expected ${expected}`);
  };
}

/**
 * What lev's `check_strict_json` refuses in a parsed value: a key held twice,
 * a lone surrogate, nesting past serde_json's limit. (A number out of range is
 * refused by the parser already.)
 */
export function checkStrict(value: JVal): void {
  const stack: [JVal, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [JVal, number];
    if (typeof v === "string") valid(v);
    else if (v instanceof JObj || Array.isArray(v)) {
      if (depth > MAX_DEPTH - 1) throw new JsonError("recursion limit exceeded");
      if (v instanceof JObj) {
        const first = [...v.dups].sort()[0];
        if (first !== undefined) throw new JsonError(`duplicate key ${JSON.stringify(first)}`);
        for (const [k, x] of v.map) {
          valid(k);
          stack.push([x, depth + 1]);
        }
      } else {
        for (const x of v) stack.push([x, depth + 1]);
      }
    }
  }
}

/** Strict JSON text to a plain value: duplicate keys, lone surrogates refused. */
export function strictParse(data: string | Uint8Array): unknown {
  const v = parse(data);
  checkStrict(v);
  return toPlain(v);
}

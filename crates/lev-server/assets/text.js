// Inert text: agent text as text nodes, hidden characters as visible ⟨U+XXXX⟩
// tokens, and whether an interaction holds any. The one module the server
// writes into: it gets lev_protocol::text::HIDDEN in place of the placeholder
// below.
//
// Base module (see main.js for the layers).

import { argsOf, JsonNum, nodeStrings } from './json.js';

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
export function isSpecial(cp) {
  if (cp === 0x09 || cp === 0x0a || cp === 0x0d) return false;
  return isHidden(cp) || (cp >= 0xd800 && cp <= 0xdfff);
}

/** Whether `s` holds a character that is shown as a token. */
export function hasHidden(s) {
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
export function vis(s) {
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
export function plain(s) {
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
export function suspicious(view) {
  const req = view.request || {};
  if (walkStrings(req, hasHidden)) return true;
  if (req.kind && req.kind.type === 'tool_approval') {
    const parsed = argsOf(req.kind.args_json);
    if (parsed.ok && nodeStrings(parsed.node).some(hasHidden)) return true;
  }
  return false;
}

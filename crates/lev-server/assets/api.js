// The API: one fetch wrapper (the CSRF token, JSON read losslessly, a 401
// ends the session through bus.js) and the pages of a list.
//
// Base module (see main.js for the layers).

import { up } from './bus.js';
import { S } from './state.js';
import { readJson } from './json.js';

function errorMessage(status, body) {
  if (body && body.error && body.error.message) return body.error.message;
  if (status === 0) return 'The server cannot be reached.';
  return 'The server answered ' + status + '.';
}

export async function api(method, path, body) {
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
    up.loggedOut('Your session has ended. Log in again.');
  }
  return { status: res.status, ok: res.ok, body: data, code, error: res.ok ? null : errorMessage(res.status, data) };
}

/** The items of a page: every list route answers `{items, next_cursor}`. */
export function pageItems(body) {
  return body && Array.isArray(body.items) ? body.items : [];
}

/** The cursor of the page after `body`, or null on the last page. */
export function nextCursor(body) {
  return body && typeof body.next_cursor === 'string' && body.next_cursor ? body.next_cursor : null;
}

/**
 * GET the list at `path` page after page, following `next_cursor` (at most
 * `maxPages` pages). Answers as api() does, with every page's `items`.
 */
export async function getPages(path, maxPages = 20) {
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

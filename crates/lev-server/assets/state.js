// The page's state, and the readers of it that every view shares.
//
// Base module (see main.js for the layers).

export const S = {
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

export const KIND_LABEL = {
  free_text: 'Question',
  multiple_choice: 'Choice',
  tool_approval: 'Tool approval',
  interaction_points: 'Review points',
  form: 'Form',
};

export const SCOPE_LABEL = { once: 'once', session: 'for this session', always: 'always' };

/** An event's data as a view {request, response, approval}. */
export function asView(data) {
  if (!data || typeof data !== 'object') return null;
  if (data.request && typeof data.request === 'object') return data;
  if (data.kind && data.id) return { request: data, response: data.response || null, approval: null };
  return null;
}

export function idOf(view) {
  return view && view.request ? view.request.id : null;
}

export function pendingList() {
  return [...S.items.values()]
    .filter((v) => v.request.status === 'pending')
    .sort((a, b) => (b.request.created_at || '').localeCompare(a.request.created_at || '') ||
      (b.request.id || '').localeCompare(a.request.id || ''));
}

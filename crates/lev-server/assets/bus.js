// Calls up the layers. Every module imports only modules below it (the base
// modules no view; see main.js), so no import goes round in a loop. The few
// calls that must go the other way (a 401 in api.js logs out; the detail
// pane's buttons go back to the inbox list) go through `up`: main.js fills
// it once at boot with the higher modules' functions, and nothing else
// writes it.
//
// Base module: imports no other module.

const unbound = (name) => () => {
  throw new Error('bus.js: up.' + name + ' called before main.js bound it');
};

/** The upward calls, each with the module it calls and who calls it. */
export const up = {
  /** login.js's loggedOut(message): api.js, on a 401. */
  loggedOut: unbound('loggedOut'),
  /** main.js's route(): login.js, once logged in. */
  route: unbound('route'),
  /** inbox.js's renderInbox(): answer.js, after an answer. */
  renderInbox: unbound('renderInbox'),
  /** inbox.js's renderSessions(): tasks.js, when operators' presence is known. */
  renderSessions: unbound('renderSessions'),
  /** inbox.js's select(id): outcomes.js ("Next waiting item"). */
  select: unbound('select'),
  /** inbox.js's back(): detail.js and outcomes.js ("← Inbox", "Close"). */
  back: unbound('back'),
  /** inbox.js's advanceFrom(id): answer.js, after an answer. */
  advanceFrom: unbound('advanceFrom'),
  /** inbox.js's refreshOne(id): answer.js, when an answer lost a race. */
  refreshOne: unbound('refreshOne'),
};

/** main.js, once: every upward call bound, none unknown, then frozen. */
export function bindUp(fns) {
  for (const name of Object.keys(up)) {
    if (typeof fns[name] !== 'function') throw new Error('bus.js: main.js did not bind up.' + name);
  }
  for (const name of Object.keys(fns)) {
    if (!Object.hasOwn(up, name)) throw new Error('bus.js: no upward call named ' + name);
  }
  Object.assign(up, fns);
  Object.freeze(up);
}

// The detail pane: the selected interaction, what it asks and why the gate
// stopped it, and its form or its outcome.
//
// View (see main.js for the layers and the page's safety rules); back to the
// inbox through bus.js.

import { up } from './bus.js';
import { KIND_LABEL, pendingList, S } from './state.js';
import { argsOf, nodeText, shQuote } from './json.js';
import { suspicious, vis } from './text.js';
import { $, append, clear, h, jsonBlock, jsonView, numFlag, timeEl } from './dom.js';
import { escalatesAt, votesView } from './votes.js';
import { outcome } from './outcomes.js';
import { answerForm } from './answer.js';
import { opDot } from './tasks.js';

/** Capabilities whose lack makes a call risky, and what each means. */
const RISKY_CAPS = {
  'net': 'reaches the network',
  'fs-write': 'writes files',
  'proc-exec': 'runs programs',
};

/** The risky capabilities a tool approval lacks, as [cap, meaning] pairs. */
export function riskOf(k) {
  if (!k || k.type !== 'tool_approval') return [];
  return (k.missing_capabilities || []).filter((c) => Object.hasOwn(RISKY_CAPS, c)).map((c) => [c, RISKY_CAPS[c]]);
}

/** Whether the policy rule that stopped the call marks it high risk. */
export function highRisk(req) {
  return Boolean(req && req.gate && req.gate.risk === 'high');
}

export function renderDetailIfChanged() {
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
  card.append(h('button', { type: 'button', class: 'ghost small back', onclick: () => up.back() }, '← Inbox'));
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

export function statusBadge(status) {
  return h('span', { class: 'status status-' + status }, status);
}

export function question(view) {
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

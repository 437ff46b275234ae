// Outcomes: a settled interaction's answer, described for a person.
//
// View (see main.js for the layers and the page's safety rules); back to the
// inbox through bus.js.

import { up } from './bus.js';
import { idOf, pendingList, SCOPE_LABEL } from './state.js';
import { keysOf, short } from './json.js';
import { plain, vis } from './text.js';
import { clipIcon, fmtSize, h, timeEl } from './dom.js';

/** A settled interaction's answer, described for a person. */
export function describe(req, resp) {
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
  if (resp.fields) {
    const props = (k.schema && k.schema.properties) || {};
    return [h('strong', null, 'Filled in'), h('dl', { class: 'form-answer' }, keysOf(resp.fields).map((name) => {
      const p = props[name] || {};
      const v = resp.fields[name];
      return h('div', { class: 'fact' }, h('dt', null, vis(p.title != null ? String(p.title) : name)),
        h('dd', { dataset: { field: name } }, vis(typeof v === 'string' ? v : String(v))));
    }))];
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

export function outcome(view, raced) {
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
    next ? h('button', { type: 'button', class: 'primary', onclick: () => up.select(idOf(next)) }, 'Next waiting item') : null,
    h('button', { type: 'button', class: 'ghost', onclick: () => up.back() }, 'Close')));
  return box;
}

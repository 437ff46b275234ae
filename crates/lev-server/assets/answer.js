// Answering: the detail pane's forms (a reply, a choice, a tool approval with
// its edits and grant) and respond(), the one place an answer is sent.
//
// View (see main.js for the layers and the page's safety rules); back to the
// inbox through bus.js.

import { up } from './bus.js';
import { S, SCOPE_LABEL } from './state.js';
import { argsOf, jsonParse, keysOf, leaves, nodeDiff, nodeEqual, nodeText, short } from './json.js';
import { hasHidden, isSpecial, plain, vis } from './text.js';
import { append, clear, clipIcon, fmtSize, h, jsonView, numFlag, toast } from './dom.js';
import { api } from './api.js';
import { passkeyVote } from './votes.js';

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

function draftFor(id) {
  if (!S.drafts.has(id)) {
    S.drafts.set(id, {
      text: '', files: [], feedback: '', scope: 'once', narrow: false, editing: false,
      editText: null, grantRows: null, injected: '', reason: '', choice: null,
    });
  }
  return S.drafts.get(id);
}

export function answerForm(view) {
  const t = view.request.kind.type;
  if (t === 'multiple_choice') return choiceForm(view);
  if (t === 'tool_approval') return approvalForm(view);
  if (t === 'form') return formForm(view);
  return textForm(view);
}

function formError() {
  return h('p', { class: 'form-error', role: 'alert', hidden: true });
}

function showError(el, msg) {
  el.hidden = !msg;
  el.replaceChildren(vis(msg || ''));
}

async function respond(view, body, errEl, buttons, doneMsg, onFields) {
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
    up.renderInbox();
    return;
  }
  if (r.ok) {
    toast(doneMsg + (body.vote ? ' (signed with your passkey)' : ''), 'ok');
    up.advanceFrom(id);
    return;
  }
  S.mine.delete(id);
  if (onFields && r.status === 422 && r.body && r.body.error && r.body.error.fields) {
    onFields(r.body.error.fields);
    showError(errEl, 'Some fields need another look.');
    return;
  }
  if (r.status === 409 && r.code === 'already_answered') {
    // Lost the race: show the answer that won, not an error.
    const current = S.items.get(id) || view;
    S.items.set(id, {
      ...current,
      request: { ...current.request, status: 'answered' },
      response: r.body && r.body.response ? r.body.response : current.response,
    });
    S.raced.set(id, 'conflict');
    up.renderInbox();
    up.refreshOne(id);
    return;
  }
  if (r.status === 410) {
    S.raced.set(id, 'gone');
    await up.refreshOne(id);
    const cur = S.items.get(id);
    if (cur && cur.request.status === 'pending') {
      S.items.set(id, { ...cur, request: { ...cur.request, status: 'expired' } });
    }
    up.renderInbox();
    return;
  }
  showError(errEl, r.error);
}

/** A number from the schema (a plain number or a JsonNum), or null. */
function num(v) {
  if (v == null || typeof v === 'boolean') return null;
  const n = Number(String(v));
  return Number.isFinite(n) ? n : null;
}

const FORMAT_INPUT = { email: 'email', uri: 'url', date: 'date' };

/**
 * A form question: one labelled input per property of its schema, in the
 * schema's order, by type (text, email, url, date, number, checkbox, a
 * select for an enum), defaults filled in; the server checks the answer and
 * each failing property's reason is shown under its input.
 */
function formForm(view) {
  const schema = view.request.kind.schema || {};
  const props = schema.properties || {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const d = draftFor(view.request.id);
  if (!d.form) d.form = {};
  const err = formError();
  const sendBtn = h('button', { type: 'button', class: 'primary', onclick: () => send() }, 'Send answer');
  const buttons = [sendBtn];
  const rows = [];
  const fieldErrors = new Map();
  for (const name of keysOf(props)) {
    const p = props[name] || {};
    const id = 'ff-' + view.request.id + '-' + name;
    const kept = Object.prototype.hasOwnProperty.call(d.form, name) ? d.form[name] : p.default;
    let input;
    if (p.type === 'boolean') {
      input = h('input', { type: 'checkbox', id, checked: kept === true });
    } else if (Array.isArray(p.enum)) {
      const names = Array.isArray(p.enumNames) ? p.enumNames : [];
      input = h('select', { id },
        required.has(name) && kept != null ? null : h('option', { value: '' }, '—'),
        p.enum.map((v, i) => h('option', { value: String(v), selected: kept === v }, vis(String(names[i] != null ? names[i] : v)))));
      if (kept != null) input.value = String(kept);
    } else if (p.type === 'integer' || p.type === 'number') {
      input = h('input', { type: 'number', id, step: p.type === 'integer' ? '1' : 'any' });
      if (num(p.minimum) != null) input.min = String(num(p.minimum));
      if (num(p.maximum) != null) input.max = String(num(p.maximum));
      if (kept != null) input.value = String(kept);
    } else {
      input = h('input', { type: FORMAT_INPUT[p.format] || 'text', id, autocomplete: 'off' });
      if (p.format === 'date-time') input.placeholder = 'YYYY-MM-DDThh:mm:ssZ';
      if (num(p.minLength) != null) input.minLength = num(p.minLength);
      if (num(p.maxLength) != null) input.maxLength = num(p.maxLength);
      if (kept != null) input.value = String(kept);
    }
    input.dataset.field = name;
    input.addEventListener('change', () => { d.form[name] = valueOf(); });
    const valueOf = () => {
      if (p.type === 'boolean') return input.checked;
      if (input.value === '') return undefined;
      if (p.type === 'integer' || p.type === 'number') {
        const n = Number(input.value);
        return Number.isFinite(n) && input.value.trim() !== '' ? n : input.value;
      }
      return input.value;
    };
    const fieldErr = h('p', { class: 'field-error', role: 'alert', dataset: { fieldError: name }, hidden: true });
    fieldErrors.set(name, fieldErr);
    const label = h('label', { for: id, class: 'field-label' }, vis(p.title != null ? String(p.title) : name),
      required.has(name) ? h('span', { class: 'required', title: 'required' }, ' *') : null);
    const help = p.description != null ? h('p', { class: 'hint field-help' }, vis(String(p.description))) : null;
    rows.push({ name, valueOf, el: h('div', { class: 'form-field' + (p.type === 'boolean' ? ' checkbox' : ''), dataset: { name } }, label, input, help, fieldErr) });
  }
  function showFields(fields) {
    for (const [name, el] of fieldErrors) {
      const msg = fields[name];
      el.hidden = !msg;
      el.replaceChildren(vis(msg ? String(msg) : ''));
      const row = rows.find((r) => r.name === name);
      if (row) row.el.classList.toggle('invalid', !!msg);
    }
    const first = rows.find((r) => fields[r.name]);
    if (first) { const i = first.el.querySelector('input,select'); if (i) i.focus(); }
  }
  function send() {
    const fields = {};
    for (const r of rows) {
      const v = r.valueOf();
      if (v !== undefined) fields[r.name] = v;
      d.form[r.name] = v;
    }
    showFields({});
    respond(view, { fields }, err, buttons, 'Form sent', showFields);
  }
  const form = h('form', { class: 'form-fields', novalidate: true, onsubmit: (e) => { e.preventDefault(); send(); } },
    rows.map((r) => r.el));
  return h('section', { class: 'answer' },
    h('h3', null, schema.title != null ? vis(String(schema.title)) : 'Your answer'),
    form, err, h('div', { class: 'actions' }, sendBtn));
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

// Votes and passkeys: a tool approval's votes, and this person's passkeys
// (registered here; they sign the person's votes).
//
// View (see main.js for the layers and the page's safety rules).

import { S } from './state.js';
import { plain, vis } from './text.js';
import { $, h, timeEl, toast } from './dom.js';
import { api } from './api.js';

/** A tool approval's votes: how many must approve, who voted, who may still, and when it escalates. */
export function votesView(req) {
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
export function escalatesAt(req) {
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
export async function loadMyPasskeys() {
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
export async function addPasskey() {
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
export async function passkeyVote(view, body) {
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

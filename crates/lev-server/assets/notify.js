// Desktop notifications of new questions.
//
// View (see main.js for the layers and the page's safety rules).

import { KIND_LABEL, S } from './state.js';
import { plain } from './text.js';
import { $, toast } from './dom.js';
import { select, summary } from './inbox.js';

export function updateNotifyButton() {
  const btn = $('notify-btn');
  btn.hidden = !('Notification' in window) || Notification.permission !== 'default';
}

export async function askNotify() {
  if (!('Notification' in window)) return;
  try {
    await Notification.requestPermission();
  } catch {
    /* older browsers */
  }
  updateNotifyButton();
  if (Notification.permission === 'granted') toast('Desktop notifications are on.');
}

export function notifyNew(view) {
  if (!S.loadedOnce || !('Notification' in window) || Notification.permission !== 'granted') return;
  if (!document.hidden && document.hasFocus()) return;
  const req = view.request;
  try {
    const n = new Notification('lev · ' + (KIND_LABEL[req.kind.type] || 'Question'), {
      body: plain(summary(req)).slice(0, 200) + '\n' + plain(req.session_id),
      tag: req.id,
    });
    n.addEventListener('click', () => {
      window.focus();
      location.hash = '#inbox';
      select(req.id);
      n.close();
    });
  } catch {
    /* not allowed here */
  }
}

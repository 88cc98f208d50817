import type { ChatClient, Verification } from './chat.ts';
import { h } from './dom.ts';

/**
 * The emoji verification going on (issue 38), in a modal dialog: a request to accept or decline,
 * the wait for the other side, the 7 emoji with their names to compare ("They match" / "They don't
 * match"), and how it ended. Escape cancels one that goes on, and closes one that ended.
 */
export class VerificationPanel {
  private readonly dialog = h('dialog', { class: 'verification-dialog', 'aria-labelledby': 'verification-title' });
  /** What the dialog shows now, so a render that changes nothing leaves its focus alone. */
  private shown: string | undefined;
  private client: ChatClient | undefined;

  constructor() {
    this.dialog.addEventListener('cancel', (event) => {
      event.preventDefault();
      const phase = this.client?.verification()?.phase;
      if (phase === 'done' || phase === 'cancelled') this.client?.dismissVerification();
      else this.client?.cancelVerification();
    });
  }

  render(client: ChatClient): void {
    this.client = client;
    const verification = client.verification();
    const key = JSON.stringify(verification ?? null);
    if (key === this.shown) return;
    this.shown = key;
    if (!verification) return this.close();
    this.dialog.replaceChildren(...this.content(client, verification));
    // In the body: a phone may hide the room view, and a hidden parent hides a modal too.
    if (!this.dialog.isConnected) document.body.append(this.dialog);
    if (!this.dialog.open) this.dialog.showModal();
  }

  /** The page leaves this client: the dialog goes with it. */
  leave(): void {
    this.client = undefined;
    this.shown = undefined;
    this.close();
  }

  private close(): void {
    if (this.dialog.open) this.dialog.close();
    this.dialog.remove();
    this.dialog.replaceChildren();
  }

  private content(client: ChatClient, v: Verification): HTMLElement[] {
    const them = v.ownDevice ? 'your other device' : v.otherName;
    const title = (text: string) => h('h2', { id: 'verification-title' }, text);
    const button = (label: string, onclick: () => void, primary = false) => h('button', { type: 'button', class: primary ? 'primary' : '', onclick }, label);
    const cancel = button('Cancel', () => client.cancelVerification());
    switch (v.phase) {
      case 'incoming':
        return [
          title(v.ownDevice ? 'Verify your new sign-in' : `Verify ${v.otherName}`),
          h('p', {}, v.ownDevice ? 'Another device signed in to your account asks to be verified: accept only if it is yours.' : `${v.otherName} wants to verify you.`),
          h('p', { class: 'hint' }, v.ownDevice ? `Device ${v.otherDeviceId ?? 'unknown'}: you will compare emoji on both screens.` : `${v.otherUserId}: you will compare emoji on both screens.`),
          h('div', { class: 'actions' }, button('Accept', () => client.acceptVerification(), true), button('Decline', () => client.cancelVerification())),
        ];
      case 'waiting':
        return [title(`Verify ${them}`), waitLine(`Waiting for ${them} to accept\u2026`), h('div', { class: 'actions' }, cancel)];
      case 'starting':
        return [title(`Verify ${them}`), waitLine('Starting the emoji comparison\u2026'), h('div', { class: 'actions' }, cancel)];
      case 'compare':
      case 'confirmed':
        return [
          title(`Verify ${them}`),
          h('p', {}, `Check that ${v.ownDevice ? 'your other device' : `${v.otherName}\u2019s screen`} shows the same emoji, in the same order.`),
          h(
            'ol',
            { class: 'sas-emoji', 'aria-label': 'Emoji to compare' },
            ...v.emoji.map((e) => h('li', {}, h('span', { class: 'sas-symbol', 'aria-hidden': 'true' }, e.symbol), h('span', { class: 'sas-name' }, e.name))),
          ),
          v.phase === 'confirmed'
            ? waitLine(`Waiting for ${them} to confirm\u2026`)
            : h('div', { class: 'actions' }, button('They match', () => client.compareEmoji(true), true), button('They don\u2019t match', () => client.compareEmoji(false))),
        ];
      case 'done':
        return [
          title('Verified'),
          h('p', { role: 'status' }, v.ownDevice ? 'This device and your other one now trust each other: your contacts trust both.' : `You verified ${v.otherName}: messages from their verified devices are trusted.`),
          h('div', { class: 'actions' }, button('Done', () => client.dismissVerification(), true)),
        ];
      case 'cancelled':
        return [
          title('Verification cancelled'),
          h('p', { role: 'status' }, cancelReason(v, them)),
          h('div', { class: 'actions' }, button('Close', () => client.dismissVerification(), true)),
        ];
    }
  }
}

function waitLine(text: string): HTMLElement {
  return h('p', { role: 'status' }, h('span', { class: 'spinner small', 'aria-hidden': 'true' }), text);
}

function cancelReason(v: Verification, them: string): string {
  if (v.cancelCode === 'm.mismatched_sas') return 'The emoji did not match: nothing was verified. Someone may be in the middle; try again, face to face or on a call.';
  if (v.cancelCode === 'm.timeout') return 'It took too long: nothing was verified.';
  return v.cancelledBy === 'me' ? 'You cancelled it: nothing was verified.' : `${them} cancelled it: nothing was verified.`;
}

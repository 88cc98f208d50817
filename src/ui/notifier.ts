import type { ChatClient, ChatNotification } from './chat.ts';
import { h } from './dom.ts';

/** The person's choice: notifications say only "New message" (kept in this browser). */
const PRIVATE_NOTIFICATIONS = 'hearth-private-notifications';

/**
 * Browser notifications (issue 38) for the messages the client says deserve one (push rules), shown
 * only while the tab is hidden. Permission is asked after the first such message arrives, not at load,
 * when the person can tell what it is for. Clicking a notification brings the tab back on its room.
 */
export class Notifier {
  private readonly privacy = h('input', { type: 'checkbox', id: 'private-notifications' });
  /** For "Your profile": the privacy choice. */
  readonly setting = h('label', { class: 'hint notification-setting' }, this.privacy, ' Private notifications (no sender, no text)');
  private asked = false;
  private client: ChatClient | undefined;

  constructor(private readonly openRoom: (roomId: string) => void) {
    this.privacy.checked = localStorage.getItem(PRIVATE_NOTIFICATIONS) === 'true';
    this.privacy.onchange = () => localStorage.setItem(PRIVATE_NOTIFICATIONS, String(this.privacy.checked));
  }

  /** Follows `client`'s notifications (each client once; a replaced client's are ignored). */
  attach(client: ChatClient): void {
    this.client = client;
    client.onNotification((notification) => {
      if (client === this.client) void this.show(notification);
    });
  }

  private async show(notification: ChatNotification): Promise<void> {
    if (!('Notification' in window)) return;
    let permission = Notification.permission;
    if (permission === 'default' && !this.asked) {
      this.asked = true;
      permission = await Notification.requestPermission();
    }
    if (permission !== 'granted' || document.visibilityState !== 'hidden') return;
    const privately = this.privacy.checked;
    const title = privately ? 'Hearth' : notification.sender === notification.roomName ? notification.sender : `${notification.sender} in ${notification.roomName}`;
    // One per room: a newer message replaces the one before.
    const shown = new Notification(title, { body: privately ? 'New message' : notification.body, tag: notification.roomId });
    shown.onclick = () => {
      window.focus();
      this.openRoom(notification.roomId);
      shown.close();
    };
  }
}

import { EventStatus, type MatrixClient } from 'matrix-js-sdk';
import { MAX_MESSAGE_CONTENT_BYTES, MessageTooLarge, type LocalEcho, type SendOptions } from '../chat.ts';
import { messageContent } from './content.ts';
import type { RefusedEchoes } from './rooms.ts';

/**
 * The messages this page sends: each a pending event of the SDK's (sending, sent, not sent and why) until the
 * homeserver has it; one too large is refused here without trying; Retry sends the same transaction again, and a
 * failed message goes only when the person discards it.
 */
export class Sending {
  /** Messages refused before they were tried, per room: shown with why until discarded. */
  readonly refused: RefusedEchoes = new Map();

  constructor(
    private readonly client: MatrixClient,
    private readonly events: { changed(): void; sent(): void },
  ) {}

  send(roomId: string, body: string, options: SendOptions): void {
    const content = messageContent(body, options);
    // The homeserver would refuse it (events are limited to 64 KiB): say so without trying.
    const size = new TextEncoder().encode(JSON.stringify(content)).length;
    if (size > MAX_MESSAGE_CONTENT_BYTES) {
      const echo: LocalEcho = { txnId: `refused-${Date.now()}-${Math.random().toString(36).slice(2)}`, body, failed: true, error: new MessageTooLarge(size, MAX_MESSAGE_CONTENT_BYTES) };
      this.refused.set(roomId, [...(this.refused.get(roomId) ?? []), echo]);
      return this.events.changed();
    }
    this.client.sendMessage(roomId, options.threadId ?? null, content as never).then(
      () => this.events.sent(),
      () => this.events.changed(),
    );
  }

  retry(roomId: string, echo: LocalEcho): void {
    const room = this.client.getRoom(roomId);
    const event = this.pendingEvent(roomId, echo);
    if (!room || !event || event.status !== EventStatus.NOT_SENT) return;
    // The same transaction ID, so the homeserver applies it once.
    this.client.resendEvent(event, room).then(
      () => this.events.sent(),
      () => this.events.changed(),
    );
  }

  discard(roomId: string, echo: LocalEcho): void {
    const refused = this.refused.get(roomId);
    if (refused?.some((e) => e.txnId === echo.txnId)) {
      this.refused.set(roomId, refused.filter((e) => e.txnId !== echo.txnId));
      return this.events.changed();
    }
    const event = this.pendingEvent(roomId, echo);
    if (event && event.status === EventStatus.NOT_SENT) this.client.cancelPendingEvent(event);
    this.events.changed();
  }

  private pendingEvent(roomId: string, echo: LocalEcho) {
    return this.client
      .getRoom(roomId)
      ?.getPendingEvents()
      .find((e) => (e.getTxnId() ?? e.getId()) === echo.txnId);
  }
}

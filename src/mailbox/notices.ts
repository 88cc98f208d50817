/**
 * "Mail for you waits here", said by a mailbox (POST /notify). The route, made with federation's
 * app, says it; the recipient's side, made after federation (it feeds federation's inbound path),
 * hears it: an event between the two rather than a reference from the route to a later object.
 */
export class MailNotices {
  private readonly listeners = new Set<(mailbox: string) => void>();

  say(mailbox: string): void {
    for (const listener of this.listeners) listener(mailbox);
  }

  hear(listener: (mailbox: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

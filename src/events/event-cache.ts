import type { RoomEvent } from './event.ts';
import { authEventIds } from './pdu.ts';
import type { RoomVersion } from './room-versions.ts';

/**
 * Where state resolution finds events. The room engine backs it with its store;
 * tests with a map.
 */
export interface EventSource {
  /** The event with this ID, or undefined when it is not known (it is then left out). */
  getEvent(eventId: string): Promise<RoomEvent | undefined>;
  /**
   * The IDs in the event's auth chain: its auth events, theirs, and so on (not the
   * event itself). Optional: lets the room engine supply chains it has cached;
   * without it chains are computed by walking auth events (from v12 the implied
   * create event too).
   */
  getAuthChain?(eventId: string): Promise<Iterable<string>>;
  /**
   * Whether the event was rejected. Optional (default: none are). Rejected events
   * are never used as auth events in the iterative auth checks.
   */
  isRejected?(eventId: string): boolean | Promise<boolean>;
}

/**
 * Memoises events, rejection and auth chains for one resolution (or longer, if the
 * caller keeps it): state resolution asks for the same events many times.
 */
export class EventCache {
  private readonly events = new Map<string, RoomEvent | null>();
  private readonly pending = new Map<string, Promise<RoomEvent | undefined>>();
  private readonly chains = new Map<string, ReadonlySet<string>>();
  private readonly rejected = new Map<string, boolean>();

  /** `version`: the room's, which says whether a create event is implied by room_id (v12+). */
  constructor(
    readonly source: EventSource,
    readonly version: RoomVersion,
  ) {}

  /** An event already loaded, without waiting. */
  peek(id: string): RoomEvent | undefined {
    return this.events.get(id) ?? undefined;
  }

  get(id: string): Promise<RoomEvent | undefined> {
    const known = this.events.get(id);
    if (known !== undefined) return Promise.resolve(known ?? undefined);
    let promise = this.pending.get(id);
    if (!promise) {
      promise = this.source.getEvent(id).then((event) => {
        this.events.set(id, event ?? null);
        this.pending.delete(id);
        return event;
      });
      this.pending.set(id, promise);
    }
    return promise;
  }

  /** Loads many events concurrently (a store can batch them). */
  async load(ids: Iterable<string>): Promise<void> {
    const wanted: Promise<unknown>[] = [];
    for (const id of ids) if (!this.events.has(id)) wanted.push(this.get(id));
    await Promise.all(wanted);
  }

  async isRejected(id: string): Promise<boolean> {
    if (!this.source.isRejected) return false;
    let rejected = this.rejected.get(id);
    if (rejected === undefined) {
      rejected = await this.source.isRejected(id);
      this.rejected.set(id, rejected);
    }
    return rejected;
  }

  /** An auth chain already computed, without waiting. */
  knownChain(id: string): ReadonlySet<string> | undefined {
    return this.chains.get(id);
  }

  /**
   * The auth chain of an event (excluding the event), memoised per event: each
   * event's chain is the union of its auth events and their chains, so every
   * event is walked once however many chains it is in. Unknown auth events are
   * in the chain but end it; a cycle (possible only with forged v1–v2 events) is cut.
   */
  async authChain(id: string): Promise<ReadonlySet<string>> {
    const known = this.chains.get(id);
    if (known) return known;
    if (this.source.getAuthChain) {
      const chain = new Set(await this.source.getAuthChain(id));
      this.chains.set(id, chain);
      return chain;
    }
    const visiting = new Set<string>();
    const stack = [id];
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (this.chains.has(top)) {
        stack.pop();
        continue;
      }
      // Loaded events are read without a turn of the event loop: this walk visits thousands.
      const event = this.events.has(top) ? this.peek(top) : await this.get(top);
      const auths = event ? authEventIds(event, this.version) : [];
      if (!visiting.has(top)) {
        visiting.add(top);
        const todo = auths.filter((a) => !this.chains.has(a) && !visiting.has(a));
        if (todo.length > 0) {
          stack.push(...todo);
          continue;
        }
      }
      const chain = new Set<string>();
      for (const a of auths) {
        chain.add(a);
        const sub = this.chains.get(a);
        if (sub) for (const x of sub) chain.add(x);
      }
      chain.delete(top);
      this.chains.set(top, chain);
      visiting.delete(top);
      stack.pop();
    }
    return this.chains.get(id)!;
  }
}

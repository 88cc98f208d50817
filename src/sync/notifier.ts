import type { StreamChange } from '../storage/stream.ts';

interface Waiter {
  userId: string;
  rooms: ReadonlySet<string>;
  wake: () => void;
}

/**
 * Wakes waiting /sync long-polls when something relevant to them is stored. A
 * listener is registered before a sync computes its answer, so a change that
 * lands mid-computation still wakes it (no lost wake-ups).
 */
export class Notifier {
  private readonly waiters = new Set<Waiter>();
  /** Those waiting for a number of long-polls to be waiting (untilWaiting). */
  private readonly watchers = new Set<{ count: number; resolve: () => void }>();

  notify(change: StreamChange): void {
    for (const waiter of this.waiters) {
      if (change.userIds?.includes(waiter.userId) || change.roomIds?.some((r) => waiter.rooms.has(r))) waiter.wake();
    }
  }

  /**
   * Starts listening for changes relevant to a user in the given rooms. The
   * returned promise resolves at the first such change, or after timeoutMs.
   */
  listen(userId: string, rooms: ReadonlySet<string>, timeoutMs: number): { changed: Promise<boolean>; cancel: () => void } {
    let waiter!: Waiter;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const changed = new Promise<boolean>((resolve) => {
      const finish = (woken: boolean) => {
        this.waiters.delete(waiter);
        if (timer) clearTimeout(timer);
        resolve(woken);
      };
      waiter = { userId, rooms, wake: () => finish(true) };
      this.waiters.add(waiter);
      if (this.watchers.size > 0) this.tellWatchers();
      timer = setTimeout(() => finish(false), Math.max(0, timeoutMs));
    });
    return { changed, cancel: () => waiter.wake() };
  }

  /** How many long-polls are listening now. */
  get waiting(): number {
    return this.waiters.size;
  }

  /**
   * Resolves once at least `count` long-polls are listening: a long-poll listens before it
   * computes its answer, so a change made after this still wakes it (what tests wait on
   * rather than sleeping).
   */
  untilWaiting(count: number): Promise<void> {
    if (this.waiters.size >= count) return Promise.resolve();
    return new Promise((resolve) => this.watchers.add({ count, resolve }));
  }

  private tellWatchers(): void {
    for (const watcher of this.watchers) {
      if (this.waiters.size < watcher.count) continue;
      this.watchers.delete(watcher);
      watcher.resolve();
    }
  }
}

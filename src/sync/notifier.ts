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
      timer = setTimeout(() => finish(false), Math.max(0, timeoutMs));
    });
    return { changed, cancel: () => waiter.wake() };
  }

  get waiting(): number {
    return this.waiters.size;
  }
}

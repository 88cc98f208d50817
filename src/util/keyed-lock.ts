/**
 * Runs tasks one at a time per key (a room, a user), in the order they were
 * queued; different keys run in parallel. A failed task does not block the next.
 * Keys with nothing queued are forgotten, so the map stays as small as the work.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const run = previous.then(task, task);
    const tail = run.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return run;
  }
}

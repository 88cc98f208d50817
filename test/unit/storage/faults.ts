import type { PersistenceHooks, PersistenceStep } from '../../../src/storage/persistence.ts';

type Action = { kind: 'halt' } | { kind: 'fail'; error: unknown };

/**
 * Fault injection for persistence backends: at the nth time a step is reached,
 * either throw (an I/O error) or halt forever (the process died there; the test
 * then closes the backend, as the OS would, and reopens what was stored).
 */
export class Faults implements PersistenceHooks {
  private readonly plans: Array<{ step: PersistenceStep; remaining: number; action: Action }> = [];
  private readonly seen = new Map<PersistenceStep, number>();
  private waiters: Array<{ step: PersistenceStep; resolve: () => void }> = [];
  private onHalt!: (step: PersistenceStep) => void;
  /** Resolves with the step where the simulated crash happened. */
  readonly halted = new Promise<PersistenceStep>((resolve) => (this.onHalt = resolve));

  haltAt(step: PersistenceStep, occurrence = 1): this {
    this.plans.push({ step, remaining: occurrence, action: { kind: 'halt' } });
    return this;
  }

  failAt(step: PersistenceStep, error: unknown, occurrence = 1): this {
    this.plans.push({ step, remaining: occurrence, action: { kind: 'fail', error } });
    return this;
  }

  /** Resolves the next time `step` is reached (to wait for background work, such as an idle snapshot, to get there). */
  reached(step: PersistenceStep): Promise<void> {
    return new Promise((resolve) => this.waiters.push({ step, resolve }));
  }

  count(step: PersistenceStep): number {
    return this.seen.get(step) ?? 0;
  }

  at(step: PersistenceStep): void | Promise<void> {
    this.seen.set(step, this.count(step) + 1);
    for (const waiter of this.waiters.filter((w) => w.step === step)) waiter.resolve();
    this.waiters = this.waiters.filter((w) => w.step !== step);
    for (const plan of this.plans) {
      if (plan.step !== step || plan.remaining === 0) continue;
      if (--plan.remaining > 0) continue;
      if (plan.action.kind === 'fail') throw plan.action.error;
      this.onHalt(step);
      return new Promise<void>(() => undefined);
    }
  }
}

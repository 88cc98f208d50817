import { describe, expect, it } from 'vitest';
import { UndoneTransactions } from './transaction-gaps.ts';

describe('UndoneTransactions', () => {
  it('leaves a transaction undone fewer than `limit` times, then lets it be answered, and starts again once done', () => {
    const undone = new UndoneTransactions(3);
    expect([undone.mayLeaveUndone('t'), undone.mayLeaveUndone('t'), undone.mayLeaveUndone('t')]).toEqual([true, true, false]);
    expect(undone.mayLeaveUndone('t')).toBe(true);
    undone.done('t');
    expect([undone.mayLeaveUndone('t'), undone.mayLeaveUndone('u'), undone.mayLeaveUndone('t')]).toEqual([true, true, true]);
  });

  it('keeps at most `bound` transactions, forgetting the oldest', () => {
    const undone = new UndoneTransactions(2, 2);
    undone.mayLeaveUndone('a');
    undone.mayLeaveUndone('b');
    undone.mayLeaveUndone('c'); // forgets a
    expect(undone.mayLeaveUndone('a')).toBe(true);
    expect(undone.mayLeaveUndone('c')).toBe(false);
  });
});

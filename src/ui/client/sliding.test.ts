import { describe, expect, it } from 'vitest';
import { joins, onlyNewer } from './sliding.ts';

// When SlidingSyncSdk 37 would put a limited timeline in order around what a room holds (sliding.ts closeGap).
describe('joins', () => {
  const held = ['c', 'd', 'e'];
  it('takes newer events after the newest held, and older ones before the oldest', () => {
    expect(joins(held, ['e', 'f', 'g'])).toBe(true);
    expect(joins(held, ['a', 'b', 'c', 'd', 'e'])).toBe(true);
    expect(joins(held, ['a', 'b', 'c', 'd', 'e', 'f'])).toBe(true);
    expect(joins(held, ['d', 'e'])).toBe(true);
  });
  it('finds a gap: nothing held, or events missing between the held ones and the new', () => {
    expect(joins(held, ['g', 'h'])).toBe(false);
    expect(joins(held, ['a', 'e', 'f'])).toBe(false);
    expect(joins(held, ['d', 'x', 'e'])).toBe(false);
    expect(joins(held, ['c', 'd', 'f'])).toBe(false);
  });
});

// A limited answer is left to the SDK only when it adds newer events: older ones would go where threads are not sorted out.
describe('onlyNewer', () => {
  const held = ['c', 'd', 'e'];
  it('is true for held events followed by newer ones', () => {
    expect(onlyNewer(held, ['e', 'f', 'g'])).toBe(true);
    expect(onlyNewer(held, ['d', 'e'])).toBe(true);
  });
  it('is false when older events come, or a gap', () => {
    expect(onlyNewer(held, ['a', 'b', 'c', 'd', 'e'])).toBe(false);
    expect(onlyNewer(held, ['b', 'c', 'd', 'e', 'f'])).toBe(false);
    expect(onlyNewer(held, ['g', 'h'])).toBe(false);
  });
});

import { describe, expect, it } from 'vitest';
import { joins } from './sliding.ts';

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

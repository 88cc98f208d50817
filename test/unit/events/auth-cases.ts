import { expect } from 'vitest';
import type { JsonObject } from '../../../src/crypto/canonical-json.ts';
import { AuthError } from '../../../src/events/auth.ts';
import { ROOM_VERSIONS } from '../../../src/events/room-versions.ts';
import { TestRoom, type EventFields } from './room-builder.ts';

// The cast and the few moves every auth-rule test is written in (src/events/auth*.test.ts).

export const ALICE = '@alice:example.org'; // creator, level 100
export const BOB = '@bob:example.org';
export const CAROL = '@carol:other.org';
export const DAVE = '@dave:far.org';
export const EVE = '@eve:evil.org';

export const ALL = [...ROOM_VERSIONS.keys()];
export const range = (from: number, to: number): string[] => ALL.filter((v) => Number(v) >= from && Number(v) <= to);

export async function room(version: string, joinRule = 'public', users: JsonObject = {}): Promise<TestRoom> {
  return TestRoom.bootstrapped(version, ALICE, joinRule, users);
}

export async function allows(r: TestRoom, fields: EventFields): Promise<void> {
  await expect(r.check(await r.build(fields))).resolves.toBeUndefined();
}

export async function denies(r: TestRoom, fields: EventFields, reason?: RegExp): Promise<void> {
  const check = r.check(await r.build(fields));
  await expect(check).rejects.toBeInstanceOf(AuthError);
  if (reason) await expect(check).rejects.toThrow(reason);
}

export const member = (sender: string, membership: string, target = sender, content: JsonObject = {}): EventFields => ({
  type: 'm.room.member',
  sender,
  state_key: target,
  content: { membership, ...content },
});
export const message = (sender: string): EventFields => ({ type: 'm.room.message', sender, content: { msgtype: 'm.text', body: 'hi' } });
export const state = (sender: string, type: string, content: JsonObject = {}, key = ''): EventFields => ({ type, sender, state_key: key, content });
export const powerLevels = (sender: string, content: JsonObject): EventFields => state(sender, 'm.room.power_levels', content);

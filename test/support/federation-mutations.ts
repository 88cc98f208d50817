// Mutations of valid federation bodies (signed PDUs, EDUs) for the intake fuzzers: the same
// generators whatever carries them (libp2p: test/integration/federation-intake.fuzz.test.ts;
// HTTPS: test/integration/https-intake.fuzz.test.ts).
import fc from 'fast-check';
import { expect } from 'vitest';
import { FederationRequestError, type FederationClient } from '../../src/federation/client.ts';
import { canonicalJson } from '../../src/crypto/canonical-json.ts';
import { redactEvent } from '../../src/events/redaction.ts';
import type { RoomVersion } from '../../src/events/room-versions.ts';
import type { Homeserver } from '../../src/homeserver.ts';
import { validateFederationResponse } from './spec-schema.ts';

export type Path = (string | number)[];
/** Every place in a JSON value: the root's children, theirs, and so on. */
export function paths(value: unknown, prefix: Path = []): Path[] {
  if (typeof value !== 'object' || value === null) return [];
  const keys: (string | number)[] = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value);
  return keys.flatMap((k) => [[...prefix, k], ...paths((value as Record<string, unknown>)[k], [...prefix, k])]);
}
function at(root: unknown, path: Path): unknown {
  let node = root;
  for (const k of path) node = (node as Record<string | number, unknown>)[k];
  return node;
}
const parentOf = (root: unknown, path: Path) => at(root, path.slice(0, -1)) as Record<string | number, unknown>;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export const someEventId = fc.constantFrom('$', '$x', '$' + 'A'.repeat(43), 'not an id', '$aaaa:elsewhere');
export const junk = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(-1, 2 ** 53, 1.5, -0, '', [], {}, null, [null], [1], ['$nope'], { sha256: 1 }, 'A'.repeat(86)),
  someEventId,
  fc.constantFrom('@alice:victim', '!other:room', 'm.room.create', 'm.room.power_levels'),
);
export type Mutation =
  | { kind: 'set'; at: number; value: unknown }
  | { kind: 'delete'; at: number }
  | { kind: 'add'; at: number; key: string; value: unknown }
  | { kind: 'flip'; at: number; index: number };
export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), at: fc.nat(), value: junk }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('add' as const), at: fc.nat(), key: fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('state_key', 'redacts', 'event_id', 'unsigned', 'origin', 'membership', 'prev_state', 'sha256')), value: junk }),
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), index: fc.nat() }),
);

/** Applies mutations to a copy; the root itself is path [] and can only gain keys. */
export function mutate(pdu: Record<string, unknown>, mutations: Mutation[]): unknown {
  let root: unknown = structuredClone(pdu);
  for (const m of mutations) {
    const all = paths(root);
    if (m.kind === 'add') {
      const targets: Path[] = [[], ...all.filter((p) => isObject(at(root, p)))];
      (at(root, targets[m.at % targets.length]!) as Record<string, unknown>)[m.key] = m.value;
      continue;
    }
    if (all.length === 0) continue;
    const path = all[m.at % all.length]!;
    const parent = parentOf(root, path);
    const key = path[path.length - 1]!;
    if (m.kind === 'set') parent[key] = m.value;
    else if (m.kind === 'delete') {
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else delete parent[key];
    } else {
      const old = parent[key];
      if (typeof old === 'string' && old.length > 0) {
        const i = m.index % old.length;
        parent[key] = old.slice(0, i) + (old[i] === 'A' ? 'B' : 'A') + old.slice(i + 1);
      } else if (typeof old === 'number') parent[key] = old + 1;
    }
  }
  return root;
}

/** What signatures and the content hash cover: everything but signatures, unsigned and hashes. */
export const covered = (e: object) => {
  const { signatures: _s, unsigned: _u, hashes: _h, event_id: _id, ...rest } = e as Record<string, unknown>;
  return canonicalJson(rest);
};

/** One valid EDU of each kind Hearth takes, about `roomId`, from `sender` (the sending server's user) to `recipient`; `latest` names events of the room. */
export const eduTemplates = (roomId: string, sender: string, recipient: string, latest: string[]): Record<string, unknown>[] => [
  { edu_type: 'm.typing', content: { room_id: roomId, user_id: sender, typing: true } },
  { edu_type: 'm.receipt', content: { [roomId]: { 'm.read': { [sender]: { event_ids: latest, data: { ts: 1 } } } } } },
  { edu_type: 'm.presence', content: { push: [{ user_id: sender, presence: 'online', last_active_ago: 5, currently_active: true, status_msg: 'hi' }] } },
  { edu_type: 'm.direct_to_device', content: { sender: sender, type: 'm.fuzz', message_id: crypto.randomUUID(), messages: { [recipient]: { '*': { n: 1 } } } } },
  { edu_type: 'm.device_list_update', content: { user_id: sender, device_id: 'FUZZ', device_display_name: 'x', stream_id: 7, prev_id: [6], deleted: false, keys: { user_id: sender, device_id: 'FUZZ', algorithms: ['m.olm.v1.curve25519-aes-sha2'], keys: { 'ed25519:FUZZ': 'key' }, signatures: {} } } },
  { edu_type: 'm.signing_key_update', content: { user_id: sender, master_key: { user_id: sender, usage: ['master'], keys: { 'ed25519:base64': 'base64' } }, self_signing_key: { user_id: sender, usage: ['self_signing'], keys: { 'ed25519:other': 'other' } } } },
];

/**
 * The EDU property both intake fuzzers run: a transaction of one to four EDUs, each of a random kind,
 * valid or mutated, answers 200, or is refused whole with 400 M_BAD_JSON by the transaction's own schema
 * (each EDU an object with a string edu_type and an object content); no handler fails with a programming
 * error (`crashes` collects what the receiver logged as one).
 */
export function eduTransactionProperty(client: FederationClient, origin: string, destination: string, templates: () => Record<string, unknown>[], crashes: unknown[]) {
  return fc.asyncProperty(fc.array(fc.tuple(fc.nat(5), fc.array(mutation, { maxLength: 3 })), { minLength: 1, maxLength: 4 }), async (picks) => {
    const edus = picks.map(([kind, mutations]) => mutate(templates()[kind]!, mutations));
    const txn = { origin, origin_server_ts: Date.now(), pdus: [], edus };
    const answer = await client.sendTransaction(destination, crypto.randomUUID(), txn as never).catch((e: unknown) => e);
    if (answer instanceof FederationRequestError) {
      expect([answer.status, answer.errcode], `${answer.message} for ${JSON.stringify(edus)}`).toEqual([400, 'M_BAD_JSON']);
      return;
    }
    if (answer instanceof Error) throw answer;
    expect(crashes, JSON.stringify(edus)).toEqual([]);
  });
}

/**
 * A receiver's 200 answer to a transaction carrying one mutated PDU, checked: only an event whose
 * signed parts were untouched is accepted, each refusal names its reason, and under the original's ID
 * or any other the answer names, the receiver holds nothing as valid but the original or its redacted form.
 */
export async function expectOnlyOriginalStored(answer: unknown, original: { pdu: Record<string, unknown>; eventId: string }, mutated: unknown, version: RoomVersion, receiver: Homeserver): Promise<void> {
  validateFederationResponse('PUT', '/_matrix/federation/v1/send/x', 200, answer);
  const results = (answer as { pdus?: Record<string, { error?: string }> }).pdus ?? {};
  const untouched = typeof mutated === 'object' && mutated !== null && covered(mutated) === covered(original.pdu);
  for (const [id, result] of Object.entries(results)) {
    if (result.error === undefined) expect(untouched, `${id} accepted though changed: ${JSON.stringify(mutated)}`).toBe(true);
    else expect(result.error.length, id).toBeGreaterThan(0);
  }
  const allowed = new Set([covered(original.pdu), covered(redactEvent(original.pdu, version))]);
  for (const id of new Set([original.eventId, ...Object.keys(results)])) {
    const stored = await receiver.services.rooms.getEvent(id);
    if (!stored || stored.rejected) continue;
    expect(allowed.has(covered(stored.event)), `${id} stored as ${JSON.stringify(stored.event)}`).toBe(true);
  }
}

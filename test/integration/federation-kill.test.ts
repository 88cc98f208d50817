import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnHearth, stopAllHearths, type HearthProcess } from '../support/hearth-process.ts';
import { startP2PHomeserver, type P2PHomeserver } from '../support/p2p-homeserver.ts';
import { longPollUntil, type Syncer } from '../support/sync-until.ts';
import { api, register, type Account } from './harness.ts';

// A host is killed with SIGKILL in the middle of a burst its client is sending into a room
// shared over libp2p, and restarted on the same folder; the client retries what was not
// acknowledged with the same transaction IDs. Nothing acknowledged is lost, and the other
// server gets the whole burst, each message once. The kill comes on the Nth acknowledgement
// (an event, not a clock), with more requests in flight.

const TOTAL = 60;
const KILL_AFTER = 30;
const IN_FLIGHT = 4;

let dir: string;
let a: P2PHomeserver;
let b: HearthProcess;
let alice: Account;
let carol: Account;
let roomId: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hearth-kill-'));
  a = await startP2PHomeserver();
  b = await spawnHearth({ dataDir: dir, bootstrap: a.p2p.multiaddrs() });
  alice = await register(a, 'alice');
  carol = await register(b, 'carol');
  roomId = (await api(a, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id;
  const joined = await api(b, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?via=${a.homeserver.serverName}`, { token: carol.accessToken, body: {} });
  expect(joined.status, JSON.stringify(joined.body)).toBe(200);
});

afterAll(async () => {
  await stopAllHearths();
  await a?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('kill -9 of a federating host mid-burst', () => {
  it('loses nothing it acknowledged, and the burst completes on the other server, each message once', async () => {
    const room = encodeURIComponent(roomId);
    const acknowledged = new Map<number, string>();
    const retry: number[] = [];
    let next = 0;
    let kill: Promise<void> | undefined;
    const sendFrom = async (host: HearthProcess, take: () => number | undefined) => {
      for (let i = take(); i !== undefined; i = take()) {
        const r = await fetch(`${host.url}/_matrix/client/v3/rooms/${room}/send/m.room.message/burst-${i}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${carol.accessToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ msgtype: 'm.text', body: `burst ${i}` }),
        }).then(async (response) => (response.ok ? ((await response.json()) as { event_id: string }) : undefined), () => undefined);
        if (r) acknowledged.set(i, r.event_id);
        else retry.push(i);
        if (acknowledged.size >= KILL_AFTER) kill ??= b.stop('SIGKILL');
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, () => sendFrom(b, () => (kill || next >= TOTAL ? undefined : next++))));
    await kill;
    expect(b.child.signalCode).toBe('SIGKILL');
    const beforeKill = new Map(acknowledged);
    for (let i = next; i < TOTAL; i++) retry.push(i);
    expect(beforeKill.size).toBeGreaterThanOrEqual(KILL_AFTER);
    expect(beforeKill.size).toBeLessThan(TOTAL);

    b = await spawnHearth({ dataDir: dir, bootstrap: a.p2p.multiaddrs() });
    // Every event acknowledged before the kill is there, under the ID the client was given.
    for (const [i, eventId] of beforeKill) {
      const r = await api(b, 'GET', `/_matrix/client/v3/rooms/${room}/event/${encodeURIComponent(eventId)}`, { token: carol.accessToken });
      expect(r.status, `burst ${i}`).toBe(200);
      expect(r.body.content.body).toBe(`burst ${i}`);
    }
    // The client retries the rest with the same transaction IDs (some of them were stored and not answered).
    retry.sort((x, y) => x - y);
    await Promise.all(Array.from({ length: IN_FLIGHT }, () => sendFrom(b, () => retry.shift())));
    expect(acknowledged.size).toBe(TOTAL);
    for (const [i, eventId] of beforeKill) expect(acknowledged.get(i)).toBe(eventId);

    // A gets all of them, each once (a timeline limit above the burst, so no sync response is cut short).
    const filter = encodeURIComponent(JSON.stringify({ room: { timeline: { limit: TOTAL * 2 } } }));
    const syncer: Syncer = async (since) =>
      (await api(a, 'GET', `/_matrix/client/v3/sync?timeout=10000&filter=${filter}${since ? `&since=${since}` : ''}`, { token: alice.accessToken })).body;
    const seen: string[] = [];
    await longPollUntil(syncer, (body) => {
      for (const event of body.rooms?.join?.[roomId]?.timeline?.events ?? []) if (event.type === 'm.room.message') seen.push(event.content.body);
      return new Set(seen).size === TOTAL;
    });
    expect(seen.filter((body) => body.startsWith('burst ')).sort()).toEqual(Array.from({ length: TOTAL }, (_, i) => `burst ${i}`).sort());
    const stored = await a.database.get<{ n: number }>(
      "SELECT COUNT(*) AS n FROM events WHERE room_id = ? AND type = 'm.room.message' AND rejected IS NULL AND outlier = 0", [roomId],
    );
    expect(stored?.n).toBe(TOTAL);
  });
});

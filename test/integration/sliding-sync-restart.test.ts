import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startNodeHost } from '../../src/node/node-host.ts';
import { api, register } from './harness.ts';

// A sliding sync connection lives in the database: it continues after the Node host restarts.

const directories: string[] = [];
afterEach(async () => {
  for (const dir of directories.splice(0)) await rm(dir, { recursive: true, force: true });
});

const enc = encodeURIComponent;
const SS = '/_matrix/client/unstable/org.matrix.simplified_msc3575/sync';
const body = { lists: { all: { ranges: [[0, 9]], required_state: [['m.room.name', '']], timeline_limit: 5 } }, extensions: { to_device: { enabled: true } } };

describe.each(['native', 'sqljs'] as const)('sliding sync across a restart on %s storage', (storage) => {
  it('continues a connection from its pos, sending only what changed', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hearth-slide-'));
    directories.push(dir);
    const first = await startNodeHost({ dataDir: dir, port: 0, rateLimits: false, storage });
    const alice = await register(first, 'alice');
    const roomId = (await api(first, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { name: 'kept' } })).body.room_id;
    const before = await api(first, 'POST', SS, { token: alice.accessToken, body, unchecked: true });
    expect(before.body.rooms[roomId]).toMatchObject({ initial: true, name: 'kept' });
    await first.close();

    const second = await startNodeHost({ dataDir: dir, port: 0, rateLimits: false, storage });
    try {
      await api(second, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/after`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'after restart' } });
      const after = await api(second, 'POST', `${SS}?pos=${before.body.pos}`, { token: alice.accessToken, body, unchecked: true });
      expect(after.status).toBe(200);
      const room = after.body.rooms[roomId];
      expect(room.initial).toBeUndefined();
      expect(room.name).toBeUndefined();
      expect(room.timeline.map((e: any) => e.content.body)).toEqual(['after restart']);
      expect(room.num_live).toBe(1);
      // An idle answer after that keeps the pos it was asked from.
      const idle = await api(second, 'POST', `${SS}?pos=${after.body.pos}&timeout=0`, { token: alice.accessToken, body, unchecked: true });
      expect(idle.body).toMatchObject({ pos: after.body.pos, rooms: {} });
    } finally {
      await second.close();
    }
  });
});

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import initSqlJs from 'sql.js';
import { afterEach, describe, expect, it } from 'vitest';
import { homeserverSchemas } from '../../src/homeserver.ts';
import { openNativeDatabase } from '../../src/node/native-database.ts';
import { openDurableDatabase } from '../../src/storage/durable-database.ts';
import type { PersistenceHooks, PersistenceStep } from '../../src/storage/persistence.ts';
import { indexedDbBackend, type BackendFixture } from '../unit/storage/backends.ts';
import { api, register, startTestServer } from './harness.ts';

// When storage fails (the quota is full), the API caller hears it and nothing
// of the request is kept.

/** Fails appends while `full` is set, as IndexedDB does when the quota is used up. */
class Quota implements PersistenceHooks {
  full = false;
  at(step: PersistenceStep): void {
    if (step === 'append:start' && this.full) throw Object.assign(new Error('the quota has been exceeded'), { name: 'QuotaExceededError' });
  }
}

let fixture: BackendFixture | undefined;
let directory: string | undefined;
afterEach(async () => {
  await fixture?.cleanup();
  if (directory) await rm(directory, { recursive: true, force: true });
});

describe('storage failure through the API', () => {
  it('answers M_RESOURCE_LIMIT_EXCEEDED when storage is full, keeps nothing, and recovers', async () => {
    fixture = await indexedDbBackend.create();
    const quota = new Quota();
    const database = await openDurableDatabase({ sqlJs: await initSqlJs(), persistence: await fixture.open(quota), schemas: homeserverSchemas });
    const http = await startTestServer({ database, seed: new Uint8Array(32).fill(4) });
    try {
      const alice = await register(http, 'alice');
      const roomId = (await api(http, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: {} })).body.room_id;
      const send = (txn: string) => api(http, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/${txn}`, {
        token: alice.accessToken, body: { msgtype: 'm.text', body: txn }, unchecked: true,
      });
      quota.full = true;
      const refused = await send('while-full');
      expect(refused.status).toBe(507);
      expect(refused.body.errcode).toBe('M_RESOURCE_LIMIT_EXCEEDED');
      quota.full = false;
      expect((await send('after')).status).toBe(200);
      const messages = await api(http, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=20`, { token: alice.accessToken });
      const bodies = messages.body.chunk.filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body);
      expect(bodies).toEqual(['after']);
    } finally {
      await http.close();
    }
  });

  it('on native SQLite, answers M_RESOURCE_LIMIT_EXCEEDED when the disk is full (SQLITE_FULL), keeps nothing, and recovers', async () => {
    directory = await mkdtemp(join(tmpdir(), 'hearth-full-'));
    const database = await openNativeDatabase({ file: join(directory, 'hearth.sqlite'), schemas: homeserverSchemas });
    const http = await startTestServer({ database, seed: new Uint8Array(32).fill(4) });
    try {
      const alice = await register(http, 'alice');
      const roomId = (await api(http, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: {} })).body.room_id;
      const send = (txn: string, body: string) => api(http, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/${txn}`, {
        token: alice.accessToken, body: { msgtype: 'm.text', body }, unchecked: true,
      });
      // The file may not grow: SQLite meets SQLITE_FULL as on a full disk.
      database.db.pragma(`max_page_count = ${database.db.pragma('page_count', { simple: true }) as number}`);
      const refused = await send('while-full', 'x'.repeat(30_000));
      expect(refused.status).toBe(507);
      expect(refused.body.errcode).toBe('M_RESOURCE_LIMIT_EXCEEDED');
      database.db.pragma('max_page_count = 4294967294');
      expect((await send('after', 'after')).status).toBe(200);
      const messages = await api(http, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=20`, { token: alice.accessToken });
      const bodies = messages.body.chunk.filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body);
      expect(bodies).toEqual(['after']);
    } finally {
      await http.close();
    }
  });
});

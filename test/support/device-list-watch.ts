/**
 * Device lists across servers as a client reads them, for the interop tests: an owner whose devices
 * change on one server, a watcher on another, and what the watcher's own server says of the owner
 * through `/keys/query` and `/sync`'s `device_lists`.
 */
import { expect } from 'vitest';
import { api, register, type Account } from '../integration/harness.ts';
import { deviceKeys } from './e2ee-keys.ts';
import { PASSWORD, type InteropServer } from './interop.ts';
import { longPollUntil, syncPath, type SyncBody } from './sync-until.ts';

export interface Person {
  server: InteropServer;
  account: Account;
  /** The /sync position after the last step a test waited for. */
  since?: string;
}

/** A client-API call as the person that must answer 200; its body. */
export async function call(who: Person, method: string, path: string, body?: unknown): Promise<any> {
  const r = await api(who.server, method, path, { token: who.account.accessToken, body, unchecked: true });
  expect(r.status, `${method} ${path} on ${who.server.name}: ${JSON.stringify(r.body)}`).toBe(200);
  return r.body;
}

/** Registers a person (with the shared password) and gives their first device keys. */
export async function keyedPerson(server: InteropServer, username: string): Promise<Person> {
  const who = { server, account: await register(server, username, PASSWORD) };
  await uploadKeys(who.account, who);
  return who;
}

async function uploadKeys(account: Account, on: Person): Promise<void> {
  const { signed } = await deviceKeys(account);
  await call({ server: on.server, account }, 'POST', '/_matrix/client/v3/keys/upload', { device_keys: signed });
}

/**
 * An owner on one server and a watcher on another, each with a keyed device, sharing a room the
 * owner made; the watcher has a /sync position, and their server lists the owner's first device.
 */
export async function ownerAndWatcher(ownerServer: InteropServer, watcherServer: InteropServer, tag: string): Promise<{ owner: Person; watcher: Person; roomId: string }> {
  const [owner, watcher] = await Promise.all([keyedPerson(ownerServer, `owner-${tag}`), keyedPerson(watcherServer, `watcher-${tag}`)]);
  const { room_id: roomId } = await call(owner, 'POST', '/_matrix/client/v3/createRoom', { preset: 'public_chat' });
  await call(watcher, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?server_name=${encodeURIComponent(owner.server.name)}`, {});
  // Sharing a room, the watcher's server tracks the owner's list; the first device is listed.
  await syncUntil(watcher, () => true, 'a first position');
  expect(await devicesOf(watcher, owner)).toEqual([owner.account.deviceId]);
  return { owner, watcher, roomId };
}

/** A new session of the owner, with device keys, named. */
export async function newDevice(owner: Person, name: string): Promise<Account> {
  const r = await api(owner.server, 'POST', '/_matrix/client/v3/login', {
    body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: owner.account.userId }, password: PASSWORD, initial_device_display_name: name },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const account = { userId: r.body.user_id, accessToken: r.body.access_token, deviceId: r.body.device_id };
  await uploadKeys(account, owner);
  return account;
}

/** What the watcher's server answers to /keys/query for the owner. */
export const query = (watcher: Person, owner: Person): Promise<any> => call(watcher, 'POST', '/_matrix/client/v3/keys/query', { device_keys: { [owner.account.userId]: [] } });
export const devicesOf = async (watcher: Person, owner: Person): Promise<string[]> => Object.keys((await query(watcher, owner)).device_keys?.[owner.account.userId] ?? {}).sort();

/** Long-polls a person's /sync from their last position until `done`, collecting every `device_lists` on the way. */
export async function syncUntil(watcher: Person, done: (body: SyncBody, seen: { changed: Set<string>; left: Set<string> }) => boolean, what: string) {
  const seen = { changed: new Set<string>(), left: new Set<string>() };
  const body = await longPollUntil(async (since) => {
    const r = await api(watcher.server, 'GET', syncPath(since, 10_000), { token: watcher.account.accessToken, unchecked: true });
    if (r.status !== 200) throw new Error(`/sync: ${r.status} ${JSON.stringify(r.body)}`);
    for (const u of r.body.device_lists?.changed ?? []) seen.changed.add(u);
    for (const u of r.body.device_lists?.left ?? []) seen.left.add(u);
    return r.body;
  }, (b) => done(b, seen), { since: watcher.since, who: `${watcher.account.userId}, for ${what}`, timeoutMs: 30_000 });
  watcher.since = body.next_batch;
  return seen;
}

export const untilChanged = (watcher: Person, owner: Person, what: string) => syncUntil(watcher, (_, seen) => seen.changed.has(owner.account.userId), what);

/**
 * Waits until the watcher's /keys/query for the owner satisfies `check`, asking again each time the
 * watcher's /sync says the owner's devices changed: a new device is one change as it is made and
 * another as its keys are uploaded, and only a device with keys is listed.
 */
export async function untilQuery(watcher: Person, owner: Person, check: (answer: any) => boolean, what: string): Promise<any> {
  for (;;) {
    await untilChanged(watcher, owner, what);
    const answer = await query(watcher, owner);
    if (check(answer)) return answer;
  }
}

/** A /keys/query answer that lists exactly these devices of the owner. */
export const listing = (owner: Person, devices: (string | undefined)[]) => (answer: any) =>
  JSON.stringify(Object.keys(answer.device_keys?.[owner.account.userId] ?? {}).sort()) === JSON.stringify(devices.filter((d) => d !== undefined).sort());

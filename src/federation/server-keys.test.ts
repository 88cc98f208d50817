import initSqlJs from 'sql.js';
import { describe, expect, it } from 'vitest';
import { validateFederationRequest, validateFederationResponse } from '../../test/support/spec-schema.ts';
import { decodeBase64, encodeBase64 } from '../crypto/base64.ts';
import { tweetnaclBackend } from '../crypto/ed25519.ts';
import { HEARTH_KEY_ID, serverNameFromPublicKey } from '../crypto/identity.ts';
import { webRandomBytes } from '../crypto/random.ts';
import { verifyJsonSignature } from '../crypto/signing.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { serverKeysSchema, SqlServerKeyStore } from './server-key-store.ts';
import { FRUITLESS_REFETCH_MS, MAX_KEY_VALIDITY_MS, ServerKeys, verifyKeyDocument, type KeyFetcher } from './server-keys.ts';
import { memorySigningKeyStorage, OWN_KEY_VALIDITY_MS, ServerSigningKeys } from './signing-keys.ts';

const ed25519 = tweetnaclBackend;
const DAY = 24 * 60 * 60 * 1000;

/** Servers on a pretend network: each a ServerKeys over its own store; `down` ones cannot be reached. */
async function network(names: string[], options: { trusted?: Record<string, string[]> } = {}) {
  let now = 1_700_000_000_000;
  const clock = () => now;
  const down = new Set<string>();
  const fetched: string[] = [];
  const servers = new Map<string, { keys: ServerKeys; signing: ServerSigningKeys; store: SqlServerKeyStore }>();
  const sqlJs = await initSqlJs();
  const fetcherFor = (asker: string): KeyFetcher => ({
    serverKeys: async (name) => {
      fetched.push(`${asker}→${name}`);
      const server = servers.get(name);
      if (!server || down.has(name)) throw new Error(`${name} is unreachable`);
      return JSON.parse(JSON.stringify(await server.keys.serverKeys()));
    },
    notaryQuery: async (notary, body) => {
      fetched.push(`${asker}→notary ${notary}`);
      const server = servers.get(notary);
      if (!server || down.has(notary)) throw new Error(`${notary} is unreachable`);
      validateFederationRequest('POST', '/_matrix/key/v2/query', body);
      return JSON.parse(JSON.stringify(await server.keys.notaryBatch(body)));
    },
  });
  const make = async (name: string, store?: SqlServerKeyStore) => {
    const signing = await ServerSigningKeys.open({ storage: memorySigningKeyStorage(), ed25519, random: webRandomBytes, now: clock });
    store ??= new SqlServerKeyStore(await openSqlJsDatabase({ sqlJs, schemas: [serverKeysSchema] }));
    const keys = new ServerKeys({ serverName: name, signingKeys: signing, ed25519, store, fetcher: fetcherFor(name), trustedNotaries: options.trusted?.[name], now: clock });
    servers.set(name, { keys, signing, store });
    return { keys, signing, store };
  };
  for (const name of names) await make(name);
  const get = (name: string) => servers.get(name)!;
  return { get, make, down, fetched, advance: (ms: number) => (now += ms), now: clock };
}

const publicKeyOf = (signing: ServerSigningKeys) => signing.signingKey.publicKey;

describe('our signing keys', () => {
  it('are made on first start under ed25519:a_XXXX, kept, and found again', async () => {
    const storage = memorySigningKeyStorage();
    const keys = await ServerSigningKeys.open({ storage, ed25519, random: webRandomBytes, now: () => 0 });
    expect(keys.keyId).toMatch(/^ed25519:a_[a-zA-Z0-9]{4}$/);
    expect(storage.state?.keyId).toBe(keys.keyId);
    const again = await ServerSigningKeys.open({ storage, ed25519, random: webRandomBytes, now: () => 0 });
    expect(again.keyId).toBe(keys.keyId);
    expect(again.signingKey.publicKey).toEqual(keys.signingKey.publicKey);
  });

  it('serve a self-signed document with valid_until_ts, the replaced keys under old_verify_keys after a rotation', async () => {
    const storage = memorySigningKeyStorage();
    const keys = await ServerSigningKeys.open({ storage, ed25519, random: webRandomBytes, now: () => 5_000 });
    const first = keys.keyId;
    const firstKey = encodeBase64(keys.signingKey.publicKey);
    await keys.rotate();
    expect(keys.keyId).not.toBe(first);
    const document = await keys.document('example.org');
    validateFederationResponse('GET', '/_matrix/key/v2/server', 200, document);
    expect(document).toMatchObject({
      server_name: 'example.org',
      valid_until_ts: 5_000 + OWN_KEY_VALIDITY_MS,
      verify_keys: { [keys.keyId]: { key: encodeBase64(keys.signingKey.publicKey) } },
      old_verify_keys: { [first]: { key: firstKey, expired_ts: 5_000 } },
    });
    expect(await verifyJsonSignature(document, 'example.org', keys.keyId, keys.signingKey.publicKey, ed25519)).toBe(true);
    // The rotation was stored: a restart keeps the new key and the old one.
    const reopened = await ServerSigningKeys.open({ storage, ed25519, random: webRandomBytes, now: () => 9_000 });
    expect([reopened.keyId, reopened.oldKeys.map((k) => k.keyId)]).toEqual([keys.keyId, [first]]);
  });
});

describe('key documents', () => {
  it('are accepted only for the server they name and with its own signature', async () => {
    const signing = await ServerSigningKeys.open({ storage: memorySigningKeyStorage(), ed25519, random: webRandomBytes, now: () => 0 });
    const document = await signing.document('remote.example');
    await expect(verifyKeyDocument(document, 'remote.example', ed25519, 0)).resolves.toHaveLength(1);
    await expect(verifyKeyDocument(document, 'other.example', ed25519, 0)).rejects.toThrow(/not other\.example/);
    await expect(verifyKeyDocument({ ...document, valid_until_ts: 1 }, 'remote.example', ed25519, 0)).rejects.toThrow(/does not verify/);
    await expect(verifyKeyDocument({ ...document, signatures: {} }, 'remote.example', ed25519, 0)).rejects.toThrow(/not signed/);
    // Signed with a key that is not one of its verify keys: not self-signed.
    const stranger = await ServerSigningKeys.open({ storage: memorySigningKeyStorage(), ed25519, random: webRandomBytes, now: () => 0 });
    const forged = await stranger.document('remote.example');
    await expect(verifyKeyDocument({ ...document, signatures: forged['signatures'] }, 'remote.example', ed25519, 0)).rejects.toThrow(/not signed/);
  });
});

describe("other servers' keys", () => {
  it('are fetched once, verified, and kept durably', async () => {
    const net = await network(['us.example', 'remote.example']);
    const remote = net.get('remote.example').signing;
    const us = net.get('us.example');
    expect(await us.keys.verifyKey('remote.example', remote.keyId)).toEqual(publicKeyOf(remote));
    expect(await us.keys.verifyKey('remote.example', remote.keyId)).toEqual(publicKeyOf(remote));
    expect(net.fetched).toEqual(['us.example→remote.example']);
    // A restart on the same store does not ask again.
    const restarted = await net.make('us.example', us.store);
    expect(await restarted.keys.verifyKey('remote.example', remote.keyId)).toEqual(publicKeyOf(remote));
    expect(net.fetched).toHaveLength(1);
  });

  it('a key the server does not sign for is not taken', async () => {
    const net = await network(['us.example', 'remote.example']);
    const remote = net.get('remote.example');
    const honest = remote.keys.serverKeys.bind(remote.keys);
    remote.keys.serverKeys = async () => ({ ...(await honest()), valid_until_ts: 1 });
    expect(await net.get('us.example').keys.verifyKey('remote.example', remote.signing.keyId)).toBeUndefined();
  });

  it('are fetched again for an unknown key ID, at most once per while when that does not find it', async () => {
    const net = await network(['us.example', 'remote.example']);
    const us = net.get('us.example').keys;
    const remote = net.get('remote.example').signing;
    const first = remote.keyId;
    await us.verifyKey('remote.example', first);
    await remote.rotate();
    expect(await us.verifyKey('remote.example', remote.keyId)).toEqual(publicKeyOf(remote));
    expect(net.fetched).toHaveLength(2);
    expect(await us.verifyKey('remote.example', 'ed25519:nope')).toBeUndefined();
    expect(await us.verifyKey('remote.example', 'ed25519:nope')).toBeUndefined();
    expect(net.fetched).toHaveLength(3);
    net.advance(FRUITLESS_REFETCH_MS + 1);
    await us.verifyKey('remote.example', 'ed25519:nope');
    expect(net.fetched).toHaveLength(4);
  });

  it('are fetched again once expired, and never trusted past seven days whatever valid_until_ts says', async () => {
    const net = await network(['us.example', 'remote.example']);
    const us = net.get('us.example').keys;
    const remote = net.get('remote.example');
    await us.verifyKey('remote.example', remote.signing.keyId);
    net.advance(OWN_KEY_VALIDITY_MS - 1);
    await us.verifyKey('remote.example', remote.signing.keyId);
    expect(net.fetched).toHaveLength(1);
    net.advance(2);
    expect(await us.verifyKey('remote.example', remote.signing.keyId)).toEqual(publicKeyOf(remote.signing));
    expect(net.fetched).toHaveLength(2);

    remote.keys.serverKeys = () => remote.signing.document('remote.example', 365 * DAY);
    net.advance(OWN_KEY_VALIDITY_MS + 1);
    await us.verifyKey('remote.example', remote.signing.keyId);
    net.advance(MAX_KEY_VALIDITY_MS - 1);
    await us.verifyKey('remote.example', remote.signing.keyId);
    expect(net.fetched).toHaveLength(3);
    net.advance(2);
    await us.verifyKey('remote.example', remote.signing.keyId);
    expect(net.fetched).toHaveLength(4);
  });

  it('old keys verify what was signed before they expired, never a request', async () => {
    const net = await network(['us.example', 'remote.example']);
    const us = net.get('us.example').keys;
    const remote = net.get('remote.example').signing;
    const old = remote.keyId;
    const oldKey = publicKeyOf(remote);
    const before = net.now();
    net.advance(1000);
    await remote.rotate();
    net.advance(1000);
    await us.verifyKey('remote.example', remote.keyId);
    expect(await us.verifyKey('remote.example', old, before)).toEqual(oldKey);
    expect(await us.verifyKey('remote.example', old, net.now())).toBeUndefined();
    expect(await us.verifyKey('remote.example', old)).toBeUndefined();
    // Our own old keys likewise.
    const ours = net.get('us.example').signing;
    const ourOld = ours.keyId;
    const rotatedAt = net.now();
    await ours.rotate();
    expect(await us.verifyKey('us.example', ourOld, rotatedAt - 1)).toEqual(decodeBase64(ours.oldKeys[0]!.key));
    expect(await us.verifyKey('us.example', ourOld)).toBeUndefined();
    expect(await us.verifyKey('us.example', ours.keyId)).toEqual(publicKeyOf(ours));
  });

  it('a hex name still has its key from its name, with no fetch', async () => {
    const net = await network(['us.example']);
    const hex = await ServerSigningKeys.open({ storage: memorySigningKeyStorage(), ed25519, random: webRandomBytes, now: () => 0 });
    const name = serverNameFromPublicKey(hex.signingKey.publicKey);
    expect(await net.get('us.example').keys.verifyKey(name, HEARTH_KEY_ID)).toEqual(hex.signingKey.publicKey);
    expect(await net.get('us.example').keys.verifyKey(name, 'ed25519:other')).toBeUndefined();
    expect(net.fetched).toEqual([]);
  });
});

describe('notaries', () => {
  it('serve a server\'s keys countersigned, by GET and by POST, as the spec\'s schema says', async () => {
    const net = await network(['notary.example', 'remote.example']);
    const notary = net.get('notary.example');
    const remote = net.get('remote.example').signing;
    const single = await notary.keys.notaryQuery('remote.example');
    validateFederationResponse('GET', '/_matrix/key/v2/query/remote.example', 200, single);
    expect(single.server_keys).toHaveLength(1);
    const document = single.server_keys[0]!;
    expect(await verifyJsonSignature(document, 'remote.example', remote.keyId, publicKeyOf(remote), ed25519)).toBe(true);
    expect(await verifyJsonSignature(document, 'notary.example', notary.signing.keyId, publicKeyOf(notary.signing), ed25519)).toBe(true);

    const body = { server_keys: { 'remote.example': { [remote.keyId]: { minimum_valid_until_ts: net.now() } }, 'notary.example': {} } };
    validateFederationRequest('POST', '/_matrix/key/v2/query', body);
    const batch = await notary.keys.notaryBatch(body);
    validateFederationResponse('POST', '/_matrix/key/v2/query', 200, batch);
    expect(batch.server_keys.map((d) => d['server_name'])).toEqual(['remote.example', 'notary.example']);
    // Served from what it keeps: one fetch of remote's keys for both answers.
    expect(net.fetched).toEqual(['notary.example→remote.example']);
    await expect(notary.keys.notaryBatch({ server_keys: [] })).rejects.toMatchObject({ status: 400, errcode: 'M_BAD_JSON' });
  });

  it('serve what they kept when the server is down, and nothing for a server they never reached', async () => {
    const net = await network(['notary.example', 'remote.example']);
    const notary = net.get('notary.example').keys;
    await notary.notaryQuery('remote.example');
    net.down.add('remote.example');
    net.advance(2 * OWN_KEY_VALIDITY_MS);
    const stale = await notary.notaryQuery('remote.example');
    expect(stale.server_keys.map((d) => d['server_name'])).toEqual(['remote.example']);
    expect((await notary.notaryQuery('never.example')).server_keys).toEqual([]);
  });

  it('are asked, in order, when a server cannot be reached; what they give must carry both signatures', async () => {
    const net = await network(['us.example', 'remote.example', 'liar.example', 'notary.example'], { trusted: { 'us.example': ['gone.example', 'liar.example', 'notary.example'] } });
    const remote = net.get('remote.example').signing;
    // The liar hands out a key of someone else's making for remote.example, self-signed but not countersigned.
    const liar = net.get('liar.example');
    const fake = await ServerSigningKeys.open({ storage: memorySigningKeyStorage(), ed25519, random: webRandomBytes, now: net.now });
    liar.keys.notaryBatch = async () => ({ server_keys: [await fake.document('remote.example')] });
    // The honest notary reached remote.example earlier.
    await net.get('notary.example').keys.notaryQuery('remote.example');
    net.down.add('remote.example');
    net.fetched.length = 0;
    const us = net.get('us.example').keys;
    expect(await us.verifyKey('remote.example', fake.keyId)).toBeUndefined();
    net.advance(FRUITLESS_REFETCH_MS + 1);
    expect(await us.verifyKey('remote.example', remote.keyId)).toEqual(publicKeyOf(remote));
    expect(net.fetched).toContain('us.example→notary gone.example');
    expect(net.fetched).toContain('us.example→notary liar.example');
    expect((await net.get('us.example').store.keysOf('remote.example')).map((k) => k.keyId)).toEqual([remote.keyId]);
    expect(net.fetched).toContain('us.example→notary notary.example');
    // The notary's own key came from the notary itself.
    expect(net.fetched).toContain('us.example→notary.example');
  });
});

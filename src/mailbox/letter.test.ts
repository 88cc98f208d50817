import { describe, expect, it } from 'vitest';
import { defaultEd25519Backend } from '../crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName, serverNameFromPublicKey } from '../crypto/identity.ts';
import { authorizationHeader } from '../federation/x-matrix.ts';
import { LetterRejected, openLetter, sealLetter } from './letter.ts';

const ed25519 = await defaultEd25519Backend();
const server = async () => {
  const key = await ed25519.keyFromSeed(crypto.getRandomValues(new Uint8Array(32)));
  return { key, name: serverNameFromPublicKey(key.publicKey) };
};
const verifyKey = async (name: string, keyId: string) => (keyId === HEARTH_KEY_ID ? publicKeyFromServerName(name) : undefined);
const alice = await server();
const bob = await server();
const body = { origin: alice.name, origin_server_ts: 1, pdus: [], edus: [{ edu_type: 'm.test', content: { n: 1 } }] };

describe('sealed letters', () => {
  it('open for their destination as the signed /send they are', async () => {
    const letter = await sealLetter(alice.name, bob.name, 'a/b 1', body, HEARTH_KEY_ID, alice.key);
    expect(letter.uri).toBe('/_matrix/federation/v1/send/a%2Fb%201');
    const opened = await openLetter(JSON.parse(JSON.stringify(letter)), bob.name, verifyKey, ed25519);
    expect(opened).toEqual({ origin: alice.name, txnId: 'a/b 1', pdus: [], edus: body.edus });
  });

  it('are refused when altered, misaddressed, not a /send, or from the destination itself', async () => {
    const letter = await sealLetter(alice.name, bob.name, 't1', body, HEARTH_KEY_ID, alice.key);
    const reject = (value: unknown, destination = bob.name) => expect(openLetter(value, destination, verifyKey, ed25519)).rejects.toBeInstanceOf(LetterRejected);
    await reject({ ...letter, content: { ...body, edus: [{ edu_type: 'm.test', content: { n: 2 } }] } });
    await reject({ ...letter, uri: '/_matrix/federation/v1/send/t2' });
    await reject(letter, alice.name);
    await reject({ ...letter, extra: 1 });
    const uri = '/_matrix/federation/v2/invite/!r/$e';
    await reject({ ...letter, uri, authorization: await authorizationHeader('PUT', uri, alice.name, bob.name, body, HEARTH_KEY_ID, alice.key) });
    const fromBob = await sealLetter(bob.name, bob.name, 't1', { ...body, origin: bob.name }, HEARTH_KEY_ID, bob.key);
    await reject(fromBob);
    // Signed by alice, but the transaction inside claims another origin.
    const forged = await sealLetter(alice.name, bob.name, 't1', { ...body, origin: bob.name }, HEARTH_KEY_ID, alice.key);
    await reject(forged);
  });
});

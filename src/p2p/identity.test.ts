import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey, peerIdFromString } from '@libp2p/peer-id';
import { describe, expect, it } from 'vitest';
import { tweetnaclBackend } from '../crypto/ed25519.ts';
import { serverNameFromPublicKey } from '../crypto/identity.ts';
import { peerIdFromServerName, privateKeyFromSeed, serverNameFromPeerId } from './identity.ts';

const seed = Uint8Array.from({ length: 32 }, (_, i) => i * 7 + 1);

describe('p2p identity', () => {
  it('gives the libp2p peer ID and the Matrix server name from the same seed', async () => {
    const peerId = peerIdFromPrivateKey(await privateKeyFromSeed(seed));
    const serverName = serverNameFromPublicKey((await tweetnaclBackend.keyFromSeed(seed)).publicKey);
    expect(serverNameFromPeerId(peerId)).toBe(serverName);
    expect(peerIdFromServerName(serverName)?.equals(peerId)).toBe(true);
  });

  it('maps a server name to a peer ID and back, with no look-up', async () => {
    const peerId = peerIdFromPrivateKey(await generateKeyPair('Ed25519'));
    const serverName = serverNameFromPeerId(peerId)!;
    expect(serverName).toMatch(/^[0-9a-f]{64}$/);
    const back = peerIdFromServerName(serverName)!;
    expect(back.toString()).toBe(peerId.toString());
    // A peer ID parsed from its text form (as in a multiaddr) carries the key too.
    expect(serverNameFromPeerId(peerIdFromString(peerId.toString()))).toBe(serverName);
  });

  it('refuses what is not a Hearth identity', async () => {
    expect(peerIdFromServerName('matrix.org')).toBeUndefined();
    expect(peerIdFromServerName('AB'.repeat(32))).toBeUndefined();
    const secp = peerIdFromPrivateKey(await generateKeyPair('secp256k1'));
    expect(serverNameFromPeerId(secp)).toBeUndefined();
  });
});

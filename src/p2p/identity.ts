/**
 * One ed25519 seed, one identity: the Matrix signing key and the libp2p peer ID
 * are the same key, so a server name (the hex public key) and a peer ID (the
 * same key, multihash-encoded) convert into each other with no look-up.
 */
import { generateKeyPairFromSeed, publicKeyFromRaw } from '@libp2p/crypto/keys';
import type { Ed25519PrivateKey, PeerId } from '@libp2p/interface';
import { peerIdFromPublicKey } from '@libp2p/peer-id';
import { publicKeyFromServerName, serverNameFromPublicKey } from '../crypto/identity.ts';

/** The libp2p private key for the server's 32-byte identity seed. */
export function privateKeyFromSeed(seed: Uint8Array): Promise<Ed25519PrivateKey> {
  return generateKeyPairFromSeed('Ed25519', seed);
}

/** The peer ID a Hearth server name stands for, or undefined for other server names. */
export function peerIdFromServerName(serverName: string): PeerId | undefined {
  const publicKey = publicKeyFromServerName(serverName);
  return publicKey && peerIdFromPublicKey(publicKeyFromRaw(publicKey));
}

/** The Hearth server name of a peer, or undefined for peers whose key is not Ed25519. */
export function serverNameFromPeerId(peerId: PeerId): string | undefined {
  return peerId.type === 'Ed25519' ? serverNameFromPublicKey(peerId.publicKey.raw) : undefined;
}

import { defaultEd25519Backend } from './ed25519.ts';

/**
 * Hearth identity: the server name is the lower-case hex of the server's
 * ed25519 public key, so any server name yields its verify key with no look-up
 * (the idea Dendrite's P2P demos used). The key ID is fixed.
 */
export const HEARTH_KEY_ID = 'ed25519:hearth';

/** The server name a Hearth identity seed stands for. */
export async function serverNameFromSeed(seed: Uint8Array): Promise<string> {
  return serverNameFromPublicKey((await (await defaultEd25519Backend()).keyFromSeed(seed)).publicKey);
}

export function serverNameFromPublicKey(publicKey: Uint8Array): string {
  return Array.from(publicKey, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The verify key a Hearth server name stands for, or undefined for other server names. */
export function publicKeyFromServerName(serverName: string): Uint8Array | undefined {
  if (!/^[0-9a-f]{64}$/.test(serverName)) return undefined;
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(serverName.slice(i * 2, i * 2 + 2), 16);
  return out;
}

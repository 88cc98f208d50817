/**
 * Where a host with a DNS name keeps its signing keys: one JSON file in the data folder,
 * readable only by us, replaced atomically (written beside, synced, renamed, folder synced).
 */
import { readFile } from 'node:fs/promises';
import type { SigningKeyState, SigningKeyStorage } from '../federation/signing-keys.ts';
import { writeFileDurably } from './file-persistence.ts';

export function signingKeyFile(path: string): SigningKeyStorage {
  return {
    async load() {
      let text: string;
      try {
        text = await readFile(path, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw error;
      }
      const state = JSON.parse(text) as SigningKeyState;
      if (typeof state?.keyId !== 'string' || typeof state.seed !== 'string' || !Array.isArray(state.old)) throw new Error(`${path} does not hold signing keys`);
      return state;
    },
    save: (state) => writeFileDurably(path, JSON.stringify(state, null, 2)),
  };
}

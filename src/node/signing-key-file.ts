/**
 * Where a host with a DNS name keeps its signing keys: one JSON file in the data folder,
 * readable only by us, replaced atomically (written beside, synced, renamed, folder synced).
 */
import { open, readFile, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { SigningKeyState, SigningKeyStorage } from '../federation/signing-keys.ts';
import { fsyncDirectory } from './file-persistence.ts';

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
    async save(state) {
      const temporary = `${path}.tmp`;
      const file = await open(temporary, 'w', 0o600);
      try {
        await file.writeFile(JSON.stringify(state, null, 2));
        await file.sync();
      } finally {
        await file.close();
      }
      await rename(temporary, path);
      await fsyncDirectory(dirname(path));
    },
  };
}

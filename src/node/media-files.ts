import { mkdir, readdir, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { MediaStore } from '../media/store.ts';
import { fsyncDirectory, writeFileDurably } from './file-persistence.ts';

/**
 * Media bytes in files under the data folder: `<dir>/<first two of key>/<key>`.
 * A put writes `<key>.tmp`, fsyncs it, renames it into place and fsyncs the
 * folder, so it resolves only once a crash would keep the whole file; a crash
 * earlier leaves at most a `.tmp` that nothing names.
 */
export class FileMediaStore implements MediaStore {
  private readonly made = new Set<string>();

  constructor(private readonly directory: string) {}

  private path(key: string): { folder: string; file: string } {
    if (!/^[a-z0-9]{3,}$/.test(key)) throw new Error(`bad media key ${JSON.stringify(key)}`);
    const folder = join(this.directory, key.slice(0, 2));
    return { folder, file: join(folder, key) };
  }

  async put(key: string, bytes: Uint8Array): Promise<void> {
    const { folder, file } = this.path(key);
    if (!this.made.has(folder)) {
      const created = await mkdir(folder, { recursive: true });
      // A new folder must itself be durable in its parent (and that in the data folder).
      if (created !== undefined) {
        await fsyncDirectory(this.directory);
        await fsyncDirectory(join(this.directory, '..'));
      }
      this.made.add(folder);
    }
    await writeFileDurably(file, bytes);
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      const data = await readFile(this.path(key).file);
      return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async keys(): Promise<string[]> {
    let folders: string[];
    try {
      folders = await readdir(this.directory);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const keys: string[] = [];
    for (const folder of folders) {
      if (!/^[a-z0-9]{2}$/.test(folder)) continue;
      for (const name of await readdir(join(this.directory, folder))) {
        // A .tmp is a put that a crash cut short: it was never acknowledged.
        if (name.endsWith('.tmp')) await unlink(join(this.directory, folder, name)).catch(() => undefined);
        else if (/^[a-z0-9]{3,}$/.test(name)) keys.push(name);
      }
    }
    return keys;
  }

  async delete(key: string): Promise<void> {
    try {
      await unlink(this.path(key).file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

import { ArchiveError } from './format.ts';

const SQLITE_MAGIC = new TextEncoder().encode('SQLite format 3\x00');

/**
 * The database entry is a plain SQLite file that either engine opens: sql.js in a browser
 * (in memory, no WAL possible) or native SQLite under Node (which switches it to WAL at open).
 * A copy of a WAL database says so in its header (bytes 18 and 19, the read and write versions,
 * are 2); setting them to 1 makes it an ordinary rollback-journal file, which is sound once the
 * WAL's content is in the copy, as it is in a backup or an export.
 */
export function portableSqliteHeader(firstPage: Uint8Array): void {
  if (firstPage.byteLength < 100 || !SQLITE_MAGIC.every((byte, i) => firstPage[i] === byte)) {
    throw new ArchiveError('bad_entry', 'The archive\u2019s database is not an SQLite file.');
  }
  if (firstPage[18] === 2) firstPage[18] = 1;
  if (firstPage[19] === 2) firstPage[19] = 1;
}

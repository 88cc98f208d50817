/**
 * Okapi BM25 over FTS4's matchinfo(…, 'pcnalx').
 *
 * Written by hand because sql.js ships SQLite with FTS3/FTS4 only: FTS5, whose bm25() and
 * `rank` column would do this inside SQLite, is not compiled in, and FTS4 itself has no
 * ranking function (the SQLite docs leave rank() to the application, as an example C
 * function over matchinfo). Registering that as a SQL function would need sql.js's
 * create_function, which our Database interface does not expose (and it would run the same
 * arithmetic in JS, per row, anyway). So queries return matchinfo's blob and we score here.
 *
 * The blob is 32-bit unsigned integers in the machine's (WebAssembly's: little-endian) order:
 *   p = phrases in the query, c = columns,
 *   n = rows in the table, a[c] = mean tokens per column, l[c] = tokens in this row's column,
 *   x[p][c] = (hits in this row, hits in all rows, rows with at least one hit).
 */

const K1 = 1.2;
const B = 0.75;

/** Column weights in the index's order (body, name, topic): a room's name or topic naming the words counts for more. */
export const COLUMN_WEIGHTS = [1, 2, 1.5] as const;

export function bm25(matchinfo: Uint8Array, weights: readonly number[] = COLUMN_WEIGHTS): number {
  const view = new DataView(matchinfo.buffer, matchinfo.byteOffset, matchinfo.byteLength);
  const at = (i: number) => view.getUint32(i * 4, true);
  const phrases = at(0);
  const columns = at(1);
  const rows = at(2);
  const avgAt = 3;
  const lenAt = 3 + columns;
  const hitsAt = 3 + 2 * columns;
  let score = 0;
  for (let p = 0; p < phrases; p++) {
    for (let c = 0; c < columns; c++) {
      const weight = weights[c] ?? 1;
      const x = hitsAt + 3 * (p * columns + c);
      const tf = at(x);
      if (tf === 0 || weight === 0) continue;
      const docsWithHit = at(x + 2);
      // Floored so a word in most rows still counts a little (plain BM25's idf goes negative there).
      const idf = Math.max(0.01, Math.log((rows - docsWithHit + 0.5) / (docsWithHit + 0.5)));
      const avg = at(avgAt + c) || 1;
      const len = at(lenAt + c);
      score += weight * idf * ((tf * (K1 + 1)) / (tf + K1 * (1 - B + (B * len) / avg)));
    }
  }
  return score;
}

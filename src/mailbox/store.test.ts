import initSqlJs from 'sql.js';
import { beforeEach, describe, expect, it } from 'vitest';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import type { Database } from '../storage/database.ts';
import { mailboxSchema } from './schema.ts';
import { MailboxFull, MailboxStore } from './store.ts';

let db: Database;
let clock = 1_000;
beforeEach(async () => {
  db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [mailboxSchema] });
  clock = 1_000;
});
const now = () => clock;
const letter = (n: number, size = 10) => JSON.stringify({ n, pad: 'x'.repeat(size) });
const bytes = (text: string) => new TextEncoder().encode(text).length;

describe('the mailbox store', () => {
  it('keeps letters per destination in arrival order; a repeat of one it holds is not stored twice', async () => {
    const store = new MailboxStore(db, now);
    await store.deposit('bob', 'alice', 't1', letter(1));
    await store.deposit('carol', 'alice', 't1', letter(2));
    await store.deposit('bob', 'dave', 't1', letter(3));
    expect((await store.deposit('bob', 'alice', 't1', letter(1))).duplicate).toBe(true);
    const batch = await store.collect('bob', 0);
    expect(batch.letters.map((l) => [l.origin, l.txnId, JSON.parse(l.letter).n])).toEqual([['alice', 't1', 1], ['dave', 't1', 3]]);
    expect(batch.more).toBe(false);
    expect((await store.collect('carol', 0)).letters).toHaveLength(1);
  });

  it('deletes a batch only when the next collect acknowledges its position, and only the collector\'s own letters', async () => {
    const store = new MailboxStore(db, now);
    for (let i = 0; i < 5; i++) await store.deposit('bob', 'alice', `t${i}`, letter(i));
    await store.deposit('carol', 'alice', 'c', letter(99));
    const first = await store.collect('bob', 0, 3);
    expect(first.letters.map((l) => l.txnId)).toEqual(['t0', 't1', 't2']);
    expect(first.more).toBe(true);
    // Read without acknowledging (the collector died): the same batch again.
    expect((await store.collect('bob', 0, 3)).letters.map((l) => l.txnId)).toEqual(['t0', 't1', 't2']);
    expect((await store.usage('bob')).letters).toBe(5);
    // A letter that arrives meanwhile comes after the others and is not acknowledged by an older position.
    await store.deposit('bob', 'dave', 'late', letter(5));
    const second = await store.collect('bob', first.position, 3);
    expect(second.letters.map((l) => l.txnId)).toEqual(['t3', 't4', 'late']);
    expect((await store.usage('bob')).letters).toBe(3);
    const last = await store.collect('bob', second.position, 3);
    expect(last).toEqual({ letters: [], position: second.position, more: false });
    expect(await store.usage('bob')).toEqual({ letters: 0, bytes: 0 });
    // Bob's acknowledgements never touch Carol's mail, even with a position past hers.
    expect((await store.usage('carol')).letters).toBe(1);
  });

  it('refuses letters over the per-destination count and byte bounds and the total bound, storing nothing of them', async () => {
    const store = new MailboxStore(db, now, { maxLettersPerDestination: 2, maxBytesPerDestination: 1_000, maxTotalBytes: 1_500 });
    await store.deposit('bob', 'alice', 't1', letter(1));
    await store.deposit('bob', 'alice', 't2', letter(2));
    await expect(store.deposit('bob', 'alice', 't3', letter(3))).rejects.toMatchObject({ name: 'MailboxFull', scope: 'destination' });
    // A repeat of a held letter is still fine at the bound (the sender retries after a lost answer).
    expect((await store.deposit('bob', 'alice', 't2', letter(2))).duplicate).toBe(true);
    // Bytes: carol may hold up to 1,000.
    await store.deposit('carol', 'alice', 'big', letter(1, 900));
    await expect(store.deposit('carol', 'alice', 'more', letter(2, 200))).rejects.toBeInstanceOf(MailboxFull);
    // Total: 1,500 across destinations.
    await expect(store.deposit('dave', 'alice', 'big', letter(1, 600))).rejects.toMatchObject({ scope: 'total' });
    expect((await store.usage()).letters).toBe(3);
    // Collecting frees room.
    const batch = await store.collect('bob', 0);
    await store.collect('bob', batch.position);
    await store.deposit('bob', 'alice', 't3', letter(3));
    await store.deposit('dave', 'alice', 'big', letter(1, 300));
  });

  it('refuses a letter larger than a letter may be, and bounds a batch by bytes (always at least one letter)', async () => {
    const store = new MailboxStore(db, now, { maxLetterBytes: 200 });
    await expect(store.deposit('bob', 'alice', 'huge', letter(0, 300))).rejects.toMatchObject({ scope: 'letter' });
    const text = letter(1, 120);
    expect(bytes(text)).toBeLessThan(200);
    for (let i = 0; i < 3; i++) await store.deposit('bob', 'alice', `t${i}`, letter(i, 120));
    const first = await store.collect('bob', 0);
    expect(first.letters).toHaveLength(1);
    expect(first.more).toBe(true);
  });

  it('counts bytes as UTF-8 and drops letters uncollected for too long', async () => {
    const store = new MailboxStore(db, now, { maxAgeMs: 1_000 });
    const text = JSON.stringify({ body: 'héllo ✉' });
    await store.deposit('bob', 'alice', 'old', text);
    expect((await store.usage('bob')).bytes).toBe(bytes(text));
    clock += 2_000;
    await store.deposit('bob', 'alice', 'new', letter(1));
    expect((await store.collect('bob', 0)).letters.map((l) => l.txnId)).toEqual(['new']);
  });
});

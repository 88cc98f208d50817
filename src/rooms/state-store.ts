import { splitStateKey, stateKey, type StateKey } from '../events/event.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { LruCache } from './lru.ts';

/** Room state by event numeric ID: (type, state_key) → event_nid. */
export type NidState = ReadonlyMap<StateKey, number>;

/** event_nid 0 in a block marks a key removed from the state. */
const REMOVED = 0;
/** Hard cap on blocks per snapshot; merging normally keeps far fewer (about log2 of the state size). */
const MAX_BLOCKS = 24;

type Reader = Pick<WriteTransaction, 'all' | 'get'>;

/** State entries held by the snapshot cache in all: five states of a room the size of Matrix HQ, thousands of small rooms'. */
const SNAPSHOT_ENTRIES_CACHED = 100_000;

/**
 * State snapshots made of shared, immutable blocks (an LSM-like scheme): a new
 * snapshot is its parent's block list plus one block holding the changes; the
 * newest blocks are merged while the one before is no more than twice as big, so a
 * snapshot has O(log n) blocks and each entry is copied O(log n) times overall.
 */
export class StateStore {
  /**
   * Bounded by count and by entries: a snapshot is a whole state, and a big room's (20,000
   * entries, ~1 MiB) is made for each event; 512 of them would hold half a gigabyte.
   */
  private readonly snapshots = new LruCache<number, NidState>(512, { maxWeight: SNAPSHOT_ENTRIES_CACHED, weigh: (state) => state.size });
  /** Snapshots of writes that ran in memory and are not durable yet (see RoomStore.runRoomWrite). */
  private readonly pending = new Map<number, NidState>();
  /**
   * The committed snapshot each state in hand was loaded or made as: an event whose state
   * before is one of them (a message after a message) takes that snapshot, not a copy of
   * it (20,000 entries in a big room).
   */
  private readonly committedAs = new WeakMap<NidState, number>();

  constructor(private readonly db: Database) {}

  async load(snapshotNid: number): Promise<NidState> {
    const cached = this.snapshots.get(snapshotNid) ?? this.pending.get(snapshotNid);
    if (cached) return cached;
    const row = await this.db.get<{ blocks: string }>('SELECT blocks FROM state_snapshots WHERE snapshot_nid = ?', [snapshotNid]);
    if (!row) throw new Error(`state snapshot ${snapshotNid} is missing`);
    const state = new Map<StateKey, number>();
    for (const block of parseBlocks(row.blocks)) {
      const entries = await this.db.all<{ type: string; state_key: string; event_nid: number }>(
        'SELECT type, state_key, event_nid FROM state_block_entries WHERE block_nid = ?', [block],
      );
      applyEntries(state, entries);
    }
    this.snapshots.set(snapshotNid, state);
    this.committedAs.set(state, snapshotNid);
    return state;
  }

  /** The committed snapshot this very state object is, if it is one (never a copy's). */
  snapshotOf(state: NidState): { nid: number; state: NidState } | undefined {
    const nid = this.committedAs.get(state);
    return nid === undefined ? undefined : { nid, state };
  }

  /**
   * Records the state `parent + changes` (a change to event_nid 0 removes a key)
   * and returns its snapshot ID with the full state. Call remember() once the
   * transaction has committed: a rolled-back snapshot ID may be reused.
   */
  create(
    tx: WriteTransaction,
    roomId: string,
    parent: { nid: number; state: NidState } | undefined,
    changes: NidState,
  ): { nid: number; state: NidState } {
    if (parent && changes.size === 0) return parent;
    const blocks: { nid: number; size: number }[] = parent ? this.blocksOf(tx, parent.nid) : [];
    blocks.push(this.writeBlock(tx, changes));
    while (blocks.length >= 2 && (blocks.length > MAX_BLOCKS || blocks.at(-2)!.size <= 2 * blocks.at(-1)!.size)) {
      const newer = blocks.pop()!;
      const older = blocks.pop()!;
      const merged = new Map<StateKey, number>();
      for (const e of [...readBlock(tx, older.nid), ...readBlock(tx, newer.nid)]) merged.set(stateKey(e.type, e.state_key), e.event_nid);
      // Removal markers can be dropped once nothing older remains beneath them.
      if (blocks.length === 0) for (const [k, v] of merged) if (v === REMOVED) merged.delete(k);
      blocks.push(this.writeBlock(tx, merged));
    }
    const nid = tx.run('INSERT INTO state_snapshots (room_id, blocks) VALUES (?, ?)', [roomId, blocks.map((b) => b.nid).join(',')]).lastInsertRowid;
    const state = new Map(parent?.state ?? []);
    for (const [k, v] of changes) {
      if (v === REMOVED) state.delete(k);
      else state.set(k, v);
    }
    return { nid, state };
  }

  /** Caches a committed snapshot's state. */
  remember(snapshot: { nid: number; state: NidState }): void {
    this.pending.delete(snapshot.nid);
    this.snapshots.set(snapshot.nid, snapshot.state);
    this.committedAs.set(snapshot.state, snapshot.nid);
  }

  /** Makes a snapshot of a write not yet durable readable by the writes after it. */
  holdPending(snapshot: { nid: number; state: NidState }): void {
    this.pending.set(snapshot.nid, snapshot.state);
  }

  /** Forgets a pending snapshot whose write failed: its ID may be used again. */
  dropPending(snapshotNid: number): void {
    this.pending.delete(snapshotNid);
  }

  private blocksOf(tx: Reader, snapshotNid: number): { nid: number; size: number }[] {
    const row = tx.get<{ blocks: string }>('SELECT blocks FROM state_snapshots WHERE snapshot_nid = ?', [snapshotNid]);
    if (!row) throw new Error(`state snapshot ${snapshotNid} is missing`);
    return parseBlocks(row.blocks).map((nid) => ({ nid, size: tx.get<{ size: number }>('SELECT size FROM state_blocks WHERE block_nid = ?', [nid])!.size }));
  }

  private writeBlock(tx: WriteTransaction, entries: NidState): { nid: number; size: number } {
    const nid = tx.run('INSERT INTO state_blocks (size) VALUES (?)', [entries.size]).lastInsertRowid;
    for (const [key, eventNid] of entries) {
      const [type, sk] = splitStateKey(key);
      tx.run('INSERT INTO state_block_entries (block_nid, type, state_key, event_nid) VALUES (?, ?, ?, ?)', [nid, type, sk, eventNid]);
    }
    return { nid, size: entries.size };
  }
}

function parseBlocks(text: string): number[] {
  return text === '' ? [] : text.split(',').map(Number);
}

function readBlock(tx: Reader, blockNid: number) {
  return tx.all<{ type: string; state_key: string; event_nid: number }>(
    'SELECT type, state_key, event_nid FROM state_block_entries WHERE block_nid = ?', [blockNid],
  );
}

function applyEntries(state: Map<StateKey, number>, entries: { type: string; state_key: string; event_nid: number }[]): void {
  for (const e of entries) {
    const key = stateKey(e.type, e.state_key);
    if (e.event_nid === REMOVED) state.delete(key);
    else state.set(key, e.event_nid);
  }
}

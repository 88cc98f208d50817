import type { Keys } from '../keys/keys.ts';
import { receiptContent } from '../sync/receipts.ts';
import type { Sync } from '../sync/sync.ts';
import type { Users } from '../users/users.ts';
import type { ConnectionState } from './store.ts';
import type { ExtensionsRequest, ScopedExtension } from './types.ts';

/** The rooms of an answer that scoped extensions look at: those in each list's ranges, and the subscriptions. */
export interface AnswerRooms {
  byList: Map<string, string[]>;
  subscribed: string[];
  /** Rooms new to the connection in this answer. */
  initial: Set<string>;
  /** Event IDs in each room's timeline in this answer. */
  timelineEvents: Map<string, Set<string>>;
  /** Rooms with receipts since the position (none on a new connection). */
  receiptNews: Set<string> | undefined;
}

const scopeOf = (ext: ScopedExtension, rooms: AnswerRooms): Set<string> => {
  const lists = ext.lists ?? ['*'];
  const subs = ext.rooms ?? ['*'];
  const out = new Set<string>();
  for (const [name, ids] of rooms.byList) if (lists.includes('*') || lists.includes(name)) for (const id of ids) out.add(id);
  for (const id of rooms.subscribed) if (subs.includes('*') || subs.includes(id)) out.add(id);
  return out;
};

const on = (ext: { enabled?: boolean } | undefined): boolean => ext?.enabled === true;

/**
 * The extensions of an answer: to-device messages, E2EE counts and device lists (the keys
 * component's reads, as /sync makes them), account data, receipts and typing for the rooms in scope.
 * Presence is not served.
 */
export async function extensionsOf(
  deps: { keys: Keys; users: Users; sync: Sync },
  request: { userId: string; deviceId: string },
  ext: ExtensionsRequest,
  from: ConnectionState,
  upTo: { stream: number; ephemeral: number },
  rooms: AnswerRooms,
): Promise<{ extensions: Record<string, Record<string, unknown>>; news: boolean }> {
  const { userId, deviceId } = request;
  const out: Record<string, Record<string, unknown>> = {};
  let news = false;
  const incremental = from.pos !== undefined;

  if (on(ext.to_device)) {
    const since = ext.to_device!.since !== undefined && /^[0-9]{1,15}$/.test(ext.to_device!.since) ? Number(ext.to_device!.since) : 0;
    // The client has what came with `since`: it is deleted, as /sync deletes on the next request.
    if (since > 0) await deps.keys.toDevice.acknowledge(userId, deviceId, since);
    const events = await deps.keys.toDevice.deliver(userId, deviceId, since, upTo.stream, ext.to_device!.limit ?? 100);
    out['to_device'] = { next_batch: String(upTo.stream), events };
    if (events.length > 0) news = true;
  }

  if (on(ext.e2ee)) {
    const { counts, unusedFallback } = await deps.keys.keyCounts(userId, deviceId);
    const e2ee: Record<string, unknown> = { device_one_time_keys_count: counts, device_unused_fallback_key_types: unusedFallback };
    if (incremental) {
      const lists = await deps.keys.deviceListChanges(userId, from.stream, upTo.stream);
      if (lists.changed.length > 0 || lists.left.length > 0) {
        e2ee['device_lists'] = lists;
        news = true;
      }
    }
    out['e2ee'] = e2ee;
  }

  if (on(ext.account_data)) {
    const scope = scopeOf(ext.account_data!, rooms);
    const global: Record<string, unknown>[] = [];
    const byRoom: Record<string, Record<string, unknown>[]> = {};
    const add = (roomId: string, type: string, content: Record<string, unknown>) => (byRoom[roomId] ??= []).push({ type, content });
    for (const item of await deps.users.accountData.since(userId, from.stream, upTo.stream)) {
      if (item.roomId === '') global.push({ type: item.type, content: item.content });
      else if (scope.has(item.roomId) && !(incremental && rooms.initial.has(item.roomId))) add(item.roomId, item.type, item.content);
    }
    // A room new to the connection comes with all of its account data.
    const fresh = incremental ? [...rooms.initial].filter((id) => scope.has(id)) : [];
    if (fresh.length > 0) {
      const wanted = new Set(fresh);
      for (const item of await deps.users.accountData.since(userId, 0, upTo.stream)) if (wanted.has(item.roomId)) add(item.roomId, item.type, item.content);
    }
    if (global.length > 0 || Object.keys(byRoom).length > 0) news = true;
    out['account_data'] = { global, rooms: byRoom };
  }

  if (on(ext.receipts)) {
    const scope = scopeOf(ext.receipts!, rooms);
    const changed = rooms.receiptNews;
    const byRoom: Record<string, unknown> = {};
    for (const roomId of scope) {
      const initial = rooms.initial.has(roomId);
      if (!initial && changed && !changed.has(roomId)) continue;
      let rows = await deps.sync.receipts.since(roomId, userId, initial ? 0 : from.stream, upTo.stream);
      // A new room: the receipts on the events it is sent with, and the user's own.
      if (initial) rows = rows.filter((r) => r.user_id === userId || rooms.timelineEvents.get(roomId)?.has(r.event_id));
      if (rows.length > 0) byRoom[roomId] = { type: 'm.receipt', content: receiptContent(rows) };
    }
    if (Object.keys(byRoom).length > 0) news = true;
    out['receipts'] = { rooms: byRoom };
  }

  if (on(ext.typing)) {
    const byRoom: Record<string, unknown> = {};
    for (const roomId of scopeOf(ext.typing!, rooms)) {
      const typing = deps.sync.typing.get(roomId);
      const show = rooms.initial.has(roomId) || !incremental ? typing.userIds.length > 0 : typing.changed > from.ephemeral;
      if (show) byRoom[roomId] = { type: 'm.typing', content: { user_ids: typing.userIds } };
    }
    if (Object.keys(byRoom).length > 0) news = true;
    out['typing'] = { rooms: byRoom };
  }
  return { extensions: out, news };
}

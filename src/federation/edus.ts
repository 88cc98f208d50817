import { z } from 'zod';
import { serverNameOf } from '../events/identifiers.ts';
import type { DeviceListUpdateEdu } from '../keys/device-lists.ts';
import type { DirectToDeviceContent, ToDeviceOutbox } from '../keys/to-device.ts';
import type { PresenceStatus } from '../sync/ephemeral.ts';
import type { ReceiptRow } from '../sync/receipts.ts';
import { serverAllowedInRoom } from './acl.ts';
import type { Keys } from '../keys/keys.ts';
import type { Rooms } from '../rooms/rooms.ts';
import type { Sync } from '../sync/sync.ts';
import type { Users } from '../users/users.ts';
import type { FederationClient } from './client.ts';
import type { Edu, OutgoingQueues } from './queue.ts';

/** What the EDU handlers need; the Federation passes its own. */
export interface EduServices {
  serverName: string;
  rooms: Rooms;
  users: Pick<Users, 'isLocal'>;
  keys: Keys;
  sync: Pick<Sync, 'presence' | 'receipts' | 'typing'>;
  queues: OutgoingQueues;
  client: FederationClient;
  now: () => number;
  log: (message: string, error?: unknown) => void;
}

const deviceListUpdateSchema = z
  .object({
    user_id: z.string(),
    device_id: z.string(),
    stream_id: z.number().int(),
    prev_id: z.array(z.number().int()).optional(),
    deleted: z.boolean().optional(),
    device_display_name: z.string().optional(),
    keys: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();
const typingSchema = z.object({ room_id: z.string(), user_id: z.string(), typing: z.boolean() }).loose();

const receiptSchema = z.record(
  z.string(),
  z.record(z.string(), z.record(z.string(), z.object({
    event_ids: z.array(z.string()).min(1),
    data: z.object({ ts: z.number().int(), thread_id: z.string().optional() }).loose(),
  }).loose())),
);

const presenceSchema = z.object({
  push: z.array(z.object({
    user_id: z.string(),
    presence: z.enum(['online', 'offline', 'unavailable']),
    status_msg: z.string().optional(),
    last_active_ago: z.number().int().optional(),
  }).loose()),
}).loose();

const toDeviceSchema = z.object({
  sender: z.string(),
  type: z.string(),
  message_id: z.string().min(1),
  messages: z.record(z.string(), z.record(z.string(), z.record(z.string(), z.unknown()))),
}).loose();

/**
 * Ephemeral data units (server-server §EDUs): typing, receipts, presence and
 * to-device messages, in and out. An EDU speaks only for users of the server that
 * sent it; anything about another server's users is dropped.
 *
 * Out, the components tell us what their local users did. Typing, receipts and
 * presence take the queues' in-memory lane, where a newer notice replaces an older
 * one still waiting: they are superseded within seconds, and a durable queue would
 * cost a write per keystroke and, after an outage, deliver stale notices in bulk.
 * To-device messages are durable, queued in the same write as the client's
 * transaction ID: a lost one breaks encryption.
 */
export class Edus {
  constructor(private readonly services: EduServices) {
    const { sync, keys, queues, log } = services;
    const report = (what: string) => (error: unknown) => log(`federation: sending ${what} failed`, error);
    sync.typing.onLocalChange((roomId, userId, typing) => {
      this.toRoom(roomId, `typing ${roomId} ${userId}`, { edu_type: 'm.typing', content: { room_id: roomId, user_id: userId, typing } }).catch(report('typing'));
    });
    sync.receipts.onLocalReceipt((roomId, receipt) => {
      // Private receipts stay here; only public read receipts are shared.
      if (receipt.receipt_type !== 'm.read') return;
      this.toRoom(roomId, `receipt ${roomId} ${receipt.user_id} ${receipt.thread_id}`, receiptEdu(roomId, receipt)).catch(report('a receipt'));
    });
    sync.presence.onLocalChange((userId, status) => this.sendPresence(userId, status).catch(report('presence')));
    keys.onLocalDeviceChange((userId, first, last) => this.sendDeviceListUpdates(userId, first, last).catch(report('a device list update')));
    keys.onLocalSigningKeyChange((userId) => this.sendSigningKeyUpdate(userId).catch(report('a signing key update')));
  }

  /** Applies one EDU from `origin`; unknown types and malformed content are ignored, as the spec says. */
  async receive(origin: string, edu: Edu): Promise<void> {
    switch (edu.edu_type) {
      case 'm.typing':
        return this.receiveTyping(origin, edu.content);
      case 'm.receipt':
        return this.receiveReceipts(origin, edu.content);
      case 'm.presence':
        return this.receivePresence(origin, edu.content);
      case 'm.direct_to_device':
        return this.receiveToDevice(origin, edu.content);
      case 'm.device_list_update': {
        const parsed = deviceListUpdateSchema.safeParse(edu.content);
        if (parsed.success) await this.services.keys.remoteLists.receiveUpdate(origin, parsed.data as DeviceListUpdateEdu);
        return;
      }
      case 'm.signing_key_update':
        if (typeof edu.content === 'object' && edu.content !== null) await this.services.keys.remoteLists.receiveSigningKeyUpdate(origin, edu.content);
        return;
    }
  }

  /** Servers other than ours sharing a room with a local user. */
  private async serversSharingRooms(userId: string): Promise<string[]> {
    const { rooms, serverName } = this.services;
    const servers = new Set<string>();
    for (const roomId of await rooms.roomsOf(userId)) for (const server of await rooms.joinedServers(roomId)) servers.add(server);
    servers.delete(serverName);
    return [...servers];
  }

  /**
   * A local user's devices changed: m.device_list_update to every server sharing a
   * room with them, one EDU per change, each naming the change before it (prev_id).
   */
  private async sendDeviceListUpdates(userId: string, first: number, last: number): Promise<void> {
    const { keys, queues } = this.services;
    const servers = await this.serversSharingRooms(userId);
    if (servers.length === 0) return;
    const updates = (await keys.deviceListUpdates(userId, first - 1)).filter((u) => u.stream_id <= last);
    await queues.send(servers, { edus: updates.map((content) => ({ edu_type: 'm.device_list_update', content: { ...content } })) });
  }

  /** A local user's master or self-signing key changed: m.signing_key_update to the same servers. */
  private async sendSigningKeyUpdate(userId: string): Promise<void> {
    const { keys, queues } = this.services;
    const servers = await this.serversSharingRooms(userId);
    if (servers.length === 0) return;
    const own = await keys.query(undefined, { [userId]: [] });
    const content: Record<string, unknown> = { user_id: userId };
    if (own.master_keys[userId]) content['master_key'] = own.master_keys[userId];
    if (own.self_signing_keys[userId]) content['self_signing_key'] = own.self_signing_keys[userId];
    await queues.send(servers, { edus: [{ edu_type: 'm.signing_key_update', content }] });
  }

  private async receiveTyping(origin: string, content: unknown): Promise<void> {
    const parsed = typingSchema.safeParse(content);
    if (!parsed.success) return;
    const { room_id: roomId, user_id: userId, typing } = parsed.data;
    if (serverNameOf(userId) !== origin || (await this.services.rooms.membership(roomId, userId)) !== 'join') return;
    if (!(await serverAllowedInRoom(this.services.rooms, roomId, origin))) return;
    this.services.sync.typing.setRemote(roomId, userId, typing);
  }

  private async receiveReceipts(origin: string, content: unknown): Promise<void> {
    const parsed = receiptSchema.safeParse(content);
    if (!parsed.success) return;
    for (const [roomId, byType] of Object.entries(parsed.data)) {
      if (!(await serverAllowedInRoom(this.services.rooms, roomId, origin))) continue;
      const receipts: ReceiptRow[] = [];
      // Only public read receipts cross servers; a private one from afar is not ours to show.
      for (const [userId, { event_ids, data }] of Object.entries(byType['m.read'] ?? {})) {
        if (serverNameOf(userId) !== origin || (await this.services.rooms.membership(roomId, userId)) !== 'join') continue;
        receipts.push({ receipt_type: 'm.read', user_id: userId, thread_id: data.thread_id ?? '', event_id: event_ids[0]!, ts: data.ts });
      }
      await this.services.sync.receipts.putRemote(roomId, receipts);
    }
  }

  private async receivePresence(origin: string, content: unknown): Promise<void> {
    const parsed = presenceSchema.safeParse(content);
    if (!parsed.success) return;
    for (const update of parsed.data.push) {
      // Kept only for users sharing a room with us: presence of strangers would only fill memory.
      if (serverNameOf(update.user_id) !== origin || (await this.services.rooms.roomsOf(update.user_id)).length === 0) continue;
      this.services.sync.presence.setRemote(update.user_id, update.presence, update.status_msg, update.last_active_ago ?? 0);
    }
  }

  private async receiveToDevice(origin: string, content: unknown): Promise<void> {
    const parsed = toDeviceSchema.safeParse(content);
    if (!parsed.success || serverNameOf(parsed.data.sender) !== origin) return;
    await this.services.keys.toDevice.deliverRemote(origin, parsed.data as DirectToDeviceContent);
  }

  /** Sends a notice to every other server joined to the room, replacing any older one of the same key still waiting. */
  private async toRoom(roomId: string, key: string, edu: Edu): Promise<void> {
    this.services.queues.sendEphemeral(await this.services.rooms.joinedServers(roomId), key, edu);
  }

  /** Presence goes to every server sharing a room with the user. */
  private async sendPresence(userId: string, status: PresenceStatus): Promise<void> {
    const { queues, now } = this.services;
    const servers = await this.serversSharingRooms(userId);
    const update: Record<string, unknown> = {
      user_id: userId,
      presence: status.presence,
      last_active_ago: Math.max(0, now() - status.last_active_ts),
      currently_active: status.presence === 'online',
    };
    if (status.status_msg !== undefined) update['status_msg'] = status.status_msg;
    queues.sendEphemeral(servers, `presence ${userId}`, { edu_type: 'm.presence', content: { push: [update] } });
  }
}

function receiptEdu(roomId: string, receipt: ReceiptRow): Edu {
  const data: Record<string, unknown> = { ts: receipt.ts };
  if (receipt.thread_id) data['thread_id'] = receipt.thread_id;
  return { edu_type: 'm.receipt', content: { [roomId]: { 'm.read': { [receipt.user_id]: { event_ids: [receipt.event_id], data } } } } };
}

/**
 * The keys component's outbox for to-device messages to other servers' users (given to `Keys` at
 * construction): one durable `m.direct_to_device` EDU per destination, queued in the write that
 * takes the client's transaction ID; once that write is durable, each destination's queue is kicked.
 */
export function toDeviceOutbox(queues: Pick<OutgoingQueues, 'enqueue' | 'kick'>): ToDeviceOutbox {
  return (tx, outgoing) => {
    for (const { destination, content } of outgoing) queues.enqueue(tx, [destination], { edus: [{ edu_type: 'm.direct_to_device', content: { ...content } }] });
    return () => {
      for (const { destination } of outgoing) queues.kick(destination);
    };
  };
}

import type { Rooms } from '../rooms/rooms.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import type { DeviceListener } from '../users/users.ts';
import { nextStreamId, type StreamNotify } from '../storage/stream.ts';
import { CodedError } from '../util/coded-error.ts';
import { NotVisibleError } from './visibility.ts';

/** A room one device peeks into, and the stream position the peek began at. */
export interface Peek {
  roomId: string;
  since: number;
}

/**
 * Peeking through /sync (MSC2753, as Dendrite serves it and sytest checks it): a device
 * that peeks into a `world_readable` room it is not in gets that room in its own syncs'
 * `rooms.peek`, as a joined room would come, until it unpeeks or joins. A peek belongs to
 * one device, never to the user's others. Only rooms this server holds can be peeked.
 */
export class Peeks implements DeviceListener {
  constructor(
    private readonly db: Database,
    private readonly rooms: Rooms,
    private readonly notify: StreamNotify,
  ) {}

  /** Starts peeking; 403 unless the room's history is `world_readable` now, 404 for a room not held here. */
  async peek(userId: string, deviceId: string, roomId: string): Promise<void> {
    if (!(await this.rooms.exists(roomId))) throw new PeekError(404, 'M_NOT_FOUND', `Room ${roomId} is not known here`);
    const visibility = (await this.rooms.currentStateEvent(roomId, 'm.room.history_visibility', ''))?.event.content['history_visibility'];
    if (visibility !== 'world_readable') throw new NotVisibleError(`Room ${roomId} is not world_readable: it cannot be peeked into`);
    // A position of its own: the device's next sync has the room afresh, whatever else happened.
    const position = await this.db.transaction((tx) => {
      const stream = nextStreamId(tx);
      tx.run('INSERT OR REPLACE INTO peeks (user_id, device_id, room_id, stream_id) VALUES (?, ?, ?, ?)', [userId, deviceId, roomId, stream]);
      return stream;
    });
    this.notify({ position, userIds: [userId] });
  }

  async unpeek(userId: string, deviceId: string, roomId: string): Promise<void> {
    await this.db.transaction((tx) => void tx.run('DELETE FROM peeks WHERE user_id = ? AND device_id = ? AND room_id = ?', [userId, deviceId, roomId]));
  }

  devicesAdded(): void {}

  /** A device that goes takes its peeks with it. */
  devicesRemoved(tx: WriteTransaction, userId: string, deviceIds: string[]): void {
    for (const deviceId of deviceIds) tx.run('DELETE FROM peeks WHERE user_id = ? AND device_id = ?', [userId, deviceId]);
  }

  /** The rooms a device peeks into. */
  async of(userId: string, deviceId: string): Promise<Peek[]> {
    return (await this.db.all<{ room_id: string; stream_id: number }>('SELECT room_id, stream_id FROM peeks WHERE user_id = ? AND device_id = ?', [userId, deviceId]))
      .map((row) => ({ roomId: row.room_id, since: row.stream_id }));
  }
}

class PeekError extends CodedError {
  override name = 'PeekError';
}

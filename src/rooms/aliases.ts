import type { Database } from '../storage/database.ts';

/**
 * Room aliases (`room_aliases`) and whether a room is published in the public room
 * directory (`rooms.published`): plain rows beside the room's events, no state involved.
 */
export class RoomAliases {
  constructor(private readonly db: Database) {}

  async resolveAlias(alias: string): Promise<string | undefined> {
    return (await this.db.get<{ room_id: string }>('SELECT room_id FROM room_aliases WHERE alias = ?', [alias]))?.room_id;
  }

  /** Creates an alias; false when it is taken. */
  async createAlias(alias: string, roomId: string, creator: string): Promise<boolean> {
    return this.db.transaction((tx) => {
      if (tx.get('SELECT 1 FROM room_aliases WHERE alias = ?', [alias])) return false;
      tx.run('INSERT INTO room_aliases (alias, room_id, creator) VALUES (?, ?, ?)', [alias, roomId, creator]);
      return true;
    });
  }

  async aliasCreator(alias: string): Promise<string | undefined> {
    return (await this.db.get<{ creator: string }>('SELECT creator FROM room_aliases WHERE alias = ?', [alias]))?.creator;
  }

  async deleteAlias(alias: string): Promise<void> {
    await this.db.transaction((tx) => tx.run('DELETE FROM room_aliases WHERE alias = ?', [alias]));
  }

  /** Points every alias of one room at another, at once (a room upgrade). */
  async moveAliases(fromRoomId: string, toRoomId: string): Promise<void> {
    await this.db.transaction((tx) => tx.run('UPDATE room_aliases SET room_id = ? WHERE room_id = ?', [toRoomId, fromRoomId]));
  }

  async aliasesOf(roomId: string): Promise<string[]> {
    return (await this.db.all<{ alias: string }>('SELECT alias FROM room_aliases WHERE room_id = ? ORDER BY alias', [roomId])).map((r) => r.alias);
  }

  async setPublished(roomId: string, published: boolean): Promise<void> {
    await this.db.transaction((tx) => tx.run('UPDATE rooms SET published = ? WHERE room_id = ?', [published ? 1 : 0, roomId]));
  }

  async isPublished(roomId: string): Promise<boolean> {
    return (await this.db.get<{ published: number }>('SELECT published FROM rooms WHERE room_id = ?', [roomId]))?.published === 1;
  }

  async publishedRooms(): Promise<string[]> {
    return (await this.db.all<{ room_id: string }>('SELECT room_id FROM rooms WHERE published = 1 ORDER BY created_ts')).map((r) => r.room_id);
  }
}

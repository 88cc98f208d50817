import type { ChatRoom, LocalEcho as ShownEcho, MatrixEvent, Member } from '../chat.ts';
import type { SyncResponse } from './matrix.ts';

/** A message sent from this page that the homeserver has not echoed back yet. */
export interface LocalEcho extends ShownEcho {
  eventId?: string;
  failed?: boolean;
  /** Why it was not sent (the views say it in words beside Retry and Delete). */
  error?: unknown;
}

export interface Room extends ChatRoom {
  id: string;
  membership: 'join' | 'invite' | 'leave';
  name: string | undefined;
  alias: string | undefined;
  timeline: MatrixEvent[];
  /** Token for /messages to load what precedes the timeline; undefined when the start is reached. */
  prevBatch: string | undefined;
  members: Map<string, Member>;
  typing: string[];
  /** Latest m.read receipt of each user. */
  receipts: Map<string, string>;
  localEchoes: LocalEcho[];
  /** Who invited us (invites only). */
  inviter: string | undefined;
}

function newRoom(id: string, membership: Room['membership']): Room {
  return {
    id,
    membership,
    name: undefined,
    alias: undefined,
    timeline: [],
    prevBatch: undefined,
    members: new Map(),
    typing: [],
    receipts: new Map(),
    localEchoes: [],
    inviter: undefined,
  };
}

/** Client-side room state, built from /sync and /messages. */
export class Store {
  readonly rooms = new Map<string, Room>();

  constructor(readonly userId: string) {}

  private room(id: string, membership: Room['membership']): Room {
    let room = this.rooms.get(id);
    if (!room) this.rooms.set(id, (room = newRoom(id, membership)));
    room.membership = membership;
    return room;
  }

  private applyState(room: Room, event: MatrixEvent): void {
    if (event.state_key === undefined) return;
    switch (event.type) {
      case 'm.room.name':
        room.name = typeof event.content.name === 'string' && event.content.name !== '' ? event.content.name : undefined;
        break;
      case 'm.room.canonical_alias':
        room.alias = typeof event.content.alias === 'string' ? event.content.alias : undefined;
        break;
      case 'm.room.member': {
        const displayName = typeof event.content.displayname === 'string' ? event.content.displayname : undefined;
        room.members.set(event.state_key, { userId: event.state_key, displayName, membership: String(event.content.membership) });
        break;
      }
    }
  }

  applySync(response: SyncResponse): void {
    for (const [id, data] of Object.entries(response.rooms?.join ?? {})) {
      const room = this.room(id, 'join');
      room.inviter = undefined;
      for (const event of data.state?.events ?? []) this.applyState(room, event);
      const timeline = data.timeline?.events ?? [];
      if (data.timeline?.limited) {
        room.timeline = [];
        room.prevBatch = data.timeline.prev_batch;
      } else if (room.timeline.length === 0 && room.prevBatch === undefined) {
        room.prevBatch = data.timeline?.prev_batch;
      }
      const known = new Set(room.timeline.map((e) => e.event_id));
      for (const event of timeline) {
        this.applyState(room, event);
        if (known.has(event.event_id)) continue;
        room.timeline.push(event);
        room.localEchoes = room.localEchoes.filter((echo) => echo.eventId !== event.event_id && echo.txnId !== event.unsigned?.transaction_id);
      }
      for (const event of data.ephemeral?.events ?? []) {
        if (event.type === 'm.typing') room.typing = (event.content.user_ids as string[] | undefined) ?? [];
        if (event.type === 'm.receipt') {
          for (const [eventId, byType] of Object.entries(event.content)) {
            for (const userId of Object.keys((byType as Record<string, object>)['m.read'] ?? {})) room.receipts.set(userId, eventId);
          }
        }
      }
    }
    for (const [id, data] of Object.entries(response.rooms?.invite ?? {})) {
      const room = this.room(id, 'invite');
      for (const event of data.invite_state?.events ?? []) {
        this.applyState(room, event);
        if (event.type === 'm.room.member' && event.state_key === this.userId) room.inviter = event.sender;
      }
    }
    for (const id of Object.keys(response.rooms?.leave ?? {})) this.rooms.delete(id);
  }

  /** Older events from /messages (newest first), put before the timeline. */
  prepend(roomId: string, chunk: MatrixEvent[], end: string | undefined): void {
    const room = this.rooms.get(roomId);
    if (!room) return;
    const known = new Set(room.timeline.map((e) => e.event_id));
    const older = chunk.filter((e) => !known.has(e.event_id)).reverse();
    room.timeline = [...older, ...room.timeline];
    room.prevBatch = chunk.length === 0 ? undefined : end;
  }

  displayName(room: Room, userId: string): string {
    return room.members.get(userId)?.displayName ?? userId.replace(/^@/, '').split(':')[0] ?? userId;
  }

  roomName(room: Room): string {
    if (room.name) return room.name;
    if (room.alias) return room.alias;
    const others = [...room.members.values()].filter((m) => m.userId !== this.userId && (m.membership === 'join' || m.membership === 'invite'));
    if (others.length > 0) return others.map((m) => this.displayName(room, m.userId)).join(', ');
    return room.membership === 'invite' ? 'Invitation' : 'Empty room';
  }

  joinedMembers(room: Room): Member[] {
    return [...room.members.values()]
      .filter((m) => m.membership === 'join' || m.membership === 'invite')
      .sort((a, b) => this.displayName(room, a.userId).localeCompare(this.displayName(room, b.userId)));
  }

  sortedRooms(): Room[] {
    const lastTs = (room: Room) => room.timeline.at(-1)?.origin_server_ts ?? 0;
    return [...this.rooms.values()].sort((a, b) => (a.membership === 'invite' ? -1 : 0) - (b.membership === 'invite' ? -1 : 0) || lastTs(b) - lastTs(a));
  }
}

import { Direction, type MatrixClient, type Room } from 'matrix-js-sdk';

/**
 * Threads' history, paged in when asked: a thread's replies when it is opened (GET /relations) and a room's thread
 * list (GET /threads; Hearth serves it: v1.4). One paging of each at a time; `changed` once one is in.
 */
export class ThreadPages {
  /** Threads (by root) and thread lists (`threads:` + room) being paged in. */
  private readonly filling = new Set<string>();

  constructor(
    private readonly client: MatrixClient,
    private readonly pageSize: number,
    private readonly changed: () => void,
  ) {}

  open(room: Room, rootId: string): void {
    // A root without replies has no thread yet: made now, as Element does, so that the remote echo of
    // this page's first reply lands in it (with detached local echoes, the SDK puts it only in an existing thread).
    const thread = room.getThread(rootId) ?? room.createThread(rootId, room.findEventById(rootId), [], true);
    if (!thread.liveTimeline.getPaginationToken(Direction.Backward)) return;
    this.fill(rootId, () => this.client.paginateEventTimeline(thread.liveTimeline, { backwards: true, limit: this.pageSize }));
  }

  loadList(room: Room): void {
    // The SDK's thread list: its timeline sets, filled by one page of GET /threads.
    this.fill(`threads:${room.roomId}`, () => room.createThreadsTimelineSets().then(() => room.fetchRoomThreads()));
  }

  private fill(key: string, page: () => Promise<unknown>): void {
    if (this.filling.has(key)) return;
    this.filling.add(key);
    void page()
      .catch(() => undefined)
      .finally(() => {
        this.filling.delete(key);
        this.changed();
      });
  }
}

import type { MatrixClient } from 'matrix-js-sdk';
import type { Upload } from '../chat.ts';
import { UploadLimit, uploadAttachment, type HostUpload } from './media.ts';

/** An upload of this page, with the file kept for Retry. */
interface UploadJob {
  id: string;
  file: File;
  threadId: string | undefined;
  caption: string | undefined;
  loaded: number;
  failed?: boolean;
  error?: unknown;
}

/**
 * The page's uploads in progress, per room (media.ts does each): shown with their progress until the message
 * is sent, kept with their file when they fail, for Retry or Delete.
 */
export class Uploads {
  private readonly jobs = new Map<string, UploadJob[]>();
  private readonly limit: UploadLimit;
  private count = 0;

  constructor(
    private readonly client: MatrixClient,
    private readonly hostUpload: HostUpload | undefined,
    private readonly events: {
      /** Whether the room encrypts what is sent in it. */
      encrypted(roomId: string): boolean;
      /** A job started, failed or went. */
      changed(): void;
      /** More bytes of a job were taken. */
      progressed(): void;
      /** Its message was sent. */
      sent(): void;
    },
  ) {
    this.limit = new UploadLimit(client);
  }

  of(roomId: string): Upload[] {
    return (this.jobs.get(roomId) ?? []).map(({ id, file, caption, loaded, failed, error }) => ({ id, name: file.name, size: file.size, caption, loaded, failed, error }));
  }

  send(roomId: string, file: File, options: { threadId?: string; caption?: string }): void {
    const job: UploadJob = { id: `upload-${++this.count}`, file, threadId: options.threadId, caption: options.caption, loaded: 0 };
    this.jobs.set(roomId, [...(this.jobs.get(roomId) ?? []), job]);
    this.run(roomId, job);
  }

  retry(roomId: string, uploadId: string): void {
    const job = this.jobs.get(roomId)?.find((j) => j.id === uploadId);
    if (job?.failed) this.run(roomId, job);
  }

  discard(roomId: string, uploadId: string): void {
    this.jobs.set(roomId, (this.jobs.get(roomId) ?? []).filter((j) => j.id !== uploadId));
    this.events.changed();
  }

  private run(roomId: string, job: UploadJob): void {
    Object.assign(job, { loaded: 0, failed: false, error: undefined });
    this.events.changed();
    const progress = ({ loaded }: { loaded: number }) => {
      job.loaded = loaded;
      this.events.progressed();
    };
    uploadAttachment(this.client, this.hostUpload, this.limit, job.file, this.events.encrypted(roomId), progress, job.caption).then(
      (content) => {
        this.discard(roomId, job.id);
        // From here it is a message like any other: a local echo until the homeserver has it.
        this.client.sendMessage(roomId, job.threadId ?? null, content as never).then(
          () => this.events.sent(),
          () => this.events.changed(),
        );
      },
      (error) => {
        Object.assign(job, { failed: true, error });
        this.events.changed();
      },
    );
  }
}

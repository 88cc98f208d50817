/**
 * Attachments: a file uploaded through the homeserver's media API and the message that carries it,
 * `m.image` or `m.file`. In an encrypted
 * room the bytes are encrypted first, as the spec's EncryptedFile says (AES-CTR, SHA-256, a JWK), by
 * matrix-org's `matrix-encrypt-attachment`, and only ciphertext reaches any server. Shown back as object
 * URLs: fetched with the access token (media is authenticated, v1.11), decrypted where encrypted.
 * The upload goes to the page's host when the homeserver is the host's own (`PageHost.uploadMedia`: the
 * core takes it a chunk at a time and the bar shows how far), else with matrix-js-sdk's `uploadContent`
 * (its XHR's progress; Chromium reports none for a request a service worker answers).
 */
import { decryptAttachment, encryptAttachment, type IEncryptedFile } from 'matrix-encrypt-attachment';
import { MatrixError, type MatrixClient, type UploadOpts, type UploadProgress } from 'matrix-js-sdk';
import { FileTooLarge, MatrixApiError, type MediaState } from '../chat.ts';
import type { PageHost } from '../host.ts';
import { captionContent } from './content.ts';
import { toChatError } from './convert.ts';

type Content = Record<string, any>;

/** Thumbnails are asked of the homeserver in this size (it scales within it). */
const THUMBNAIL = { width: 800, height: 600 };
/** Image types shown as what they are; anything else becomes an octet-stream blob, so an object URL never renders markup on this origin. */
const SAFE_IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/** The homeserver's upload limit (`m.upload.size`), asked once; undefined when it does not say. */
export class UploadLimit {
  private limit: Promise<number | undefined> | undefined;
  constructor(private readonly client: MatrixClient) {}

  get(): Promise<number | undefined> {
    this.limit ??= this.client.getMediaConfig(true).then(
      (config) => (typeof config['m.upload.size'] === 'number' ? config['m.upload.size'] : undefined),
      () => {
        this.limit = undefined;
        return undefined;
      },
    );
    return this.limit;
  }
}

/**
 * A JPEG within the thumbnail size of an image larger than it, for encrypted rooms: the homeserver
 * cannot scale ciphertext, so the page does (as Element does), and the thumbnail goes encrypted too.
 */
async function encryptedThumbnail(file: File, size: { w: number; h: number }): Promise<Blob | undefined> {
  const scale = Math.min(THUMBNAIL.width / size.w, THUMBNAIL.height / size.h);
  if (scale >= 1 || typeof OffscreenCanvas !== 'function') return undefined;
  try {
    const bitmap = await createImageBitmap(file, { resizeWidth: Math.max(1, Math.round(size.w * scale)), resizeHeight: Math.max(1, Math.round(size.h * scale)), resizeQuality: 'high' });
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    canvas.getContext('2d')!.drawImage(bitmap, 0, 0);
    bitmap.close();
    return await canvas.convertToBlob({ type: 'image/jpeg', quality: 0.85 });
  } catch {
    return undefined;
  }
}

async function imageSize(file: File): Promise<{ w: number; h: number } | undefined> {
  if (!file.type.startsWith('image/') || typeof createImageBitmap !== 'function') return undefined;
  try {
    const bitmap = await createImageBitmap(file);
    const size = { w: bitmap.width, h: bitmap.height };
    bitmap.close();
    return size;
  } catch {
    return undefined;
  }
}

/** The host's upload to its own core (`PageHost.uploadMedia`), given only when the client's homeserver is the host's. */
export type HostUpload = PageHost['uploadMedia'];

/** Uploads `data` and returns its `mxc:` URI: through the host when it can (`host` answers), else over HTTP with the SDK. */
export async function uploadBytes(client: MatrixClient, host: HostUpload | undefined, data: Blob, opts: UploadOpts & { type: string }): Promise<string> {
  const token = client.getAccessToken();
  const fileName = opts.includeFilename === false ? undefined : (opts.name ?? (data as File).name);
  const answer = token ? host?.({ data, accessToken: token, contentType: opts.type, ...(fileName ? { fileName } : {}) }, (loaded) => opts.progressHandler?.({ loaded, total: data.size })) : undefined;
  if (!answer) return (await client.uploadContent(data, opts)).content_uri;
  const { status, body } = await answer;
  if (status === 200 && typeof body['content_uri'] === 'string') return body['content_uri'];
  // The media API's error as the SDK would have thrown it.
  throw new MatrixError(body, status);
}

/**
 * Uploads `file` (encrypted when `encrypted`) and returns the message content that carries it, with its
 * `caption` if any (`captionContent`). Throws `FileTooLarge`, or the upload's error in the seam's terms.
 */
export async function uploadAttachment(client: MatrixClient, host: HostUpload | undefined, limit: UploadLimit, file: File, encrypted: boolean, progress: (p: UploadProgress) => void, caption?: string): Promise<Content> {
  const max = await limit.get();
  if (max !== undefined && file.size > max) throw new FileTooLarge(file.size, max);
  const size = await imageSize(file);
  const mimetype = file.type || 'application/octet-stream';
  const info: Content = { mimetype, size: file.size, ...size };
  const content: Content = { msgtype: size ? 'm.image' : 'm.file', ...captionContent(file.name, caption), info };
  try {
    if (encrypted) {
      const { data, info: keys } = await encryptAttachment(await file.arrayBuffer());
      // No file name or type goes to the server with the ciphertext: they are inside the encrypted event.
      const url = await uploadBytes(client, host, new Blob([data]), { type: 'application/octet-stream', includeFilename: false, progressHandler: progress });
      content['file'] = { ...keys, url, mimetype };
      const thumbnail = size && (await encryptedThumbnail(file, size));
      if (thumbnail && size) {
        const thumb = await encryptAttachment(await thumbnail.arrayBuffer());
        const thumbUrl = await uploadBytes(client, host, new Blob([thumb.data]), { type: 'application/octet-stream', includeFilename: false });
        const scale = Math.min(THUMBNAIL.width / size.w, THUMBNAIL.height / size.h);
        info['thumbnail_file'] = { ...thumb.info, url: thumbUrl, mimetype: 'image/jpeg' };
        info['thumbnail_info'] = { mimetype: 'image/jpeg', size: thumbnail.size, w: Math.round(size.w * scale), h: Math.round(size.h * scale) };
      }
    } else {
      content['url'] = await uploadBytes(client, host, file, { type: mimetype, name: file.name, progressHandler: progress });
    }
  } catch (error) {
    if (error instanceof MatrixError && error.errcode === 'M_TOO_LARGE') throw new FileTooLarge(file.size, max);
    throw toChatError(error);
  }
  return content;
}

interface Source {
  mxc: string;
  file: IEncryptedFile | undefined;
  mimetype: string | undefined;
  /** Ask the homeserver for a thumbnail of it. */
  thumbnail: boolean;
}

function source(content: Content, kind: 'thumbnail' | 'full'): Source | undefined {
  const info = (content['info'] ?? {}) as Content;
  const file = content['file'] as (IEncryptedFile & { url?: string; mimetype?: string }) | undefined;
  if (kind === 'thumbnail') {
    const thumbFile = info['thumbnail_file'] as (IEncryptedFile & { url?: string }) | undefined;
    if (thumbFile?.url) return { mxc: thumbFile.url, file: thumbFile, mimetype: info['thumbnail_info']?.mimetype, thumbnail: false };
    if (typeof info['thumbnail_url'] === 'string') return { mxc: info['thumbnail_url'], file: undefined, mimetype: info['thumbnail_info']?.mimetype, thumbnail: false };
    // Ciphertext cannot be thumbnailed by a server: without a thumbnail of its own, the image itself is shown, scaled.
    if (!file && typeof content['url'] === 'string') return { mxc: content['url'], file: undefined, mimetype: info['mimetype'], thumbnail: true };
  }
  if (file?.url) return { mxc: file.url, file, mimetype: file.mimetype ?? info['mimetype'], thumbnail: false };
  if (typeof content['url'] === 'string') return { mxc: content['url'], file: undefined, mimetype: info['mimetype'], thumbnail: false };
  return undefined;
}

/** Attachments' bytes as object URLs, each fetched (and decrypted) once; `changed` runs when one is ready or failed. */
export class MediaCache {
  private readonly states = new Map<string, MediaState>();
  private readonly loads = new Map<string, Promise<string>>();

  constructor(
    private readonly client: MatrixClient,
    private readonly changed: () => void,
  ) {}

  state(content: Content, kind: 'thumbnail' | 'full'): MediaState {
    const key = this.key(content, kind);
    if (!key) return { status: 'failed', error: new Error('the message has no file') };
    const known = this.states.get(key);
    if (known) return known;
    void this.load(content, kind).catch(() => undefined);
    return this.states.get(key) ?? { status: 'loading' };
  }

  load(content: Content, kind: 'thumbnail' | 'full'): Promise<string> {
    const key = this.key(content, kind);
    const src = source(content, kind);
    if (!key || !src) return Promise.reject(new Error('the message has no file'));
    let load = this.loads.get(key);
    if (!load) {
      this.states.set(key, { status: 'loading' });
      load = this.fetch(src).catch((error) => {
        // A homeserver that cannot thumbnail it: the image itself.
        if (src.thumbnail) return this.fetch({ ...src, thumbnail: false });
        throw error;
      });
      load.then(
        (url) => this.states.set(key, { status: 'ready', url }),
        (error) => this.states.set(key, { status: 'failed', error }),
      ).finally(this.changed);
      this.loads.set(key, load);
    }
    return load;
  }

  /** Lets go of every object URL (signed out). */
  clear(): void {
    for (const state of this.states.values()) if (state.status === 'ready') URL.revokeObjectURL(state.url);
    this.states.clear();
    this.loads.clear();
  }

  private key(content: Content, kind: 'thumbnail' | 'full'): string | undefined {
    const src = source(content, kind);
    return src && `${src.thumbnail ? 'thumbnail' : 'full'} ${src.mxc}`;
  }

  private async fetch(src: Source): Promise<string> {
    const url = src.thumbnail
      ? this.client.mxcUrlToHttp(src.mxc, THUMBNAIL.width, THUMBNAIL.height, 'scale', false, true, true)
      : this.client.mxcUrlToHttp(src.mxc, undefined, undefined, undefined, false, true, true);
    if (!url) throw new Error(`not a media address: ${src.mxc}`);
    const response = await fetch(url, { headers: { authorization: `Bearer ${this.client.getAccessToken() ?? ''}` } });
    if (!response.ok) {
      const body = (await response.json().catch(() => ({}))) as { errcode?: string; error?: string };
      throw new MatrixApiError(response.status, body.errcode ?? 'M_UNKNOWN', body.error ?? `the download failed (${response.status})`);
    }
    let bytes = await response.arrayBuffer();
    if (src.file) bytes = await decryptAttachment(bytes, src.file);
    const type = src.thumbnail ? (response.headers.get('content-type') ?? '') : (src.mimetype ?? '');
    return URL.createObjectURL(new Blob([bytes], { type: SAFE_IMAGE_TYPES.has(type) ? type : 'application/octet-stream' }));
  }
}

import type SharpModule from 'sharp';
import { thumbnailSize, type Thumbnail, type ThumbnailMethod, type Thumbnailer } from '../media/thumbnailer.ts';

/** Types libvips (through sharp's prebuilt binaries) reads here. */
const READABLE = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp', 'image/apng', 'image/avif']);

/**
 * Thumbnails under Node with sharp (libvips). PNG out when the source has an alpha
 * channel (or is a PNG/GIF: line art), JPEG otherwise; both are served inline by every client.
 * Animated sources give their first frame (the spec's `animated` is a preference).
 */
export class SharpThumbnailer implements Thumbnailer {
  /** Loaded on the first thumbnail: libvips costs about 29 MiB resident, which an idle host need not pay. */
  private sharp: Promise<typeof SharpModule> | undefined;

  canThumbnail(contentType: string): boolean {
    return READABLE.has(contentType);
  }

  async thumbnail(bytes: Uint8Array, contentType: string, width: number, height: number, method: ThumbnailMethod): Promise<Thumbnail> {
    // Bounded decode: a small file that claims to be a huge image is refused, not expanded.
    const sharp = await (this.sharp ??= import('sharp').then((module) => module.default));
    const image = sharp(bytes, { limitInputPixels: 64 * 1024 * 1024, failOn: 'error' }).rotate();
    const meta = await image.metadata();
    if (!meta.width || !meta.height) throw new Error('the image has no dimensions');
    // EXIF orientations 5-8 swap width and height.
    const [sourceWidth, sourceHeight] = (meta.orientation ?? 1) >= 5 ? [meta.height, meta.width] : [meta.width, meta.height];
    const size = thumbnailSize(sourceWidth, sourceHeight, width, height, method);
    const resized = image.resize(size.width, size.height, { fit: method === 'crop' ? 'cover' : 'inside', withoutEnlargement: true });
    const png = meta.hasAlpha || contentType === 'image/png' || contentType === 'image/gif';
    const { data, info } = await (png ? resized.png() : resized.jpeg({ quality: 80 })).toBuffer({ resolveWithObject: true });
    return { bytes: new Uint8Array(data.buffer, data.byteOffset, data.byteLength), contentType: png ? 'image/png' : 'image/jpeg', width: info.width, height: info.height };
  }
}

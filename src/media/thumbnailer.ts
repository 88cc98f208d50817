/**
 * Makes thumbnails. Platform code, injected by the host: under Node with sharp
 * (src/node/media-thumbnailer.ts), in the browser Worker with createImageBitmap and
 * OffscreenCanvas (worker/media-thumbnailer.ts).
 */
export type ThumbnailMethod = 'crop' | 'scale';

export interface Thumbnail {
  bytes: Uint8Array;
  /** image/png or image/jpeg: types every browser shows inline. */
  contentType: string;
  width: number;
  height: number;
}

export interface Thumbnailer {
  /** Whether this thumbnailer can read images of this type. */
  canThumbnail(contentType: string): boolean;
  /**
   * A thumbnail of the image, per client-server §Thumbnails:
   * - `crop`: exactly width × height (never larger than the source), scaled to cover and
   *   cropped about the centre;
   * - `scale`: fits inside width × height keeping the aspect ratio, never larger than the source.
   * Rejects when the bytes are not an image it can read.
   */
  thumbnail(bytes: Uint8Array, contentType: string, width: number, height: number, method: ThumbnailMethod): Promise<Thumbnail>;
}

/** Crop and scale sizes worked out once, so every thumbnailer makes the same dimensions. */
export function thumbnailSize(sourceWidth: number, sourceHeight: number, width: number, height: number, method: ThumbnailMethod): { width: number; height: number } {
  if (method === 'crop') {
    // The requested shape, shrunk (never grown) until it fits in the source.
    const fit = Math.min(1, sourceWidth / width, sourceHeight / height);
    return { width: Math.max(1, Math.round(width * fit)), height: Math.max(1, Math.round(height * fit)) };
  }
  const ratio = Math.min(1, width / sourceWidth, height / sourceHeight);
  return { width: Math.max(1, Math.round(sourceWidth * ratio)), height: Math.max(1, Math.round(sourceHeight * ratio)) };
}

/** Types we ask a thumbnailer to read: raster images browsers and libvips both decode (no SVG: it may carry script). */
export const THUMBNAILABLE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp', 'image/apng', 'image/avif', 'image/bmp']);

/// <reference lib="webworker" />
/**
 * Thumbnails in the browser Worker: createImageBitmap decodes (orientation from
 * EXIF, as the browser shows it), an OffscreenCanvas scales or crops, convertToBlob
 * encodes. No library: the browser's own decoders are the maintained ones here.
 */
import { thumbnailSize, type Thumbnail, type ThumbnailMethod, type Thumbnailer } from '../src/media/thumbnailer.ts';

const READABLE = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp', 'image/apng', 'image/avif', 'image/bmp']);

export class CanvasThumbnailer implements Thumbnailer {
  canThumbnail(contentType: string): boolean {
    return READABLE.has(contentType) && typeof OffscreenCanvas !== 'undefined' && typeof createImageBitmap !== 'undefined';
  }

  async thumbnail(bytes: Uint8Array, contentType: string, width: number, height: number, method: ThumbnailMethod): Promise<Thumbnail> {
    const bitmap = await createImageBitmap(new Blob([bytes as Uint8Array<ArrayBuffer>], { type: contentType }));
    try {
      const size = thumbnailSize(bitmap.width, bitmap.height, width, height, method);
      const canvas = new OffscreenCanvas(size.width, size.height);
      const context = canvas.getContext('2d');
      if (!context) throw new Error('no 2d context on an OffscreenCanvas');
      context.imageSmoothingEnabled = true;
      context.imageSmoothingQuality = 'high';
      if (method === 'crop') {
        // Scale to cover the target, then take the centre.
        const scale = Math.max(size.width / bitmap.width, size.height / bitmap.height);
        const sourceWidth = size.width / scale;
        const sourceHeight = size.height / scale;
        context.drawImage(bitmap, (bitmap.width - sourceWidth) / 2, (bitmap.height - sourceHeight) / 2, sourceWidth, sourceHeight, 0, 0, size.width, size.height);
      } else {
        context.drawImage(bitmap, 0, 0, size.width, size.height);
      }
      // PNG where the source may have transparency or is line art; JPEG for photographs.
      const type = contentType === 'image/jpeg' ? 'image/jpeg' : 'image/png';
      const blob = await canvas.convertToBlob(type === 'image/jpeg' ? { type, quality: 0.8 } : { type });
      return { bytes: new Uint8Array(await blob.arrayBuffer()), contentType: type, width: size.width, height: size.height };
    } finally {
      bitmap.close();
    }
  }
}

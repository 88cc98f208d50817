import sharp from 'sharp';

/** A w × h RGBA PNG of a colour gradient, so that a thumbnail of it is not one flat colour. */
export function png(w: number, h: number): Promise<Buffer> {
  const pixels = Buffer.alloc(w * h * 4);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) pixels.set([(x * 40) & 255, (y * 40) & 255, 200, 255], (y * w + x) * 4);
  return sharp(pixels, { raw: { width: w, height: h, channels: 4 } }).png().toBuffer();
}

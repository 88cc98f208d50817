import { describe, expect, it } from 'vitest';
import { decodeMediaMultipart, encodeMediaMultipart } from './multipart.ts';
import { contentDisposition, fileNameOf, parseThumbnailQuery } from './http.ts';
import { chooseThumbnailSize } from './config.ts';
import { thumbnailSize } from './thumbnailer.ts';

describe('thumbnail sizes', () => {
  it('crop keeps the asked-for shape, shrunk to fit a smaller source; scale fits inside and never enlarges', () => {
    expect(thumbnailSize(400, 300, 96, 96, 'crop')).toEqual({ width: 96, height: 96 });
    expect(thumbnailSize(50, 80, 96, 96, 'crop')).toEqual({ width: 50, height: 50 });
    expect(thumbnailSize(400, 300, 320, 240, 'scale')).toEqual({ width: 320, height: 240 });
    expect(thumbnailSize(400, 100, 320, 240, 'scale')).toEqual({ width: 320, height: 80 });
    expect(thumbnailSize(100, 50, 800, 600, 'scale')).toEqual({ width: 100, height: 50 });
  });

  it('rounds a request up to the kept sizes of its method, or the largest', () => {
    expect(chooseThumbnailSize(30, 30, 'crop')).toEqual({ width: 32, height: 32, method: 'crop' });
    expect(chooseThumbnailSize(64, 64, 'crop')).toEqual({ width: 96, height: 96, method: 'crop' });
    expect(chooseThumbnailSize(5000, 5000, 'crop')).toEqual({ width: 640, height: 640, method: 'crop' });
    expect(chooseThumbnailSize(700, 400, 'scale')).toEqual({ width: 800, height: 600, method: 'scale' });
  });

  it('refuses sizes that make no sense', () => {
    const query = (q: Record<string, string>) => () => parseThumbnailQuery((name) => q[name]);
    expect(query({ width: '0', height: '10' })).toThrow(/width/);
    expect(query({ width: '-1', height: '10' })).toThrow(/width/);
    expect(query({ width: '1.5', height: '10' })).toThrow(/width/);
    expect(query({ width: '10' })).toThrow(/height/);
    expect(parseThumbnailQuery((name) => ({ width: '10', height: '20' })[name])).toEqual({ width: 10, height: 20, method: 'scale' });
  });
});

describe('Content-Disposition', () => {
  it('is inline only for the safe types, and carries the name plainly or as filename*', () => {
    expect(contentDisposition('image/png', 'a.png')).toBe('inline; filename="a.png"');
    expect(contentDisposition('IMAGE/PNG; x=y', undefined)).toBe('inline');
    expect(contentDisposition('text/html', 'a.html')).toBe('attachment; filename="a.html"');
    expect(contentDisposition('image/svg+xml', 'a.svg')).toBe('attachment; filename="a.svg"');
    expect(contentDisposition('application/pdf', 'résumé "final".pdf')).toBe("attachment; filename*=utf-8''r%C3%A9sum%C3%A9%20%22final%22.pdf");
  });

  it('reads back either form', () => {
    for (const name of ['a.png', 'résumé "final".pdf', "it's (1).txt"]) expect(fileNameOf(contentDisposition('text/plain', name))).toBe(name);
    expect(fileNameOf('inline')).toBeUndefined();
    expect(fileNameOf('attachment; filename=plain.txt')).toBe('plain.txt');
  });
});

describe('multipart/mixed media answers', () => {
  it('round-trips bytes that contain CRLFs and dashes', () => {
    const bytes = new Uint8Array([0, 13, 10, 45, 45, 13, 10, 13, 10, 255, 45, 45]);
    const { body, contentType } = encodeMediaMultipart({ bytes, contentType: 'application/octet-stream', contentDisposition: 'attachment; filename="x.bin"' }, 'abc123');
    const part = decodeMediaMultipart(contentType, body, 1024);
    expect(part).toEqual({ metadata: {}, bytes, contentType: 'application/octet-stream', contentDisposition: 'attachment; filename="x.bin"' });
  });

  it('skips a preamble before the first boundary, as RFC 2046 allows and Synapse sends (a CRLF)', () => {
    const bytes = new TextEncoder().encode('the file');
    const encode = (preamble: string) =>
      new TextEncoder().encode(`${preamble}--b\r\nContent-Type: application/json\r\n\r\n{}\r\n--b\r\nContent-Type: text/plain\r\nContent-Disposition: inline\r\n\r\nthe file\r\n--b--\r\n`);
    for (const preamble of ['\r\n', 'This is a multipart message.\r\n']) {
      expect(decodeMediaMultipart('multipart/mixed; boundary=b', encode(preamble), 1024)).toEqual({ metadata: {}, bytes, contentType: 'text/plain', contentDisposition: 'inline' });
    }
    // Without the CRLF before it, text that merely ends in the boundary is no boundary.
    expect(() => decodeMediaMultipart('multipart/mixed; boundary=b', encode('x'), 1024)).toThrow();
  });

  it('refuses what is not a two-part multipart/mixed, or too large', () => {
    expect(() => decodeMediaMultipart('application/json', new Uint8Array(2), 10)).toThrow(/multipart\/mixed/);
    const one = new TextEncoder().encode('--b\r\ncontent-type: application/json\r\n\r\n{}\r\n--b--\r\n');
    expect(() => decodeMediaMultipart('multipart/mixed; boundary=b', one, 10)).toThrow(/two parts/);
    const { body, contentType } = encodeMediaMultipart({ bytes: new Uint8Array(100), contentType: 'image/png', contentDisposition: 'inline' }, 'b');
    expect(() => decodeMediaMultipart(contentType, body, 10)).toThrow();
  });
});

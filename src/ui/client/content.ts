/**
 * What a typed message becomes on the wire: markdown (bold, italic, code, links) rendered by `marked`
 * as `formatted_body` (org.matrix.custom.html) beside the text as typed, `/me` as `m.emote`, a reply's
 * `m.in_reply_to`, an edit's `m.new_content`. Raw HTML in what was typed is sent as text, never as markup.
 */
import { Marked } from 'marked';
import type { SendOptions } from '../chat.ts';

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const markdown = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    html: ({ text }) => escapeHtml(text),
  },
});

type Content = Record<string, unknown>;

/** `msgtype`, `body` and, when the markdown made any markup, `format` and `formatted_body`. */
export function textContent(body: string, emote = false): Content {
  const content: Content = { msgtype: emote ? 'm.emote' : 'm.text', body };
  const html = (markdown.parse(body) as string).trim();
  // Only a paragraph of plain text: nothing to format.
  const plain = `<p>${escapeHtml(body).replace(/\n/g, '<br>')}</p>`;
  if (html !== plain && html !== `<p>${body}</p>`) {
    content['format'] = 'org.matrix.custom.html';
    content['formatted_body'] = html.replace(/^<p>([\s\S]*)<\/p>$/, (whole, inner: string) => (inner.includes('<p>') ? whole : inner));
  }
  return content;
}

/**
 * The text fields of a file's message (Matrix v1.10 media captions): with a caption, `body` is the caption
 * (its markdown as `formatted_body`, as a typed message's) and `filename` the file's name; without one,
 * both are the name. Readers take `body` as a caption only when `filename` differs from it, so a caption
 * that is the file's name says nothing more and goes as no caption.
 */
export function captionContent(fileName: string, caption = ''): Content {
  const text = caption.trim();
  if (!text || text === fileName) return { body: fileName, filename: fileName };
  const fields = textContent(text);
  delete fields['msgtype'];
  return { ...fields, filename: fileName };
}

/** A message as typed, with how it is sent (`/me` is an emote). */
export function messageContent(text: string, options: SendOptions = {}): Content {
  const emote = options.emote ?? false;
  const content = textContent(text, emote);
  if (options.replyTo) content['m.relates_to'] = { 'm.in_reply_to': { event_id: options.replyTo } };
  return content;
}

/** An edit of `eventId`: the new text, and the "* " fallback older clients show. */
export function editContent(eventId: string, text: string, emote: boolean): Content {
  const next = textContent(text, emote);
  const fallback: Content = { ...next, body: `* ${text}` };
  if (typeof next['formatted_body'] === 'string') fallback['formatted_body'] = `* ${next['formatted_body']}`;
  return { ...fallback, 'm.new_content': next, 'm.relates_to': { rel_type: 'm.replace', event_id: eventId } };
}

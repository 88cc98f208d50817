import type { ChatClient, MatrixEvent } from './chat.ts';
import { formatBytes, h } from './dom.ts';
import { describeError } from './errors.ts';
import { richText } from './message-body.ts';

const FILE_TYPES = new Set(['m.image', 'm.file', 'm.audio', 'm.video']);

/** The message carries a file: `m.image` shown inline, the others as a download. */
export function isAttachment(event: MatrixEvent): boolean {
  return FILE_TYPES.has(event.content.msgtype) && (typeof event.content.url === 'string' || typeof event.content.file?.url === 'string');
}

const fileName = (content: Record<string, any>): string => String(content.filename ?? content.body ?? 'file');

/** Media captions (Matrix v1.10): `body` is a caption only when `filename` is there and says something else; otherwise it is the name. */
function hasCaption(content: Record<string, any>): boolean {
  return typeof content.filename === 'string' && typeof content.body === 'string' && content.body !== content.filename;
}

/** The caption under the image or file, formatted as a message is; null when it has none. */
function caption(content: Record<string, any>): HTMLElement | null {
  return hasCaption(content) ? h('figcaption', { class: 'attachment-caption' }, ...richText(content)) : null;
}

/**
 * An attachment's body: an image as its thumbnail (the full image opens on a click), any other file as
 * a download link with its name and size; either as a figure, its caption under it. The bytes come from
 * the client (fetched with the access token, decrypted in an encrypted room) as object URLs; until then
 * it says it is loading.
 */
export function attachmentBody(client: ChatClient, event: MatrixEvent): HTMLElement {
  const content = event.content;
  const name = fileName(content);
  const size = typeof content.info?.size === 'number' ? formatBytes(content.info.size) : undefined;
  // Where its bytes are (ciphertext in an encrypted room): what "copy link" or a test reads.
  const mxc = String(content.file?.url ?? content.url);
  if (content.msgtype === 'm.image') {
    const state = client.media(content, 'thumbnail');
    const inner =
      state.status === 'ready'
        ? h('img', { src: state.url, alt: name, class: 'attachment-thumbnail' })
        : h('span', { class: 'attachment-loading' }, state.status === 'loading' ? `Loading ${name}\u2026` : `${name} could not be shown. ${describeError(state.error)}`);
    return h(
      'figure',
      { class: 'body attachment', 'data-mxc': mxc },
      h('button', { type: 'button', class: 'attachment-image', 'aria-label': `Open image ${name}`, onclick: () => openImage(client, content, name) }, inner),
      caption(content),
    );
  }
  const error = h('span', { class: 'error', role: 'alert' });
  const download = (): void => {
    error.textContent = '';
    client.loadMedia(content, 'full').then(
      (url) => {
        const link = h('a', { href: url, download: name, hidden: true });
        document.body.append(link);
        link.click();
        link.remove();
      },
      (e) => (error.textContent = `Not downloaded. ${describeError(e)}`),
    );
  };
  return h(
    'figure',
    { class: 'body attachment attachment-file', 'data-mxc': mxc },
    h('button', { type: 'button', class: 'link', 'aria-label': `Download ${name}`, onclick: download }, `\u{1F4CE} ${name}`),
    size ? h('span', { class: 'attachment-size' }, ` (${size})`) : null,
    error,
    caption(content),
  );
}

/** The full image over the page, with Close (Escape closes it too). */
function openImage(client: ChatClient, content: Record<string, any>, name: string): void {
  const holder = h('div', { class: 'lightbox-image' }, `Loading ${name}\u2026`);
  const dialog = h('dialog', { class: 'lightbox', 'aria-label': name }, h('form', { method: 'dialog' }, h('button', { class: 'small' }, 'Close')), holder);
  dialog.addEventListener('close', () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  client.loadMedia(content, 'full').then(
    (url) => holder.replaceChildren(h('img', { src: url, alt: name })),
    (error) => (holder.textContent = `${name} could not be loaded. ${describeError(error)}`),
  );
}

import { formatBytes, h } from './dom.ts';

/** A file the person chose to send, and what they wrote under it. */
export interface FileToSend {
  readonly file: File;
  readonly caption: string;
}

/** The image types the timeline draws (client/media.ts keeps no other as an image): the preview draws the same. */
const DRAWN_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

let previews = 0;

/**
 * Asks before files go (issue 38): a modal dialog shows each picked, pasted or dropped file (an image drawn
 * from a `blob:` URL of the file itself: nothing is uploaded yet) with its name, its size and a caption
 * field. Send (or Enter in a caption) hands them to `send`; Cancel or Escape sends nothing.
 */
export function previewFiles(files: readonly File[], send: (chosen: FileToSend[]) => void): HTMLDialogElement {
  const several = files.length > 1;
  const urls: string[] = [];
  const rows = files.map((file) => {
    const url = DRAWN_TYPES.has(file.type) ? URL.createObjectURL(file) : undefined;
    if (url) urls.push(url);
    const fileIcon = (): HTMLElement => h('span', { class: 'preview-file', 'aria-hidden': 'true' }, '\u{1F4CE}');
    // A file that says it is an image but is not one shows as a file.
    const picture = url ? h('img', { src: url, alt: file.name, class: 'preview-image', onerror: () => picture?.replaceWith(fileIcon()) }) : fileIcon();
    const caption = h('input', { type: 'text', class: 'preview-caption', autocomplete: 'off', placeholder: 'Add a caption\u2026', 'aria-label': several ? `Caption for ${file.name}` : 'Caption' });
    const item = h(
      'li',
      { class: 'preview-item' },
      picture,
      h('div', { class: 'preview-details' }, h('span', { class: 'preview-name' }, file.name), h('span', { class: 'preview-size' }, formatBytes(file.size)), caption),
    );
    return { file, caption, item };
  });
  const titleId = `attachment-preview-title-${++previews}`;
  const title = several ? `Send ${files.length} files` : urls.length ? 'Send an image' : 'Send a file';
  const dialog = h('dialog', { class: 'attachment-preview', 'aria-labelledby': titleId });
  const form = h(
    'form',
    {
      onsubmit: (event: Event) => {
        event.preventDefault();
        const chosen = rows.map(({ file, caption }) => ({ file, caption: caption.value }));
        dialog.close();
        send(chosen);
      },
    },
    h('h2', { id: titleId }, title),
    h('ul', { class: 'preview-items', 'aria-label': several ? 'Files to send' : 'File to send' }, ...rows.map((row) => row.item)),
    h('div', { class: 'actions' }, h('button', { type: 'button', onclick: () => dialog.close() }, 'Cancel'), h('button', { type: 'submit', class: 'primary' }, 'Send')),
  );
  dialog.append(form);
  // Escape closes it too (a cancel): either way the previews' object URLs go with it.
  dialog.addEventListener('close', () => {
    for (const url of urls) URL.revokeObjectURL(url);
    dialog.remove();
  });
  document.body.append(dialog);
  dialog.showModal();
  rows[0]?.caption.focus();
  return dialog;
}

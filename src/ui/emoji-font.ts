/** style.css's emoji font (twemoji-colr-font), last in each of its font stacks. */
export const EMOJI_FONT = 'Twemoji';

/** How long the first screen waits for the font at most: a font that has not come by then draws when it comes (below). */
const WAIT_MS = 3_000;

let loaded: Promise<void> | undefined;

/**
 * Loads the page's emoji font, once; resolves when it is in, has failed, or has taken `WAIT_MS`. The page asks for it
 * as its script starts (`main.ts`) and shows its first screen only after this resolves, because Chromium (156, measured)
 * never redraws the first text it lays out with a web font that is still loading: that text keeps the missing-glyph box
 * it got meanwhile (the attach button's 📎, the first emoji the page shows), while any text laid out later, even a
 * moment later during the same load, is redrawn in the font once it is in. Text laid out after the load is drawn in it.
 */
export function loadEmojiFont(): Promise<void> {
  loaded ??= Promise.race([
    document.fonts.load(`1em ${EMOJI_FONT}`, '\u{1F4CE}').then(
      () => undefined,
      // No font: emoji draw as whatever the system has, as before.
      () => undefined,
    ),
    new Promise<void>((resolve) => setTimeout(resolve, WAIT_MS)),
  ]);
  return loaded;
}

/** A small hyperscript helper: the built-in client builds its DOM with this, no framework. */
export type Child = Node | string | number | null | undefined | false;

type Props = Record<string, unknown>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      element.addEventListener(key.slice(2).toLowerCase(), value as EventListener);
    } else if (key === 'class') {
      element.className = String(value);
    } else if (key.includes('-') || key === 'for' || key === 'role') {
      element.setAttribute(key, value === true ? '' : String(value));
    } else {
      (element as unknown as Record<string, unknown>)[key] = value;
    }
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export function formatTime(ts: number | undefined): string {
  if (!ts) return '';
  return new Date(ts).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

/**
 * Copies `text`; where the clipboard API is refused (no permission, not a secure context),
 * selects the text in `shown` so the person can copy it by hand.
 */
export async function copyText(text: string, shown: HTMLElement, button: HTMLButtonElement): Promise<void> {
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    if (shown instanceof HTMLInputElement || shown instanceof HTMLTextAreaElement) {
      shown.focus();
      shown.select();
    } else {
      const range = document.createRange();
      range.selectNodeContents(shown);
      const selection = getSelection();
      selection?.removeAllRanges();
      selection?.addRange(range);
    }
    button.textContent = 'Selected: press Ctrl+C';
  }
  button.dataset.copied = 'true';
  setTimeout(() => {
    button.textContent = label;
    delete button.dataset.copied;
  }, 2000);
}

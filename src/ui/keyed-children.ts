/** The HTML each element had when it was built: what a later redraw compares with. */
const builtAs = new WeakMap<Element, string>();

const keyOf = (element: Element, html: string): string => (element as HTMLElement).dataset.eventId ?? (element as HTMLElement).dataset.txnId ?? html;

/**
 * Puts `next` into `parent`, keeping each child whose key (event ID, transaction ID) and
 * built HTML are unchanged. The views rebuild a room on every change (a receipt, a typing
 * notice, a decryption); replacing every node would close what a person has open (a
 * reaction picker), drop a text selection and detach the button being clicked. Written
 * here rather than with a DOM-morphing library because those copy attributes only, not the
 * listeners `h()` adds, so a morphed button would keep its first handler.
 */
export function updateKeyedChildren(parent: Element, next: readonly HTMLElement[]): void {
  const current = new Map<string, Element>();
  for (const child of parent.children) {
    const html = builtAs.get(child);
    if (html !== undefined) current.set(keyOf(child, html), child);
  }
  const nodes = next.map((element) => {
    const html = element.outerHTML;
    const old = current.get(keyOf(element, html));
    if (old && builtAs.get(old) === html) return old;
    builtAs.set(element, html);
    return element;
  });
  const keep = new Set<Element>(nodes);
  for (const child of [...parent.children]) if (!keep.has(child)) child.remove();
  let cursor = parent.firstElementChild;
  for (const node of nodes) {
    if (cursor === node) cursor = cursor.nextElementSibling;
    else parent.insertBefore(node, cursor);
  }
}

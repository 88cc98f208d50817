import DOMPurify from 'dompurify';
import type { MatrixEvent } from './chat.ts';
import { h } from './dom.ts';

/** The markup a message may carry (what markdown makes, as Element allows); everything else is dropped by DOMPurify. */
const ALLOWED_TAGS = ['b', 'strong', 'i', 'em', 'u', 'del', 's', 'code', 'pre', 'a', 'p', 'br', 'ul', 'ol', 'li', 'blockquote', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr', 'span'];
const ALLOWED_ATTR = ['href'];
const SAFE_LINK = /^(https?|mailto|matrix):/i;

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName !== 'A') return;
  const href = node.getAttribute('href') ?? '';
  if (!SAFE_LINK.test(href)) node.removeAttribute('href');
  node.setAttribute('target', '_blank');
  node.setAttribute('rel', 'noopener noreferrer');
});

const URL_IN_TEXT = /\bhttps?:\/\/[^\s<>"']+[^\s<>"'.,;:!?)\]]/g;

/** Plain text with its web addresses as links (built as DOM nodes, so nothing in the text is markup). */
function linkified(text: string): (string | HTMLElement)[] {
  const parts: (string | HTMLElement)[] = [];
  let last = 0;
  for (const match of text.matchAll(URL_IN_TEXT)) {
    parts.push(text.slice(last, match.index));
    parts.push(h('a', { href: match[0], target: '_blank', rel: 'noopener noreferrer' }, match[0]));
    last = match.index + match[0].length;
  }
  parts.push(text.slice(last));
  return parts;
}

/** A content's text as shown: its `formatted_body` (HTML) sanitized, or its `body` with links. */
export function richText(content: Record<string, any>): (string | HTMLElement)[] {
  if (content.format === 'org.matrix.custom.html' && typeof content.formatted_body === 'string') {
    const html = DOMPurify.sanitize(content.formatted_body, { ALLOWED_TAGS, ALLOWED_ATTR, FORBID_TAGS: ['mx-reply'] });
    const holder = h('span', { class: 'formatted' });
    holder.innerHTML = html;
    return [holder];
  }
  return linkified(typeof content.body === 'string' ? content.body : '(unsupported message)');
}

/** A message's body: its rich text; an emote starts with who did it. */
export function messageBody(event: MatrixEvent, who: string): HTMLElement {
  const emote = event.content.msgtype === 'm.emote';
  const body = h('div', { class: emote ? 'body emote' : 'body' });
  if (emote) body.append(`* ${who} `);
  body.append(...richText(event.content));
  return body;
}

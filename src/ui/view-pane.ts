import { h, type Child } from './dom.ts';

/**
 * A view of its own in the open room's place (issue 38 item 7): the Peers view and Settings. A region named
 * by its heading, with Close; on a wide screen it takes the room's and the members' columns (the room list
 * stays beside it), on a phone the screen under the tabs. `chat-screen.ts` shows it, focuses its heading,
 * and goes back to where the person was on Close or Escape.
 */
export class ViewPane {
  readonly element: HTMLElement;
  /** Focused when the view opens: a screen reader says where the person is, and Tab goes on into the view. */
  readonly heading: HTMLHeadingElement;

  constructor(
    /** `peers` or `settings`: its element's ID is `peers-view`, for the buttons' `aria-controls`. */
    readonly name: string,
    title: string,
    close: () => void,
    ...body: Child[]
  ) {
    this.heading = h('h2', { id: `${name}-view-title`, tabIndex: -1 }, title);
    this.element = h(
      'section',
      { id: `${name}-view`, class: `view-pane ${name}-view`, 'aria-labelledby': this.heading.id, hidden: true },
      h('header', { class: 'view-header' }, this.heading, h('button', { type: 'button', class: 'link view-close', 'aria-label': `Close ${title}`, title: 'Close (Escape)', onclick: close }, 'Close')),
      h('div', { class: 'view-body' }, ...body),
    );
  }
}

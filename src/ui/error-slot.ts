import { h } from './dom.ts';
import { describeError } from './errors.ts';

/** What a person did that can fail: one success of a kind clears every error of that kind still shown. */
export type ActionKind = 'create' | 'join' | 'leave' | 'invite' | 'add-peer' | 'settings' | 'search';

const shown = new Set<ErrorSlot>();

/**
 * Where one form or list says what went wrong: a sentence and a Dismiss button. It clears when the
 * person dismisses it, when the same place tries again, and when any action of the same kind succeeds
 * (an invite from the members pane clears the demo room's failed invite), so an old error does not
 * stay beside newer ones.
 */
export class ErrorSlot {
  readonly element: HTMLParagraphElement;
  private readonly text = h('span', { class: 'error-text' });
  private kind: ActionKind | undefined;

  constructor(className = '') {
    // The × is drawn by CSS, so the element's text is the sentence alone.
    const dismiss = h('button', { type: 'button', class: 'dismiss', 'aria-label': 'Dismiss', title: 'Dismiss', onclick: () => this.clear() });
    this.element = h('p', { class: `error ${className}`.trim(), role: 'alert', hidden: true }, this.text, dismiss);
  }

  get message(): string {
    return this.text.textContent ?? '';
  }

  show(kind: ActionKind, message: string): void {
    this.kind = kind;
    this.text.textContent = message;
    this.element.hidden = false;
    shown.add(this);
  }

  /** Runs what this place does: its earlier error goes, a failure shows here in words (`describe`), a success clears errors of `kind` anywhere. */
  run(kind: ActionKind, action: () => Promise<unknown>, describe: (error: unknown) => string = describeError): void {
    this.clear();
    action().then(
      () => succeeded(kind),
      (error) => this.show(kind, describe(error)),
    );
  }

  /** Clears it if what it shows is an error of `kind`. */
  clearIfKind(kind: ActionKind): void {
    if (this.kind === kind) this.clear();
  }

  clear(): void {
    this.kind = undefined;
    this.text.textContent = '';
    this.element.hidden = true;
    shown.delete(this);
  }
}

/** An action of `kind` succeeded: errors of that kind, wherever shown, are out of date. */
export function succeeded(kind: ActionKind): void {
  for (const slot of [...shown]) slot.clearIfKind(kind);
}

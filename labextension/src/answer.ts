/**
 * The parts nbagent's views share: HTML from the kernel or the server rendered sanitized (every view), and the row
 * of two buttons that send `approval_answer` with a line saying how the question stands (the question overlay,
 * approvals.ts, and a proposed edit at its cell, inline.ts).
 */

import type { NotebookPanel } from '@jupyterlab/notebook';
import { MimeModel } from '@jupyterlab/rendermime';
import { Widget } from '@lumino/widgets';

import * as outgoing from './outgoing';
import type { ApprovalWaiting, JSONObject } from './protocol';

/** A maker of request ids, `<prefix>-<time>-<count>` (unique on this page). */
export function idMaker(prefix: string): () => string {
  let counter = 0;
  return () =>
    `${prefix}-${Date.now().toString(36)}-${(++counter).toString(36)}`;
}

/** HTML from the kernel, rendered by the notebook's own `text/html` renderer, untrusted. */
export function sanitizedHtml(panel: NotebookPanel, html: string): Widget {
  const renderer = panel.content.rendermime.createRenderer('text/html');
  // Untrusted: JupyterLab's sanitizer keeps the markup and classes and drops any script, style or handler.
  void renderer.renderModel(
    new MimeModel({ data: { 'text/html': html }, trusted: false })
  );
  return renderer;
}

/** A button of nbagent's views, appended to `row`. */
export function button(
  row: HTMLElement,
  label: string,
  className: string
): HTMLButtonElement {
  const made = document.createElement('button');
  made.className = `nbagent-overlay-button ${className}`;
  made.textContent = label;
  row.appendChild(made);
  return made;
}

/** A button's label and class. */
export type ButtonSpec = [label: string, className: string];

/** The two answers to a question (yes, then no) and a line saying how it stands; a click sends `approval_answer`. */
export class AnswerRow extends Widget {
  constructor(
    message: ApprovalWaiting,
    send: (message: JSONObject) => void,
    newId: () => string,
    yes: ButtonSpec,
    no: ButtonSpec,
    waiting: string
  ) {
    super();
    this.addClass('nbagent-overlay-buttons');
    this._yes = button(this.node, ...yes);
    this._no = button(this.node, ...no);
    this._note = document.createElement('span');
    this._note.className = 'nbagent-overlay-note';
    this._note.setAttribute('role', 'status');
    this._note.textContent = waiting;
    this.node.appendChild(this._note);
    const answer = (approved: boolean) => {
      this._yes.disabled = this._no.disabled = true;
      this._note.textContent = 'sent; waiting for the kernel…';
      send(
        outgoing.approvalAnswer(
          newId(),
          message.session,
          message.tool_use_id,
          approved
        )
      );
    };
    this._yes.addEventListener('click', () => answer(true));
    this._no.addEventListener('click', () => answer(false));
  }

  /** No more answers here: the buttons disabled, the line says `words`. */
  end(words: string): void {
    this._yes.disabled = this._no.disabled = true;
    this._note.textContent = words;
  }

  private _yes: HTMLButtonElement;
  private _no: HTMLButtonElement;
  private _note: HTMLSpanElement;
}

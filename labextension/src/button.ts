/**
 * The renderer of `application/vnd.nbagent.cells+json`: "Insert as cells" and one small button per call, drawn in
 * the `%agent` cell's output. Installed code only: the bundle is data (checked), shown as text, never as markup.
 */

import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { bridgeFor, InsertOutcome } from './comm';
import { IButtonData, MIME_TYPE, parseButtonData } from './protocol';

/** The widget drawing the buttons of one turn. */
export class CellsButtons extends Widget implements IRenderMime.IRenderer {
  constructor(
    private readonly _tracker: INotebookTracker,
    private readonly _version: string
  ) {
    super();
    this.addClass('nbagent-cells');
  }

  /** Draw the buttons of the bundle (a bundle of the wrong shape is said, not drawn). */
  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const parsed = parseButtonData(model.data[MIME_TYPE]);
    this.node.textContent = '';
    if (!parsed.ok) {
      this._note = this._element('span', 'nbagent-cells-note', parsed.error);
      return Promise.resolve();
    }
    const data = parsed.data;
    const all = this._element(
      'button',
      'nbagent-cells-insert',
      'Insert as cells'
    ) as HTMLButtonElement;
    all.title = `Insert the code of turn ${data.turn} below this cell, with its outputs`;
    all.addEventListener('click', () => void this._insert(data, all));
    if (data.calls.length > 1) {
      for (const call of data.calls) {
        const one = this._element(
          'button',
          'nbagent-cells-call',
          call.label
        ) as HTMLButtonElement;
        one.title = 'Insert this call as a cell';
        one.dataset.toolUseId = call.tool_use_id;
        one.addEventListener(
          'click',
          () => void this._insert(data, one, call.tool_use_id)
        );
      }
    }
    this._note = this._element('span', 'nbagent-cells-note', '');
    this._note.setAttribute('role', 'status');
    return Promise.resolve();
  }

  private async _insert(
    data: IButtonData,
    button: HTMLButtonElement,
    toolUseId?: string
  ): Promise<void> {
    const panel = this._panel();
    if (!panel) {
      this._say('cells can only be inserted from an open notebook');
      return;
    }
    button.disabled = true;
    this._say('inserting…');
    let outcome: InsertOutcome;
    try {
      outcome = await bridgeFor(panel, this._version).requestInsert(
        data.session,
        data.turn,
        toolUseId
      );
    } finally {
      button.disabled = false;
    }
    if (!outcome.ok) {
      this._say(outcome.error);
    } else if (outcome.inserted === 0) {
      this._say(
        outcome.skipped
          ? 'already in the notebook: nothing inserted'
          : 'nothing to insert'
      );
    } else {
      const already = outcome.skipped
        ? ` (${outcome.skipped} already there)`
        : '';
      this._say(
        `inserted ${outcome.inserted} cell${outcome.inserted === 1 ? '' : 's'} below${already}`
      );
    }
  }

  private _panel(): NotebookPanel | null {
    return this._tracker.find(panel => panel.node.contains(this.node)) ?? null;
  }

  private _say(text: string): void {
    if (this._note) {
      this._note.textContent = text;
    }
  }

  private _element(tag: string, className: string, text: string): HTMLElement {
    const element = document.createElement(tag);
    element.className = className;
    element.textContent = text;
    this.node.appendChild(element);
    return element;
  }

  private _note: HTMLElement | null = null;
}

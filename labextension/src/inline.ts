/**
 * A proposed cell edit shown at the cell it changes (docs/cells.md, "Proposed edits"): when a question waiting
 * (`approval_waiting`) carries an `edit`, this page draws its coloured diff right under the target cell's code, with
 * Accept / Reject, and scrolls the cell into view. A click sends `approval_answer`, as the panel's buttons and the
 * overlay's do: the kernel decides and logs it, and `approval_decided` takes the view away. After an accepted
 * `%agent --fix` (an `apply_edit` with `offer_run`), a "Run cell" button at the fixed cell runs it through
 * JupyterLab's own run command, on the user's click only.
 *
 * Like the overlay, none of it is part of the notebook model: never written to the outputs or saved.
 */

import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { Panel, PanelLayout, Widget } from '@lumino/widgets';

import { AnswerRow, button, idMaker, sanitizedHtml } from './answer';
import { EDIT_NOTE, RUN_NOTE } from './pagerules';
import type { ApprovalDecided, ApprovalWaiting, JSONObject } from './protocol';
import { runCell } from './runcell';

const newId = idMaker('e');

/** Put a widget right under a cell's code (before its outputs): in the cell's view, not its model. */
export function placeAtInput(cell: Cell, widget: Widget): void {
  const layout = cell.layout as PanelLayout;
  const wrapper = cell.inputArea?.parent;
  const at = wrapper ? layout.widgets.indexOf(wrapper) : -1;
  layout.insertWidget(
    at >= 0 ? at + 1 : Math.max(0, layout.widgets.length - 1),
    widget
  );
}

/** One proposed edit at its cell: what it is, the diff (sanitized HTML), Accept, Reject and a line saying how it stands. */
export class InlineEdit extends Panel {
  constructor(
    readonly message: ApprovalWaiting,
    panel: NotebookPanel,
    send: (message: JSONObject) => void
  ) {
    super();
    this.addClass('nbagent-inline-edit');
    this.node.dataset.toolUseId = message.tool_use_id;
    const head = new Widget();
    head.addClass('nbagent-inline-head');
    const label = document.createElement('span');
    label.className = 'nbagent-label';
    label.textContent = 'proposed change to this cell';
    head.node.append(label, ' ', EDIT_NOTE);
    this.addWidget(head);
    this.addWidget(sanitizedHtml(panel, message.edit?.diff_html ?? ''));
    this.addWidget(
      new AnswerRow(
        message,
        send,
        newId,
        ['Accept', 'nbagent-inline-accept'],
        ['Reject', 'nbagent-inline-reject'],
        'waiting for your answer'
      )
    );
  }
}

/** The "Run cell" offer at a cell an accepted `--fix` changed: runs it on a click, and goes once the cell ran. */
export class RunOffer extends Widget {
  constructor(panel: NotebookPanel, cell: Cell) {
    super();
    this.addClass('nbagent-run-offer');
    const run = button(this.node, 'Run cell', 'nbagent-run-cell');
    const note = document.createElement('span');
    note.className = 'nbagent-overlay-note';
    note.setAttribute('role', 'status');
    note.textContent = RUN_NOTE;
    this.node.appendChild(note);
    run.addEventListener('click', () => {
      run.disabled = true;
      runCell(panel, cell).then(
        () => this.dispose(),
        reason => {
          run.disabled = false;
          note.textContent = `could not run it: ${(reason as Error)?.message ?? reason}`;
        }
      );
    });
    const outputs = (cell.model as Partial<ICodeCellModel>).outputs;
    const ran = () => this.dispose(); // the cell ran some other way (Shift+Enter): the offer is done
    outputs?.changed.connect(ran);
    this.disposed.connect(() => outputs?.changed.disconnect(ran));
  }
}

/** The proposed edits and run offers shown on one notebook page. */
export class InlineEdits {
  constructor(
    readonly panel: NotebookPanel,
    private readonly _send: (message: JSONObject) => void,
    private readonly _cell: (id: string | undefined) => Cell | undefined
  ) {}

  /** Show a question's proposed edit at its cell, scrolled into view; whether this page has the cell (and shows it). */
  show(message: ApprovalWaiting): boolean {
    const cell = this._cell(message.edit?.cell_id);
    if (!message.edit || !cell) {
      return false;
    }
    const key = `${message.session}\n${message.tool_use_id}`;
    this._views.get(key)?.dispose(); // asked again (this page said hello again): the newer one
    const view = new InlineEdit(message, this.panel, this._send);
    this._views.set(key, view);
    view.disposed.connect(() => {
      if (this._views.get(key) === view) {
        this._views.delete(key);
      }
    });
    placeAtInput(cell, view);
    void this.panel.content
      .scrollToCell(cell, 'smart')
      .then(() => view.node.scrollIntoView({ block: 'nearest' }));
    return true;
  }

  /** A question ended (here, in the panel, on another page, or interrupted): its view goes. */
  decided(message: ApprovalDecided): void {
    this._views.get(`${message.session}\n${message.tool_use_id}`)?.dispose();
  }

  /** The kernel went away: no question can be answered any more. */
  endAll(): void {
    for (const view of [...this._views.values()]) {
      view.dispose();
    }
  }

  /** An accepted `--fix` changed this cell: offer to run it (one offer a cell). */
  offerRun(cellId: string): void {
    const cell = this._cell(cellId);
    if (!cell) {
      return;
    }
    this._offers.get(cellId)?.dispose();
    const offer = new RunOffer(this.panel, cell);
    this._offers.set(cellId, offer);
    offer.disposed.connect(() => {
      if (this._offers.get(cellId) === offer) {
        this._offers.delete(cellId);
      }
    });
    placeAtInput(cell, offer);
  }

  private _views = new Map<string, InlineEdit>();
  private _offers = new Map<string, RunOffer>();
}

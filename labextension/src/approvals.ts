/**
 * A question of the agent shown on every page of the notebook (docs/cells.md, "Every page"): the kernel says
 * `approval_waiting`, this page shows the question under the cell that runs the turn, as an overlay that is no part
 * of the notebook model (never written to the outputs or saved), with Approve / Decline buttons that send
 * `approval_answer`; `approval_decided` disables them and says how it ended.
 *
 * The page that ran the cell shows the question in the cell's own live panel (the ipywidgets panel): an overlay is
 * drawn only where the cell's outputs hold no live nbagent panel (no `.nbagent-activity` mark in them), so a
 * question is never asked twice on one page.
 */

import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { Panel, PanelLayout, Widget } from '@lumino/widgets';

import { AnswerRow, idMaker, sanitizedHtml } from './answer';
import { InlineEdits } from './inline';
import { decisionWords, drawOverlay } from './pagerules';
import type { ApprovalDecided, ApprovalWaiting, JSONObject } from './protocol';

/** A live panel's activity mark ("working…", "waiting for your approval ↓"): only a panel whose turn runs has one. */
export const ACTIVITY = '.nbagent-activity';

const newId = idMaker('a');

/** One question's overlay: the question (sanitized HTML), Approve, Decline and a line saying how it stands. */
export class ApprovalOverlay extends Panel {
  constructor(
    readonly message: ApprovalWaiting,
    panel: NotebookPanel,
    send: (message: JSONObject) => void
  ) {
    super();
    this.addClass('nbagent-overlay');
    this.node.dataset.toolUseId = message.tool_use_id;
    this.addWidget(sanitizedHtml(panel, message.question_html));
    this._row = new AnswerRow(
      message,
      send,
      newId,
      ['Approve', 'nbagent-overlay-approve'],
      ['Decline', 'nbagent-overlay-decline'],
      'waiting for your approval'
    );
    this.addWidget(this._row);
  }

  /** Whether the question still waits (its buttons live). */
  get open(): boolean {
    return !this._ended;
  }

  /** The question ended: no more answers here, and the line says how. */
  end(words: string): void {
    this._ended = true;
    this._row.end(words);
    this.addClass('nbagent-overlay-ended');
  }

  private _row: AnswerRow;
  private _ended = false;
}

/**
 * Put a widget under a cell, after its outputs (before the cell's footer): in the cell's view, not its model. It
 * goes when the cell's outputs change (the cell ran again) if `stale(change)` says it may (`change.type`: `set` is
 * an output updated in place, as a live panel ending as its transcript; a run first removes them).
 */
export function placeUnder(
  cell: Cell,
  widget: Widget,
  stale: (change: { type: string }) => boolean = () => true
): void {
  const layout = cell.layout as PanelLayout;
  layout.insertWidget(Math.max(0, layout.widgets.length - 1), widget);
  const outputs = (cell.model as Partial<ICodeCellModel>).outputs;
  if (!outputs) {
    return;
  }
  const drop = (_: unknown, change: { type: string }) => {
    if (stale(change)) {
      widget.dispose();
    }
  };
  outputs.changed.connect(drop);
  widget.disposed.connect(() => outputs.changed.disconnect(drop));
}

/** The questions shown on one notebook page. */
export class Approvals {
  /** Proposed edits shown at the cells they change, and the run offers after a fix (inline.ts). */
  readonly edits: InlineEdits;

  constructor(
    readonly panel: NotebookPanel,
    private readonly _send: (message: JSONObject) => void
  ) {
    this.edits = new InlineEdits(panel, _send, id => this.cell(id));
  }

  /**
   * The kernel says a question waits: a proposed edit at the cell it changes; else the question under its cell (at the
   * top without one), unless the live panel there asks it.
   */
  waiting(message: ApprovalWaiting): void {
    const key = `${message.session}\n${message.tool_use_id}`;
    const cell = this.cell(message.cell_id);
    const live = (node: HTMLElement) => node.querySelector(ACTIVITY) !== null;
    const hasLive = cell ? live(cell.node) : false;
    const inline = this.edits.show(message);
    if (
      !drawOverlay(
        Boolean(cell),
        hasLive,
        live(this.panel.content.node),
        inline
      )
    ) {
      return;
    }
    this._overlays.get(key)?.dispose(); // shown again (this page said hello again): the newer one
    const overlay = new ApprovalOverlay(message, this.panel, this._send);
    this._overlays.set(key, overlay);
    overlay.disposed.connect(() => {
      if (this._overlays.get(key) === overlay) {
        this._overlays.delete(key);
      }
    });
    if (cell) {
      placeUnder(cell, overlay, () => !overlay.open); // an ended question goes when the cell runs again
    } else {
      this.panel.contentHeader.addWidget(overlay);
    }
  }

  /** The kernel says how a question ended: every overlay of it says so. */
  decided(message: ApprovalDecided): void {
    const overlay = this._overlays.get(
      `${message.session}\n${message.tool_use_id}`
    );
    overlay?.end(decisionWords(message.decision, message.by));
    this.edits.decided(message);
  }

  /** The kernel went away: every question still open here ends with `words`. */
  endAll(words: string): void {
    for (const overlay of this._overlays.values()) {
      if (overlay.open) {
        overlay.end(words);
      }
    }
    this.edits.endAll();
  }

  /** The notebook's cell of this id, if it is in the notebook. */
  cell(id: string | undefined): Cell | undefined {
    if (!id) {
      return undefined;
    }
    return this.panel.content.widgets.find(cell => cell.model.id === id);
  }

  private _overlays = new Map<string, ApprovalOverlay>();
}

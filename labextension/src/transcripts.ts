/**
 * Finished turns written into their cells (docs/cells.md, "A finished turn in its cell"): after the kernel's `hello`
 * and whenever a cell ran, this page sends `catch_up` with its `%agent` cells; the kernel answers `transcripts` with
 * the outputs of each finished turn a cell lacks. The page the kernel chose (`write: true`) writes them into the
 * shared model (the notebook is then unsaved: the next save keeps them) and answers `transcripts_written`; any other
 * page shows them read-only under the cell, an overlay that is no part of the model. Nothing in them runs: the
 * transcript is static HTML rendered by the notebook's own `text/html` renderer, untrusted (sanitized).
 */

import type { ISharedCodeCell } from '@jupyter/ydoc';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { Panel, Widget } from '@lumino/widgets';

import { idMaker, sanitizedHtml } from './answer';
import { placeUnder } from './approvals';
import {
  cleanOutputs,
  IPageCell,
  markersOf,
  namesAgent,
  skipReason
} from './fillrules';
import * as outgoing from './outgoing';
import type { IFill, JSONObject, KernelMessage } from './protocol';

export const READ_ONLY =
  'This turn ended while no page showed it. Another page of this notebook writes it into the cell; it is shown here read-only.';

type Transcripts = Extract<KernelMessage, { type: 'transcripts' }>;

const newId = idMaker('t');

/** A finished turn shown read-only under its cell (never in the model). */
export class TranscriptOverlay extends Panel {
  constructor(
    readonly key: string,
    fill: IFill,
    panel: NotebookPanel
  ) {
    super();
    this.addClass('nbagent-overlay');
    this.addClass('nbagent-transcript-overlay');
    const note = new Widget();
    note.addClass('nbagent-overlay-note');
    note.node.textContent = READ_ONLY;
    this.addWidget(note);
    for (const output of cleanOutputs(fill.outputs) ?? []) {
      const data = (output.data ?? {}) as JSONObject;
      if (typeof data['text/html'] !== 'string') {
        continue;
      }
      this.addWidget(sanitizedHtml(panel, data['text/html']));
    }
  }
}

/** One notebook page's side of `catch_up` / `transcripts`. */
export class TranscriptFills {
  constructor(
    readonly panel: NotebookPanel,
    private readonly _send: (message: JSONObject) => void,
    private readonly _settled: (cellIds: ReadonlySet<string>) => void = () => {}
  ) {}

  /** Ask soon (once for a burst of cells run, as Run All makes). */
  askSoon(): void {
    clearTimeout(this._timer);
    this._timer = setTimeout(() => this.ask(), 300);
  }

  /** Ask the kernel which finished turns this page's `%agent` cells lack. */
  ask(): void {
    const model = this.panel.content.model;
    if (!model) {
      return;
    }
    const cells: IPageCell[] = [];
    for (const cell of model.sharedModel.cells) {
      const source = cell.getSource();
      if (cell.cell_type !== 'code' || !namesAgent(source)) {
        continue;
      }
      const outputs = (cell as ISharedCodeCell).getOutputs() as JSONObject[];
      cells.push({ id: cell.id, source, markers: markersOf(outputs) });
    }
    if (!cells.length) {
      return;
    }
    const id = newId();
    this._asked.set(id, new Map(cells.map(c => [c.id, c.source])));
    while (this._asked.size > 20) {
      this._asked.delete(this._asked.keys().next().value as string);
    }
    this._send(outgoing.catchUp(id, cells));
  }

  /** The kernel's answer: write the cells (this page was chosen), or show them read-only. */
  received(message: Transcripts): void {
    const sent = this._asked.get(message.id);
    this._asked.delete(message.id);
    const model = this.panel.content.model;
    if (!sent || !model) {
      return;
    }
    if (!message.write) {
      this._showReadOnly(message.cells, sent);
      this._answered(`shown ${message.cells.length}`);
      this._settled(new Set(sent.keys())); // after the transcripts are in place: a live view of these cells may go
      return;
    }
    const written: string[] = [];
    const skipped: string[] = [];
    const notebook = model.sharedModel;
    notebook.transact(() => {
      for (const fill of message.cells) {
        const cell = notebook.cells.find(c => c.id === fill.id);
        const now = cell && {
          cellType: cell.cell_type,
          source: cell.getSource(),
          markers:
            cell.cell_type === 'code'
              ? markersOf(
                  (cell as ISharedCodeCell).getOutputs() as JSONObject[]
                )
              : []
        };
        if (skipReason(fill, sent.get(fill.id), now) !== null) {
          skipped.push(fill.id);
          continue;
        }
        (cell as ISharedCodeCell).setOutputs(cleanOutputs(fill.outputs) as any);
        written.push(fill.id);
      }
    });
    if (written.length) {
      model.dirty = true; // the next save keeps them
    }
    this._send(outgoing.transcriptsWritten(message.id, written, skipped));
    this._answered(`written ${written.length}`);
    this._settled(new Set(sent.keys()));
  }

  /** Say on the panel's element what the last answer did (for people inspecting the page, and the browser tests). */
  private _answered(what: string): void {
    this._answers++;
    this.panel.node.dataset.nbagentTranscripts = `${this._answers}: ${what}`;
  }

  private _showReadOnly(fills: IFill[], sent: Map<string, string>): void {
    for (const fill of fills) {
      const key = `${fill.id}\n${fill.session}\n${fill.from}\n${fill.to}`;
      const cell = this.panel.content.widgets.find(c => c.model.id === fill.id);
      if (!cell || this._overlays.has(key) || !sent.has(fill.id)) {
        continue;
      }
      const overlay = new TranscriptOverlay(key, fill, this.panel);
      this._overlays.set(key, overlay);
      overlay.disposed.connect(() => this._overlays.delete(key));
      placeUnder(cell, overlay); // it goes when the cell's outputs change (written by the other page, or run again)
    }
  }

  private _answers = 0;
  private _timer: ReturnType<typeof setTimeout> | undefined;
  private _asked = new Map<string, Map<string, string>>(); // catch_up id -> the sources it sent, by cell id
  private _overlays = new Map<string, TranscriptOverlay>();
}

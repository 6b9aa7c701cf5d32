/**
 * When the kernel or the server goes away while a turn runs, a live nbagent panel would go on saying "working…"
 * forever: this watch says what happened instead (docs/notebook.md). It listens to the notebook's session: a kernel
 * that died, restarts or was replaced, or a connection lost for longer than a few seconds, marks every live panel
 * of the notebook (its activity line hidden, a notice under the cell); a kernel gone also ends every question still
 * open on the page. A connection that comes back within the grace time changes nothing; one that comes back later
 * takes the "connection lost" notice away (the turn may still be running). A notice goes when the cell runs again.
 *
 * A server stopped with SIGTERM (Ctrl+C, `kill`) interrupts each kernel before shutting it down, so the panel has
 * already ended as an interrupted transcript when the kernel goes: a turn whose final output says it was cut off
 * (`unfinished`, pagerules.ts `cutTurn`) is marked as a live panel is, as long as the kernel ran nothing after it.
 */

import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { KernelMessage } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { ACTIVITY, Approvals, placeUnder } from './approvals';
import { IMarker, markersOf } from './fillrules';
import {
  cutTurn,
  GRACE_MS,
  goneStatus,
  LOST,
  markerKey,
  reaction,
  Reaction,
  STOPPED
} from './pagerules';
import type { JSONObject } from './protocol';

const STATUS = '.nbagent-header > .nbagent-dim'; // the header's status ("— streaming · …"), beside the activity line

/** Watch one notebook's session and mark its live panels when their kernel is gone. */
export class KernelWatch {
  constructor(
    readonly panel: NotebookPanel,
    readonly approvals: Approvals
  ) {
    const session = panel.sessionContext;
    session.statusChanged.connect((_, status) =>
      this.react(reaction({ kind: 'status', status }))
    );
    session.connectionStatusChanged.connect((_, status) =>
      this.react(reaction({ kind: 'connection', status }))
    );
    session.kernelChanged.connect((_, change) =>
      this.react(
        reaction({
          kind: 'kernel',
          before: Boolean(change.oldValue),
          after: Boolean(change.newValue)
        })
      )
    );
    session.iopubMessage.connect((_, msg) => this._kernelSaid(msg));
    panel.disposed.connect(() => this._cancel());
  }

  /** Act on a reaction. */
  react(what: Reaction): void {
    if (what === 'stopped') {
      this._cancel();
      this.mark(STOPPED);
    } else if (what === 'lost-later') {
      if (this._timer === null) {
        this._timer = setTimeout(() => {
          this._timer = null;
          if (
            this.panel.sessionContext.session?.kernel?.connectionStatus !==
            'connected'
          ) {
            this.mark(LOST);
          }
        }, GRACE_MS);
      }
    } else if (what === 'back') {
      this._cancel();
      this.unmark(LOST);
    }
  }

  /**
   * Every live panel of the notebook, and every turn cut off since the kernel last ran a cell: its activity line
   * hidden, `words` under its cell; every open question ended.
   */
  mark(words: string): void {
    for (const cell of this.panel.content.widgets) {
      const marks = Array.from(
        cell.node.querySelectorAll<HTMLElement>(ACTIVITY)
      );
      if (!marks.length && !this._wasCut(cell)) {
        continue;
      }
      for (const node of marks) {
        node.style.display = 'none';
        node.dataset.nbagentGone = words;
        const status = node.parentElement?.querySelector<HTMLElement>(STATUS);
        if (status) {
          status.dataset.nbagentShown ??= status.textContent ?? '';
          status.textContent = goneStatus(status.dataset.nbagentShown, words);
        }
      }
      let notice = this._notices.get(cell.model.id);
      if (!notice || notice.isDisposed) {
        notice = new Widget();
        notice.addClass('nbagent-gone');
        notice.node.setAttribute('role', 'status');
        this._notices.set(cell.model.id, notice);
        placeUnder(cell, notice, change => change.type !== 'set'); // kept as the panel ends (a restart interrupts it)
      }
      notice.node.textContent = words;
    }
    if (words === STOPPED) {
      this._cut.clear(); // said: a later kernel's stop is not this turn's
      this.approvals.endAll(words); // a lost connection may come back: its questions stay open
    }
  }

  /** Take back a mark saying `words` (the connection came back: the panel updates again if its turn still runs). */
  unmark(words: string): void {
    for (const [id, notice] of this._notices) {
      if (notice.node.textContent !== words) {
        continue;
      }
      notice.dispose();
      this._notices.delete(id);
      const cell = this.approvals.cell(id);
      const marks = cell
        ? Array.from(cell.node.querySelectorAll<HTMLElement>(ACTIVITY))
        : [];
      for (const node of marks) {
        if (node.dataset.nbagentGone === words) {
          node.style.display = '';
          delete node.dataset.nbagentGone;
          const status = node.parentElement?.querySelector<HTMLElement>(STATUS);
          if (status?.dataset.nbagentShown !== undefined) {
            status.textContent = status.dataset.nbagentShown;
            delete status.dataset.nbagentShown;
          }
        }
      }
    }
  }

  /** A kernel message: a turn that ended cut off is remembered until the kernel runs a cell again. */
  private _kernelSaid(msg: KernelMessage.IMessage): void {
    if (msg.header.msg_type === 'execute_input') {
      this._cut.clear(); // the kernel went on: a stop now is not what cut those turns
      return;
    }
    const cut = cutTurn(msg.header.msg_type, msg.content);
    if (cut) {
      this._cut.set(markerKey(cut), cut);
    }
  }

  /** Whether this cell shows a turn cut off since the kernel last ran a cell. */
  private _wasCut(cell: Cell): boolean {
    const outputs = (cell.model as Partial<ICodeCellModel>).outputs;
    if (!this._cut.size || !outputs) {
      return false;
    }
    const shown = markersOf(outputs.toJSON() as unknown as JSONObject[]);
    return shown.some(marker => this._cut.has(markerKey(marker)));
  }

  private _cancel(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _notices = new Map<string, Widget>();
  private _cut = new Map<string, IMarker>(); // turns cut off since the kernel last ran a cell, by marker
}

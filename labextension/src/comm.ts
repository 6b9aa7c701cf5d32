/**
 * One notebook's end of the `nbagent.cells` comm: opened when its kernel is ready (again after a restart, and after
 * a cell naming nbagent ran while there was no comm), every message checked, each request answered. The kernel
 * keeps one comm per page; a question waiting is shown by approvals.ts, a kernel gone by gone.ts.
 */

import type { ICodeCellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';

import { Approvals } from './approvals';
import { applyEdit, CellsError, insertCells, readCells } from './cells';
import { KernelWatch } from './gone';
import { LiveTurns } from './live';
import * as outgoing from './outgoing';
import * as protocol from './protocol';
import { TranscriptFills } from './transcripts';

/** How the notebook's comm stands: what the button says. */
export type Status = 'no-kernel' | 'connecting' | 'ready' | 'absent';

/** The outcome of an "Insert as cells" click, for the button to show. */
export type InsertOutcome =
  | { ok: true; inserted: number; skipped: number }
  | { ok: false; error: string };

const ANSWER_TIMEOUT = 60_000; // ms a click waits for the kernel (a running cell delays it)

let counter = 0;
const newId = (): string =>
  `${Date.now().toString(36)}-${(++counter).toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

/** The bridge of one notebook panel (see `bridgeFor`). */
export class CellsBridge {
  status: Status = 'no-kernel';
  readonly approvals: Approvals;
  readonly transcripts: TranscriptFills;
  readonly live: LiveTurns;

  constructor(
    readonly panel: NotebookPanel,
    readonly version: string
  ) {
    this.approvals = new Approvals(panel, message => this._send(message));
    this.live = new LiveTurns(panel); // a running turn this page cannot ask the kernel about (live.ts)
    this.transcripts = new TranscriptFills(
      panel,
      m => this._send(m),
      cells => this.live.settled(cells)
    );
    new KernelWatch(panel, this.approvals);
    const session = panel.sessionContext;
    session.kernelChanged.connect(this._onKernel, this);
    session.statusChanged.connect(this._onStatus, this);
    session.iopubMessage.connect(this._onIOPub, this);
    void session.ready.then(() => this.connect());
    panel.disposed.connect(() => this._close());
  }

  /** Open the comm if the kernel has none open yet (nbagent's target answers once `%load_ext nbagent` ran). */
  connect(): void {
    const kernel = this.panel.sessionContext.session?.kernel;
    if (!kernel) {
      this._setStatus('no-kernel');
      return;
    }
    if (this._comm && !this._comm.isDisposed) {
      return;
    }
    this._setStatus('connecting');
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(protocol.TARGET);
    } catch {
      this._setStatus('absent');
      return;
    }
    this._comm = comm;
    comm.onMsg = msg => this._onMessage(comm, msg);
    comm.onClose = () => {
      if (this._comm === comm) {
        this._comm = null;
        this._setStatus('absent');
      }
    };
    const shared = (this.panel.context.model as any).collaborative === true;
    comm.open(
      outgoing.hello(this.version, this.panel.context.path, shared) as any
    );
    this.live.connected(
      () => this._comm === comm && this.status === 'connecting'
    );
  }

  /** Ask the kernel to insert a turn's work (or one call's, with `toolUseId`); resolves when the cells are in. */
  requestInsert(
    session: string,
    turn: number,
    toolUseId?: string
  ): Promise<InsertOutcome> {
    if (this.status !== 'ready') {
      this.connect();
      return Promise.resolve({
        ok: false,
        error:
          this.status === 'no-kernel'
            ? 'no kernel: start it and run %load_ext nbagent first'
            : 'the kernel has no nbagent comm yet: run the %load_ext nbagent cell first'
      });
    }
    const id = newId();
    return new Promise(resolve => {
      const timer = setTimeout(() => {
        this._clicks.delete(id);
        resolve({
          ok: false,
          error: 'no answer from the kernel yet (is a cell running?)'
        });
      }, ANSWER_TIMEOUT);
      this._clicks.set(id, {
        session,
        resolve: outcome => {
          clearTimeout(timer);
          this._clicks.delete(id);
          resolve(outcome);
        }
      });
      this._send(outgoing.insertRequest(id, session, turn, toolUseId));
    });
  }

  private _onKernel(): void {
    this._close();
    this.connect();
  }

  private _onStatus(_: unknown, status: Kernel.Status): void {
    if (
      status === 'restarting' ||
      status === 'autorestarting' ||
      status === 'dead'
    ) {
      this._close();
    }
  }

  private _onIOPub(_: unknown, msg: KernelMessage.IMessage): void {
    if (ranCell(msg)) {
      this.live.kernelRan(); // a turn shown live here has ended: its transcript comes as for any finished turn
    }
    if (this.status === 'ready') {
      if (ranCell(msg)) {
        this.transcripts.askSoon(); // a turn may have ended (here or on another page): its cell may lack it
      }
      return;
    }
    // A cell that names nbagent (`%load_ext nbagent`, `import nbagent`, `%agent`) may have loaded it: once it has
    // finished, a notebook without the comm tries again (other cells never make the kernel log a refused comm).
    if (msg.header.msg_type === 'execute_input') {
      const code = (msg as KernelMessage.IExecuteInputMsg).content.code;
      this._retry = this._retry || /nbagent|%%?agent/.test(code);
      return;
    }
    if (this._retry && ranCell(msg)) {
      this._retry = false;
      this.connect();
    }
  }

  private _close(): void {
    const comm = this._comm;
    this._comm = null;
    if (comm && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        // a comm of a kernel that is gone
      }
    }
    this._setStatus(
      this.panel.sessionContext.session?.kernel ? 'connecting' : 'no-kernel'
    );
  }

  private _setStatus(status: Status): void {
    this.status = status;
    this.panel.node.dataset.nbagentCells = status; // for people inspecting the page, and the browser tests
  }

  private _send(message: protocol.JSONObject): void {
    const comm = this._comm;
    if (comm && !comm.isDisposed) {
      comm.send(message as any);
    }
  }

  private _onMessage(comm: Kernel.IComm, msg: KernelMessage.ICommMsgMsg): void {
    if (comm !== this._comm) {
      return;
    }
    const parsed = protocol.parseKernelMessage(msg.content.data);
    if (!parsed.ok) {
      console.warn(
        `nbagent: refused a message from the kernel: ${parsed.error}`
      );
      this._send(outgoing.error(parsed.error, parsed.id));
      return;
    }
    const message = parsed.message;
    const model = this.panel.content.model;
    try {
      switch (message.type) {
        case 'hello':
          this._setStatus('ready');
          this.transcripts.ask();
          break;
        case 'transcripts':
          this.transcripts.received(message);
          break;
        case 'insert': {
          if (!model) {
            throw new CellsError('the notebook is not loaded');
          }
          const result = insertCells(
            model.sharedModel,
            message.session,
            message.anchor_cell_id,
            message.cells
          );
          this._send(
            outgoing.inserted(
              message.id,
              message.session,
              result.cells,
              result.skipped
            )
          );
          this._settle(message.id, message.session, {
            ok: true,
            inserted: result.cells.length,
            skipped: result.skipped.length
          });
          break;
        }
        case 'read_request': {
          if (!model) {
            throw new CellsError('the notebook is not loaded');
          }
          const widgets = this.panel.content.widgets;
          const cells = readCells(model.sharedModel, index => {
            const cellModel = widgets[index]?.model as
              ICodeCellModel | undefined;
            return Boolean(cellModel && (cellModel as any).isDirty);
          });
          this._send(
            outgoing.notebook(message.id, this.panel.context.path, cells)
          );
          break;
        }
        case 'apply_edit': {
          if (!model) {
            throw new CellsError('the notebook is not loaded');
          }
          const reason = applyEdit(
            model.sharedModel,
            message.cell_id,
            message.old_source,
            message.new_source
          );
          this._send(
            reason === null
              ? outgoing.editResult(message.id, true)
              : outgoing.editResult(message.id, false, reason)
          );
          if (reason === null && message.offer_run) {
            this.approvals.edits.offerRun(message.cell_id); // an accepted --fix: run it on a click
          }
          break;
        }
        case 'approval_waiting':
          this.approvals.waiting(message);
          break;
        case 'approval_decided':
          this.approvals.decided(message);
          break;
        case 'error':
          if (message.id !== undefined) {
            this._settle(message.id, undefined, {
              ok: false,
              error: message.error
            });
          } else {
            console.warn(
              `nbagent: the kernel refused a message: ${message.error}`
            );
          }
          break;
      }
    } catch (reason) {
      const text =
        reason instanceof CellsError
          ? reason.message
          : `the browser failed on this message (${(reason as Error)?.name ?? 'error'})`;
      if (!(reason instanceof CellsError)) {
        console.error('nbagent: the cells comm failed', reason);
      }
      const id = 'id' in message ? message.id : undefined;
      this._send(outgoing.error(text, id));
      if (message.type === 'insert') {
        this._settle(message.id, message.session, { ok: false, error: text });
      }
    }
  }

  /** Tell the click waiting for this answer: the one whose request id it echoes, else the oldest of the session. */
  private _settle(
    id: string,
    session: string | undefined,
    outcome: InsertOutcome
  ): void {
    let click = this._clicks.get(id);
    if (!click && session !== undefined) {
      click = [...this._clicks.values()].find(c => c.session === session);
    }
    click?.resolve(outcome);
  }

  private _comm: Kernel.IComm | null = null;
  private _retry = false; // a cell naming nbagent ran while there was no comm
  private _clicks = new Map<
    string,
    { session: string; resolve: (outcome: InsertOutcome) => void }
  >();
}

/** Whether an iopub message is the kernel going idle after a cell ran. */
function ranCell(msg: KernelMessage.IMessage): boolean {
  return (
    msg.header.msg_type === 'status' &&
    (msg as KernelMessage.IStatusMsg).content.execution_state === 'idle' &&
    (msg.parent_header as Partial<KernelMessage.IHeader>)?.msg_type ===
      'execute_request'
  );
}

const bridges = new WeakMap<NotebookPanel, CellsBridge>();

/** The bridge of a notebook panel, made on first use. */
export function bridgeFor(panel: NotebookPanel, version: string): CellsBridge {
  let bridge = bridges.get(panel);
  if (!bridge) {
    bridge = new CellsBridge(panel, version);
    bridges.set(panel, bridge);
  }
  return bridge;
}

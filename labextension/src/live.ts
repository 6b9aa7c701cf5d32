/**
 * A running turn shown live, read-only, on a page that cannot ask the kernel (docs/notebook.md, "Reopening a
 * notebook, a second tab"): while a turn runs with no question waiting, the kernel reads no comm message, so a page
 * opened meanwhile gets no `hello`. When this page connects to a busy kernel, or its `hello` is not answered within
 * a moment, it asks the Jupyter server's nbagent API for the notebook's sessions (`open_turn`, docs/server.md) and
 * shows each running turn under its cell: an overlay (no part of the notebook model) fed by the session's event
 * stream, each event's HTML (sanitized by the server, nh3) rendered by the notebook's own `text/html` renderer,
 * untrusted, streamed text set as text only. When the stream says the turn ended, or the kernel finished a cell, it
 * stops following and stays until the turn's transcript is in its place: written into the cell (its outputs change),
 * shown read-only under it, or not sent for it by the kernel (transcripts.ts: `settled`), so the cell is never empty
 * in between.
 */

import type { Cell } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { Panel, Widget } from '@lumino/widgets';

import { sanitizedHtml } from './answer';
import { ACTIVITY, placeUnder } from './approvals';
import {
  ILiveCell,
  ILiveTurn,
  openTurns,
  step,
  streamUrl,
  turnsToShow
} from './liverules';

export const LIVE_NOTE =
  'live, read-only: this turn runs in the kernel; its transcript is written here when it ends';
export const ENDED_NOTE =
  'read-only: this turn ended; its transcript takes this place as soon as the kernel sends it';
export const HELLO_WAIT = 2000; // ms a page waits for the kernel's hello before it asks the server

/** One running turn under its cell, fed by the session's stream; read-only (no button, nothing in the model). */
export class LiveOverlay extends Panel {
  constructor(
    readonly turn: ILiveTurn,
    private readonly _panel: NotebookPanel,
    url: string
  ) {
    super();
    this.addClass('nbagent-live-overlay');
    this.node.dataset.session = turn.session;
    this.node.setAttribute('aria-live', 'polite');
    this._note = new Widget();
    this._note.addClass('nbagent-live-note');
    this._note.node.textContent = LIVE_NOTE;
    this.addWidget(this._note);
    this._source = new EventSource(url, { withCredentials: true });
    this._source.onmessage = message => this._received(message.data);
    this._source.onerror = () => {
      if (this._source.readyState === EventSource.CLOSED) {
        this.dispose(); // an HTTP error (the session gone, the server refused): nothing more comes
      }
    };
  }

  /** Whether the turn ended (the overlay waits for its transcript). */
  get ended(): boolean {
    return this._ended;
  }

  /** The turn ended: stop following it, keep what it showed until its transcript takes its place. */
  end(): void {
    if (this._ended || this.isDisposed) {
      return;
    }
    this._ended = true;
    this._source.close();
    this._note.node.textContent = ENDED_NOTE;
    this.addClass('nbagent-live-ended');
  }

  /** Close the stream with the overlay. */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._source.close();
    super.dispose();
  }

  private _received(data: string): void {
    let record: unknown;
    try {
      record = JSON.parse(data);
    } catch {
      return;
    }
    const next = step(record, this.turn.seq);
    switch (next.kind) {
      case 'skip':
        return;
      case 'text':
        if (!this._streamed) {
          this._streamed = new Widget();
          this._streamed.addClass('nbagent-live-stream');
          this.addWidget(this._streamed);
        }
        this._streamed.node.textContent += next.text;
        return;
      case 'html':
      case 'end':
        if (next.endsStream) {
          this._streamed?.dispose();
          this._streamed = null;
        }
        this._html(next.html);
        if (next.kind === 'end') {
          this.end(); // transcripts.ts writes (or shows) the finished turn once the kernel answers
        }
        return;
    }
  }

  private _html(html: string): void {
    if (!html) {
      return;
    }
    const renderer = sanitizedHtml(this._panel, html); // sanitized again (nh3 did already)
    const at = this._streamed
      ? this.widgets.indexOf(this._streamed)
      : this.widgets.length;
    this.insertWidget(at, renderer); // before the text streaming now, if any
  }

  private _source: EventSource;
  private _note: Widget;
  private _streamed: Widget | null = null;
  private _ended = false;
}

/** One notebook page's live views of running turns. */
export class LiveTurns {
  constructor(readonly panel: NotebookPanel) {
    panel.disposed.connect(() => this.stopAll());
  }

  /** The page opened its comm: look now if the kernel is busy, else if the kernel still had not read it after HELLO_WAIT. */
  connected(unread: () => boolean): void {
    clearTimeout(this._timer);
    const kernel = this.panel.sessionContext.session?.kernel;
    if (kernel?.status === 'busy') {
      void this.look();
      return;
    }
    this._timer = setTimeout(() => {
      if (unread()) {
        void this.look();
      }
    }, HELLO_WAIT);
  }

  /** The kernel finished a cell: the turns shown here have ended (each waits for its transcript), or will be asked about again. */
  kernelRan(): void {
    clearTimeout(this._timer);
    for (const overlay of this._overlays.values()) {
      overlay.end();
    }
  }

  /** The kernel answered which transcripts these cells lack, and they were written or shown: their ended views go. */
  settled(cellIds: ReadonlySet<string>): void {
    for (const overlay of [...this._overlays.values()]) {
      if (overlay.ended && cellIds.has(overlay.turn.cellId)) {
        overlay.dispose();
      }
    }
  }

  /** Ask the server for the notebook's running turns and show those this page can place. */
  async look(): Promise<void> {
    const path = this.panel.context.path;
    const settings =
      this.panel.sessionContext.session?.serverSettings ??
      ServerConnection.makeSettings();
    const base = settings.baseUrl.endsWith('/')
      ? settings.baseUrl
      : settings.baseUrl + '/';
    let body: unknown;
    try {
      const reply = await ServerConnection.makeRequest(
        `${base}nbagent/api/sessions?path=${encodeURIComponent(path)}`,
        {},
        settings
      );
      if (!reply.ok) {
        return; // no nbagent server extension, or no session of this notebook yet
      }
      body = await reply.json();
    } catch {
      return;
    }
    if (this.panel.isDisposed) {
      return;
    }
    const cells: ILiveCell[] = this.panel.content.widgets
      .filter(cell => cell.model.type === 'code')
      .map(cell => ({
        id: cell.model.id,
        source: cell.model.sharedModel.getSource(),
        hasLivePanel: cell.node.querySelector(ACTIVITY) !== null
      }));
    for (const turn of turnsToShow(openTurns(body), cells)) {
      const key = `${turn.cellId}\n${turn.session}\n${turn.seq}`;
      const cell = this._cell(turn.cellId);
      if (!cell || this._overlays.has(key)) {
        continue;
      }
      const token = settings.appendToken ? settings.token : '';
      const overlay = new LiveOverlay(
        turn,
        this.panel,
        streamUrl(base, turn, token)
      );
      this._overlays.set(key, overlay);
      overlay.disposed.connect(() => this._overlays.delete(key));
      placeUnder(cell, overlay); // it goes when the cell's outputs change (the transcript written, or the cell run)
    }
    this.panel.node.dataset.nbagentLive = String(this._overlays.size); // for people inspecting the page, and the tests
  }

  /** Close every live view of this page. */
  stopAll(): void {
    for (const overlay of [...this._overlays.values()]) {
      overlay.dispose();
    }
  }

  private _cell(id: string): Cell | undefined {
    return this.panel.content.widgets.find(cell => cell.model.id === id);
  }

  private _timer: ReturnType<typeof setTimeout> | undefined;
  private _overlays = new Map<string, LiveOverlay>();
}

/**
 * A running turn shown live, read-only, on a page that cannot ask the kernel (docs/notebook.md, "Reopening a
 * notebook, a second tab"): while a turn runs with no question waiting, the kernel reads no comm message, so a page
 * opened meanwhile gets no `hello`. When this page connects to a busy kernel, or its `hello` is not answered within
 * a moment, it asks the Jupyter server's nbagent API for the notebook's sessions (`open_turn`, docs/server.md) and
 * shows each running turn under its cell: an overlay (no part of the notebook model) fed by the session's event
 * stream, each event's HTML (sanitized by the server, nh3) rendered by the notebook's own `text/html` renderer,
 * untrusted, streamed text set as text only. It goes when the stream says the turn ended, or the kernel finished
 * a cell; transcripts.ts then writes (or shows) the transcript as for any finished turn.
 */

import type { Cell } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { MimeModel } from '@jupyterlab/rendermime';
import { ServerConnection } from '@jupyterlab/services';
import { Panel, Widget } from '@lumino/widgets';

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
    const note = new Widget();
    note.addClass('nbagent-live-note');
    note.node.textContent = LIVE_NOTE;
    this.addWidget(note);
    this._source = new EventSource(url, { withCredentials: true });
    this._source.onmessage = message => this._received(message.data);
    this._source.onerror = () => {
      if (this._source.readyState === EventSource.CLOSED) {
        this.dispose(); // an HTTP error (the session gone, the server refused): nothing more comes
      }
    };
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
        if (next.endsStream) {
          this._streamed?.dispose();
          this._streamed = null;
        }
        this._html(next.html);
        return;
      case 'end':
        this.dispose(); // transcripts.ts writes (or shows) the finished turn once the kernel answers
        return;
    }
  }

  private _html(html: string): void {
    if (!html) {
      return;
    }
    const renderer = this._panel.content.rendermime.createRenderer('text/html');
    // Untrusted: JupyterLab's sanitizer keeps the markup and drops any script, style or handler (nh3 did already).
    void renderer.renderModel(
      new MimeModel({ data: { 'text/html': html }, trusted: false })
    );
    const at = this._streamed
      ? this.widgets.indexOf(this._streamed)
      : this.widgets.length;
    this.insertWidget(at, renderer); // before the text streaming now, if any
  }

  private _source: EventSource;
  private _streamed: Widget | null = null;
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

  /** The kernel finished a cell: the turns shown here have ended, or will be asked about again. */
  kernelRan(): void {
    clearTimeout(this._timer);
    this.stopAll();
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

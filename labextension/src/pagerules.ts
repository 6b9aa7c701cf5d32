/**
 * The pure rules of the questions shown on every page (approvals.ts) and of a kernel gone (gone.ts): no DOM, no
 * JupyterLab objects, so each has a table test.
 */

import type { Kernel } from '@jupyterlab/services';

import { IMarker, markerOf } from './fillrules';
import type { ApprovalDecided, JSONObject } from './protocol';

/** What an overlay says once its question ended. */
export function decisionWords(
  decision: ApprovalDecided['decision'],
  by: string
): string {
  if (decision === 'interrupted') {
    return 'not answered (interrupted)';
  }
  return by ? `${decision} (${by})` : decision;
}

/**
 * Whether a page draws the question: not where the cell already shows the live panel that asks it, nor where the
 * page shows it at the cell a proposed edit changes (inline.ts: the diff and its own Accept / Reject).
 */
export function drawOverlay(
  cellFound: boolean,
  cellHasLivePanel: boolean,
  anyLivePanel: boolean,
  shownAtTarget = false
): boolean {
  if (shownAtTarget) {
    return false;
  }
  return cellFound ? !cellHasLivePanel : !anyLivePanel;
}

/** What a proposed edit at its cell says beside its label (docs/cells.md, "Proposed edits"). */
export const EDIT_NOTE =
  'Accept applies it as an ordinary edit (Ctrl+Z in the cell undoes it); nothing is run.';
/** What the "Run cell" offer says after an accepted `%agent --fix`. */
export const RUN_NOTE =
  'the fix is in this cell (Ctrl+Z undoes it); it has not run';

export const STOPPED =
  'interrupted: the kernel stopped; run this cell to continue exactly once';
export const LOST =
  'the connection to the kernel was lost: if the kernel stopped, run this cell to continue exactly once';
export const STATUS_STOPPED = 'interrupted (the kernel stopped)';
export const STATUS_LOST = 'connection lost';
export const GRACE_MS = 5000; // a reconnect within this long is a blip, not a lost kernel

/** What the notebook's session reported. */
export type SessionEvent =
  | { kind: 'status'; status: Kernel.Status }
  | { kind: 'connection'; status: Kernel.ConnectionStatus }
  | { kind: 'kernel'; before: boolean; after: boolean };

/** What to do on a session event: mark the panels now, after the grace time, take a "lost" mark back, or nothing. */
export type Reaction = 'stopped' | 'lost-later' | 'back' | null;

/** The rule: which session events mean the kernel running the turn is gone. */
export function reaction(event: SessionEvent): Reaction {
  switch (event.kind) {
    case 'status':
      return ['dead', 'restarting', 'autorestarting'].includes(event.status)
        ? 'stopped'
        : null;
    case 'connection':
      if (event.status === 'disconnected') {
        return 'lost-later';
      }
      return event.status === 'connected' ? 'back' : null;
    case 'kernel':
      return event.before ? 'stopped' : null; // a kernel replaced or shut down; the first one is no change
  }
}

/** A live panel's header status once `words` marked it: its first part (e.g. "streaming") replaced, the token figures kept. */
export function goneStatus(shown: string, words: string): string {
  const dash = shown.startsWith('— ') ? '— ' : '';
  const rest = shown.slice(dash.length).split(' · ').slice(1);
  const now = words === STOPPED ? STATUS_STOPPED : STATUS_LOST;
  return dash + [now, ...rest].join(' · ');
}

/**
 * The turn a kernel message shows ended cut off, as its marker: a panel's final output (`display_data` or its
 * `update_display_data`) whose metadata says `unfinished` (interrupted with work left, nbagent/notebook/output.py).
 * A server stopped with SIGTERM interrupts its kernels before it shuts them down: the live panel ends so before the
 * kernel goes, and the page then marks that cell as it marks a live panel.
 */
export function cutTurn(msgType: string, content: unknown): IMarker | null {
  if (msgType !== 'update_display_data' && msgType !== 'display_data') {
    return null;
  }
  const metadata = (content as JSONObject | null)?.metadata as
    JSONObject | undefined;
  const nbagent = metadata?.nbagent as JSONObject | undefined;
  if (nbagent?.unfinished !== true) {
    return null;
  }
  return markerOf({ metadata } as JSONObject);
}

/** A marker as one string (a map key). */
export function markerKey(marker: IMarker): string {
  return `${marker.session}\n${marker.from}\n${marker.to}`;
}

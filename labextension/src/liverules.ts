/**
 * The pure rules of a running turn shown live on a page that cannot ask the kernel (live.ts): which sessions of the
 * server's listing show under which cell, the stream's URL, and what each streamed record does to the view. No DOM,
 * no JupyterLab objects, so each has a table test.
 */

import { namesAgent } from './fillrules';

/** A running turn of the server's listing (`open_turn` of a row) with the session it is in. */
export interface ILiveTurn {
  notebook: string; // the row's notebook (the stream's first path segment)
  session: string; // the row's name
  seq: number; // the turn's first event (its user_msg)
  cellId: string;
  request: string;
}

/** A code cell of the page, as the rule needs it. */
export interface ILiveCell {
  id: string;
  source: string;
  hasLivePanel: boolean; // its outputs hold a live nbagent panel (`.nbagent-activity`): the cell shows the turn already
}

/** What one streamed record does to the overlay. */
export type LiveStep =
  | { kind: 'skip' } // before the turn, or a record this view does not show
  | { kind: 'text'; text: string } // streamed text, shown as text only
  | { kind: 'html'; html: string; endsStream: boolean } // sanitized HTML (nh3), after ending the streamed text if asked
  | { kind: 'end'; html: string; endsStream: boolean }; // the turn ended (what its last record shows, if any)

type JSONRecord = { [key: string]: unknown };

const isObject = (value: unknown): value is JSONRecord =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const isSeq = (value: unknown): value is number =>
  Number.isInteger(value) && (value as number) >= 1;

/** The running turns of a `GET nbagent/api/sessions?path=` answer (rows without a valid `open_turn` are left out). */
export function openTurns(body: unknown): ILiveTurn[] {
  const rows = isObject(body) ? body.sessions : undefined;
  if (!Array.isArray(rows)) {
    return [];
  }
  const found: ILiveTurn[] = [];
  for (const row of rows) {
    const turn = isObject(row) ? row.open_turn : undefined;
    if (!isObject(row) || !isObject(turn)) {
      continue;
    }
    const { notebook, name } = row;
    const { seq, cell_id, request } = turn;
    if (
      typeof notebook !== 'string' ||
      typeof name !== 'string' ||
      !name ||
      !isSeq(seq) ||
      typeof cell_id !== 'string' ||
      !cell_id ||
      typeof request !== 'string'
    ) {
      continue;
    }
    found.push({ notebook, session: name, seq, cellId: cell_id, request });
  }
  return found;
}

/** A request as compared: up to whitespace (the kernel's `request_key`). */
export function requestKey(text: string): string {
  return text.split(/\s+/).filter(Boolean).join(' ');
}

/**
 * Whether a cell's source still asks `request`: a `%agent` line (or a `%%agent` cell, its first line's rest and its
 * body) ends with it, up to whitespace, after whatever options come first (as the kernel compares them).
 */
export function asksRequest(source: string, request: string): boolean {
  const wanted = requestKey(request);
  if (!wanted || !namesAgent(source)) {
    return false;
  }
  const lines = source.split('\n');
  const cell = /^[ \t]*%%agent(?:[ \t]+(.*))?$/.exec(lines[0]);
  const asked = cell
    ? [[cell[1] ?? '', ...lines.slice(1)].join('\n')]
    : lines
        .map(line => /^[ \t]*%agent(?:[ \t]+(.*))?$/.exec(line))
        .filter((m): m is RegExpExecArray => m !== null)
        .map(m => m[1] ?? '');
  return asked.some(text => {
    const key = requestKey(text);
    return key === wanted || key.endsWith(' ' + wanted);
  });
}

/** The turns to show on this page: one per cell (the latest), whose cell is here, still asks it, and shows no live panel. */
export function turnsToShow(
  turns: readonly ILiveTurn[],
  cells: readonly ILiveCell[]
): ILiveTurn[] {
  const byCell = new Map<string, ILiveTurn>();
  for (const turn of turns) {
    const cell = cells.find(c => c.id === turn.cellId);
    if (!cell || cell.hasLivePanel || !asksRequest(cell.source, turn.request)) {
      continue;
    }
    const shown = byCell.get(turn.cellId);
    if (!shown || shown.seq < turn.seq) {
      byCell.set(turn.cellId, turn);
    }
  }
  return [...byCell.values()];
}

/** The session's stream (server handlers.py), from the event after `since`; `token` only where the page's settings append it. */
export function streamUrl(
  baseUrl: string,
  turn: ILiveTurn,
  token = ''
): string {
  const base = baseUrl.endsWith('/') ? baseUrl : baseUrl + '/';
  const path = `${base}nbagent/api/sessions/${encodeURIComponent(turn.notebook)}/${encodeURIComponent(turn.session)}/stream`;
  const query =
    `since=${turn.seq - 1}` +
    (token ? `&token=${encodeURIComponent(token)}` : '');
  return `${path}?${query}`;
}

/** The listing's status of a session whose last turn ended (server present.py's `session.status`). */
export function ended(status: string): boolean {
  return (
    status === 'complete' ||
    status.startsWith('unfinished: interrupted') ||
    status.startsWith('unfinished: stopped at its budget')
  );
}

/** What one stream record (a parsed SSE `data` line) does to the overlay of the turn that began at `seq`. */
export function step(record: unknown, seq: number): LiveStep {
  if (!isObject(record) || !isSeq(record.seq) || record.seq < seq) {
    return { kind: 'skip' };
  }
  if (record.type === 'user_msg' && record.seq > seq) {
    return { kind: 'end', html: '', endsStream: false }; // a next turn began: this one is over
  }
  const html = typeof record.html === 'string' ? record.html : '';
  const session = isObject(record.session) ? record.session : undefined;
  if (session && typeof session.status === 'string' && ended(session.status)) {
    return { kind: 'end', html, endsStream: Boolean(record.stream) };
  }
  if (typeof record.text === 'string') {
    return { kind: 'text', text: record.text };
  }
  if (!html && !record.stream) {
    return { kind: 'skip' };
  }
  return { kind: 'html', html, endsStream: Boolean(record.stream) };
}

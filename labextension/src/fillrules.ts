/**
 * The pure rules of a finished turn written into its cell (transcripts.ts): which cells a page asks about, the
 * markers their outputs carry, and whether a `transcripts` cell may be written. No DOM, no JupyterLab objects, so
 * each has a table test.
 */

import { safeOutput } from './cells';
import type { IFill, JSONObject, Output } from './protocol';

/** What a final transcript's output says it shows: `metadata.nbagent.final`. */
export interface IMarker {
  session: string;
  from: number;
  to: number;
}

/** A code cell naming `%agent`, as `catch_up` sends it. */
export interface IPageCell {
  id: string;
  source: string;
  markers: IMarker[];
}

/** A cell as it is now, when the kernel's answer comes. */
export interface ICellNow {
  cellType: string;
  source: string;
  markers: IMarker[];
}

export const MAX_MARKERS = 100;

/** Whether a cell's source runs the `%agent` magic (a line magic on some line, or a `%%agent` cell). */
export function namesAgent(source: string): boolean {
  return /^[ \t]*%%?agent(?:[ \t]|$)/m.test(source);
}

const isObject = (value: unknown): value is JSONObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The marker in one output's metadata, if it carries one. */
export function markerOf(output: JSONObject): IMarker | null {
  const meta = output.metadata;
  const nbagent = isObject(meta) ? meta.nbagent : undefined;
  const final = isObject(nbagent) ? nbagent.final : undefined;
  if (!isObject(final)) {
    return null;
  }
  const { session, from, to } = final;
  if (
    typeof session !== 'string' ||
    !Number.isInteger(from) ||
    !Number.isInteger(to)
  ) {
    return null;
  }
  return { session, from: from as number, to: to as number };
}

/** The markers of a cell's outputs (at most MAX_MARKERS). */
export function markersOf(outputs: readonly JSONObject[]): IMarker[] {
  const found: IMarker[] = [];
  for (const output of outputs) {
    const marker = markerOf(output);
    if (marker && found.length < MAX_MARKERS) {
      found.push(marker);
    }
  }
  return found;
}

/** The outputs of a fill as written: display_data only, script MIME types dropped; null if any is of another kind. */
export function cleanOutputs(outputs: readonly Output[]): Output[] | null {
  if (!outputs.length || outputs.some(o => o.output_type !== 'display_data')) {
    return null;
  }
  return outputs.map(safeOutput);
}

/**
 * Why a fill is not written into the cell (null: it is): the cell must still be there as a code cell, with the
 * source the page sent in its `catch_up`, not show the turn already, and the outputs must be the kind a panel shows.
 */
export function skipReason(
  fill: IFill,
  sentSource: string | undefined,
  now: ICellNow | undefined
): string | null {
  if (!now || now.cellType !== 'code') {
    return 'the cell is not in the notebook any more';
  }
  if (sentSource === undefined || now.source !== sentSource) {
    return 'the cell changed since the page asked';
  }
  if (
    now.markers.some(
      m =>
        m.session === fill.session && m.from === fill.from && m.to === fill.to
    )
  ) {
    return 'the cell shows this turn already';
  }
  if (cleanOutputs(fill.outputs) === null) {
    return 'only display outputs are written';
  }
  return null;
}

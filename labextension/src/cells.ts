/**
 * What the kernel's requests do to the notebook's shared model: insert cells, read them, apply an edit.
 *
 * Written against @jupyter/ydoc's public ISharedNotebook (the model JupyterLab and Notebook 7 both edit), so the
 * unit tests run these on a real YNotebook. Every change is one transaction of the model: the user can undo it.
 */

import type {
  ISharedCell,
  ISharedCodeCell,
  ISharedNotebook
} from '@jupyter/ydoc';

import {
  ICellToInsert,
  IInsertedCell,
  INotebookCell,
  JSONObject,
  MAX_OUTPUTS_TEXT,
  Output
} from './protocol';

/** MIME types never written into an inserted cell's outputs: nothing a kernel sends may become script. */
const SCRIPT_TYPES = new Set([
  'application/javascript',
  'text/javascript',
  'application/ecmascript',
  'text/ecmascript'
]);

/** The result of an insert: the cells put in, and the calls already in the notebook. */
export interface IInsertResult {
  cells: IInsertedCell[];
  skipped: string[];
}

/** A request the notebook cannot carry out (the reason goes back to the kernel). */
export class CellsError extends Error {}

/** The nbagent record of a cell (`metadata.nbagent`), when it has one. */
export function record(cell: ISharedCell): JSONObject | undefined {
  const value = cell.getMetadata('nbagent');
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as JSONObject)
    : undefined;
}

/** The tool_use_ids whose cells are in the notebook now. */
export function presentCalls(notebook: ISharedNotebook): Set<string> {
  const found = new Set<string>();
  for (const cell of notebook.cells) {
    const id = record(cell)?.tool_use_id;
    if (typeof id === 'string') {
      found.add(id);
    }
  }
  return found;
}

/** An output as written into the notebook: script MIME types left out of its bundle. */
export function safeOutput(output: Output): Output {
  if (!('data' in output)) {
    return output;
  }
  const data: JSONObject = {};
  for (const [mime, value] of Object.entries(output.data as JSONObject)) {
    if (!SCRIPT_TYPES.has(mime.toLowerCase())) {
      data[mime] = value;
    }
  }
  return { ...output, data };
}

/**
 * Insert the cells below the cell `anchorId` (after the cells of this session already there), in order, leaving out
 * a cell whose tool_use_id is already in the notebook; one transaction.
 */
export function insertCells(
  notebook: ISharedNotebook,
  session: string,
  anchorId: string,
  cells: ICellToInsert[]
): IInsertResult {
  const anchor = notebook.cells.findIndex(cell => cell.id === anchorId);
  if (anchor < 0) {
    throw new CellsError(
      'the %agent cell is not in the notebook any more: nothing was inserted'
    );
  }
  let at = anchor + 1;
  while (
    at < notebook.cells.length &&
    record(notebook.cells[at])?.session === session
  ) {
    at++;
  }
  const present = presentCalls(notebook);
  const skipped: string[] = [];
  const fresh: ICellToInsert[] = [];
  for (const cell of cells) {
    if (present.has(cell.tool_use_id)) {
      skipped.push(cell.tool_use_id);
    } else {
      present.add(cell.tool_use_id);
      fresh.push(cell);
    }
  }
  if (!fresh.length) {
    return { cells: [], skipped };
  }
  const made = fresh.map(cell =>
    cell.cell_type === 'code'
      ? {
          cell_type: 'code' as const,
          source: cell.source,
          metadata: cell.metadata,
          outputs: cell.outputs.map(safeOutput),
          execution_count: null
        }
      : {
          cell_type: 'markdown' as const,
          source: cell.source,
          metadata: cell.metadata
        }
  );
  notebook.insertCells(at, made as any); // one transaction of the model (YNotebook.insertCells makes it)
  return {
    cells: fresh.map((cell, i) => ({
      tool_use_id: cell.tool_use_id,
      cell_id: notebook.cells[at + i].id,
      index: at + i
    })),
    skipped
  };
}

/** The text of a cell's outputs: streams, text/plain of results and displays, errors' name and value. */
export function outputsText(outputs: readonly JSONObject[]): string {
  const join = (value: unknown): string =>
    Array.isArray(value)
      ? value.join('')
      : typeof value === 'string'
        ? value
        : '';
  const parts: string[] = [];
  for (const output of outputs) {
    switch (output.output_type) {
      case 'stream':
        parts.push(join(output.text));
        break;
      case 'display_data':
      case 'execute_result': {
        const data = (output.data ?? {}) as JSONObject;
        const text = join(data['text/plain']);
        parts.push(
          text
            ? text + '\n'
            : `[${Object.keys(data).join(', ') || 'empty output'}]\n`
        );
        break;
      }
      case 'error':
        parts.push(`${join(output.ename)}: ${join(output.evalue)}\n`);
        break;
    }
  }
  return clip(parts.join(''), MAX_OUTPUTS_TEXT);
}

/** A text kept to `limit` characters: its head and tail, the middle counted. */
export function clip(text: string, limit: number): string {
  if (text.length <= limit) {
    return text;
  }
  const note = `\n… ${text.length - limit} characters left out …\n`;
  const keep = Math.max(0, limit - note.length);
  const head = Math.ceil(keep / 2);
  return text.slice(0, head) + note + text.slice(text.length - (keep - head));
}

/** The notebook's cells as they are now (`dirty(i)`: whether code cell i was edited since it last ran). */
export function readCells(
  notebook: ISharedNotebook,
  dirty: (index: number) => boolean
): INotebookCell[] {
  return notebook.cells.map((cell, index) => {
    const code = cell.cell_type === 'code' ? (cell as ISharedCodeCell) : null;
    return {
      id: cell.id,
      cell_type: cell.cell_type,
      source: cell.getSource(),
      execution_count: code ? (code.execution_count ?? null) : null,
      outputs_text: code ? outputsText(code.getOutputs() as JSONObject[]) : '',
      dirty: code ? dirty(index) : false
    };
  });
}

/**
 * Set a cell's source to `newSource` if it is still `oldSource`; only the changed middle is replaced, in one
 * transaction of the cell, so the user's Undo restores it. The reason when it was not applied.
 */
export function applyEdit(
  notebook: ISharedNotebook,
  cellId: string,
  oldSource: string,
  newSource: string
): string | null {
  const cell = notebook.cells.find(c => c.id === cellId);
  if (!cell) {
    return 'the cell is not in the notebook any more';
  }
  const current = cell.getSource();
  if (current !== oldSource) {
    return 'the cell changed since the proposal';
  }
  let start = 0;
  while (
    start < current.length &&
    start < newSource.length &&
    current[start] === newSource[start]
  ) {
    start++;
  }
  let end = 0;
  while (
    end < current.length - start &&
    end < newSource.length - start &&
    current[current.length - 1 - end] === newSource[newSource.length - 1 - end]
  ) {
    end++;
  }
  cell.updateSource(
    start,
    current.length - end,
    newSource.slice(start, newSource.length - end)
  );
  return null;
}

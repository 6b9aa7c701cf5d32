/**
 * The messages this extension sends to the kernel on the `nbagent.cells` comm (docs/cells.md lists them);
 * what the kernel sends is checked in protocol.ts.
 */
import type { IPageCell } from './fillrules';
import {
  IInsertedCell,
  INotebookCell,
  JSONObject,
  MAX_TEXT,
  VERSION
} from './protocol';

const MAX_PATH = 4096;

/** The first message on a new comm: the extension's version, the notebook's path, whether its document is shared (RTC). */
export function hello(
  extension: string,
  path?: string,
  collaborative?: boolean
): JSONObject {
  const message: JSONObject = {
    v: VERSION,
    type: 'hello',
    extension: extension.slice(0, MAX_TEXT)
  };
  if (path !== undefined && path.length <= MAX_PATH) {
    message.path = path;
  }
  if (collaborative !== undefined) {
    message.collaborative = collaborative;
  }
  return message;
}

/** A page's `%agent` cells, for the kernel to say which finished turns they lack (`transcripts`). */
export function catchUp(id: string, cells: IPageCell[]): JSONObject {
  return { v: VERSION, type: 'catch_up', id, cells: cells as any };
}

/** The reply to `transcripts`: the cells written into the notebook, and those left as they were. */
export function transcriptsWritten(
  id: string,
  written: string[],
  skipped: string[]
): JSONObject {
  return { v: VERSION, type: 'transcripts_written', id, written, skipped };
}

/** The user pressed "Insert as cells" (all of a turn, or one call's button with `toolUseId`). */
export function insertRequest(
  id: string,
  session: string,
  turn: number,
  toolUseId?: string
): JSONObject {
  const message: JSONObject = {
    v: VERSION,
    type: 'insert_request',
    id,
    session,
    turn
  };
  if (toolUseId !== undefined) {
    message.tool_use_id = toolUseId;
  }
  return message;
}

/** The reply to `insert`. */
export function inserted(
  id: string,
  session: string,
  cells: IInsertedCell[],
  skipped: string[]
): JSONObject {
  return { v: VERSION, type: 'inserted', id, session, cells, skipped };
}

/** The reply to `read_request`. */
export function notebook(
  id: string,
  path: string,
  cells: INotebookCell[]
): JSONObject {
  return { v: VERSION, type: 'notebook', id, path, cells };
}

/** The reply to `apply_edit`. */
export function editResult(
  id: string,
  ok: boolean,
  reason?: string
): JSONObject {
  const message: JSONObject = { v: VERSION, type: 'edit_result', id, ok };
  if (reason !== undefined) {
    message.reason = reason.slice(0, MAX_TEXT);
  }
  return message;
}

/** The user's answer to a question waiting (`approval_waiting`), from this page. */
export function approvalAnswer(
  id: string,
  session: string,
  toolUseId: string,
  approved: boolean
): JSONObject {
  return {
    v: VERSION,
    type: 'approval_answer',
    id,
    session,
    tool_use_id: toolUseId,
    approved
  };
}

/** A refused message's answer (its id echoed when it had a usable one). */
export function error(text: string, id?: string): JSONObject {
  const message: JSONObject = {
    v: VERSION,
    type: 'error',
    error: text.slice(0, MAX_TEXT)
  };
  if (id !== undefined) {
    message.id = id;
  }
  return message;
}

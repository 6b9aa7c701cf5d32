/**
 * The messages this extension sends to the kernel on the `nbagent.cells` comm (docs/cells.md lists them);
 * what the kernel sends is checked in protocol.ts.
 */
import {
  IInsertedCell,
  INotebookCell,
  JSONObject,
  MAX_TEXT,
  VERSION
} from './protocol';

/** The first message on a new comm. */
export function hello(extension: string): JSONObject {
  return { v: VERSION, type: 'hello', extension: extension.slice(0, MAX_TEXT) };
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

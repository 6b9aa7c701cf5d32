/**
 * The `nbagent.cells` comm protocol, version 1 (docs/cells.md): the shapes, and one check for every message.
 *
 * Pure functions only: nothing here touches the notebook or the kernel, so every rule has a table test.
 */

import {
  anyObject,
  Check,
  intAtLeast,
  isObject,
  list,
  object,
  oneOf,
  str
} from './checks';

/** This extension's version (package.json's; a unit test checks they agree), sent in `hello`. */
export const EXTENSION_VERSION = '0.1.0';
export const TARGET = 'nbagent.cells';
export const VERSION = 1;
export const MAX_ID = 200; // characters of an id, a session name, a cell id, a tool_use_id
export const MAX_TEXT = 1000; // characters of a reason, an error, a version
export const MAX_SOURCE = 1_000_000; // characters of one cell's source
export const MAX_OUTPUTS_TEXT = 20_000; // characters of one cell's outputs as text (clipped here)
export const MAX_CELLS = 10_000; // cells in one message
export const MAX_OUTPUTS = 1000; // outputs of one inserted cell
export const MAX_OUTPUT_CHARS = 20_000_000; // characters of one inserted cell's outputs, as JSON
export const MAX_HTML = 5_000_000; // characters of an approval question's HTML

/** A JSON object. */
export type JSONObject = { [key: string]: unknown };

/** One nbformat 4 output, as the kernel recorded it. */
export type Output = JSONObject & { output_type: string };

/** A cell the kernel asks to insert. */
export interface ICellToInsert {
  tool_use_id: string;
  cell_type: 'code' | 'markdown';
  source: string;
  outputs: Output[];
  metadata: JSONObject;
}

/** What the kernel may send. */
export type KernelMessage =
  | { v: 1; type: 'hello'; nbagent: string }
  | {
      v: 1;
      type: 'insert';
      id: string;
      session: string;
      anchor_cell_id: string;
      cells: ICellToInsert[];
    }
  | { v: 1; type: 'read_request'; id: string }
  | {
      v: 1;
      type: 'apply_edit';
      id: string;
      cell_id: string;
      old_source: string;
      new_source: string;
      offer_run?: boolean;
    }
  | {
      v: 1;
      type: 'approval_waiting';
      session: string;
      tool_use_id: string;
      question_html: string;
      cell_id?: string;
      edit?: IProposedEdit;
    }
  | {
      v: 1;
      type: 'approval_decided';
      session: string;
      tool_use_id: string;
      decision: 'approved' | 'declined' | 'interrupted';
      by: string;
    }
  | { v: 1; type: 'error'; id?: string; error: string }
  | { v: 1; type: 'transcripts'; id: string; write: boolean; cells: IFill[] };

/** A proposed cell edit a question asks about: the cell it changes, and its diff (HTML, shown at that cell). */
export interface IProposedEdit {
  cell_id: string;
  diff_html: string;
}

/** A finished turn for a cell that lacks it: the outputs the cell would show (docs/cells.md, `transcripts`). */
export interface IFill {
  id: string;
  session: string;
  from: number;
  to: number;
  outputs: Output[];
}

/** A question waiting, as `approval_waiting` says it; how it ended, as `approval_decided` says. */
export type ApprovalWaiting = Extract<
  KernelMessage,
  { type: 'approval_waiting' }
>;
export type ApprovalDecided = Extract<
  KernelMessage,
  { type: 'approval_decided' }
>;

/** An inserted cell, as reported back in `inserted`. */
export interface IInsertedCell {
  tool_use_id: string;
  cell_id: string;
  index: number;
}

/** A cell of the live notebook, as sent in `notebook`. */
export interface INotebookCell {
  id: string;
  cell_type: string;
  source: string;
  execution_count: number | null;
  outputs_text: string;
  dirty: boolean;
}

/** The parse of a message: the message, or what is wrong with it (and its id, when it had a usable one). */
export type Parsed =
  | { ok: true; message: KernelMessage }
  | { ok: false; error: string; id?: string };

const ID = str(MAX_ID);
const TEXT = str(MAX_TEXT);
const SOURCE = str(MAX_SOURCE);
const MULTILINE: Check = value =>
  typeof value === 'string' ||
  (Array.isArray(value) && value.every(line => typeof line === 'string'))
    ? ''
    : 'a string or a list of strings';
const MIME_BUNDLE: Check = value =>
  isObject(value) ? '' : 'a MIME bundle (an object)';
const BOOL: Check = value =>
  typeof value === 'boolean' ? '' : 'true or false';
const OPTIONAL_COUNT: Check = value =>
  value === null ? '' : intAtLeast(0)(value);

/** nbformat 4's four output types, each with its own keys. */
const OUTPUT_RULES: Record<string, Check> = {
  stream: object({
    output_type: oneOf('stream'),
    name: oneOf('stdout', 'stderr'),
    text: MULTILINE
  }),
  display_data: object(
    { output_type: oneOf('display_data'), data: MIME_BUNDLE },
    { metadata: anyObject, transient: anyObject }
  ),
  execute_result: object(
    {
      output_type: oneOf('execute_result'),
      data: MIME_BUNDLE,
      execution_count: OPTIONAL_COUNT
    },
    { metadata: anyObject }
  ),
  error: object({
    output_type: oneOf('error'),
    ename: TEXT,
    evalue: str(MAX_SOURCE),
    traceback: list(str(MAX_SOURCE), 10_000)
  })
};

const OUTPUT: Check = value => {
  if (!isObject(value) || typeof value.output_type !== 'string') {
    return 'an nbformat output (an object with an output_type)';
  }
  const rule = OUTPUT_RULES[value.output_type];
  return rule
    ? rule(value)
    : `an output of type ${Object.keys(OUTPUT_RULES).join(', ')}`;
};

const OUTPUTS: Check = value => {
  const wrong = list(OUTPUT, MAX_OUTPUTS)(value);
  if (wrong) {
    return wrong;
  }
  return JSON.stringify(value).length <= MAX_OUTPUT_CHARS
    ? ''
    : `outputs of at most ${MAX_OUTPUT_CHARS} characters`;
};

const FILL = object({
  id: ID,
  session: ID,
  from: intAtLeast(0),
  to: intAtLeast(0),
  outputs: OUTPUTS
});

const CELL = object({
  tool_use_id: ID,
  cell_type: oneOf('code', 'markdown'),
  source: SOURCE,
  outputs: OUTPUTS,
  metadata: anyObject
});

/** What the kernel may send: type -> [required keys, optional keys] besides `v` and `type`. */
const FROM_KERNEL: Record<
  string,
  [Record<string, Check>, Record<string, Check>]
> = {
  hello: [{ nbagent: TEXT }, {}],
  insert: [
    {
      id: ID,
      session: ID,
      anchor_cell_id: ID,
      cells: list(CELL, MAX_CELLS)
    },
    {}
  ],
  read_request: [{ id: ID }, {}],
  apply_edit: [
    { id: ID, cell_id: ID, old_source: SOURCE, new_source: SOURCE },
    { offer_run: BOOL }
  ],
  approval_waiting: [
    { session: ID, tool_use_id: ID, question_html: str(MAX_HTML) },
    { cell_id: ID, edit: object({ cell_id: ID, diff_html: str(MAX_HTML) }) }
  ],
  approval_decided: [
    {
      session: ID,
      tool_use_id: ID,
      decision: oneOf('approved', 'declined', 'interrupted'),
      by: ID
    },
    {}
  ],
  error: [{ error: TEXT }, { id: ID }],
  transcripts: [
    {
      id: ID,
      write: BOOL,
      cells: list(FILL, MAX_CELLS)
    },
    {}
  ]
};

/** The id of a message, when it has one that is a short string (to echo in an error). */
export function messageId(data: unknown): string | undefined {
  const id = isObject(data) ? data.id : undefined;
  return typeof id === 'string' && id.length <= MAX_ID ? id : undefined;
}

/** Check a message from the kernel: the message if it is of a documented shape, else what is wrong with it. */
export function parseKernelMessage(data: unknown): Parsed {
  const id = messageId(data);
  const refuse = (error: string): Parsed =>
    id === undefined ? { ok: false, error } : { ok: false, error, id };
  if (!isObject(data)) {
    return refuse('a message must be a JSON object');
  }
  if (data.v !== VERSION) {
    return refuse(`a message needs 'v' = ${VERSION}`);
  }
  if (typeof data.type !== 'string' || !(data.type in FROM_KERNEL)) {
    return refuse(
      `unknown message type ${JSON.stringify(String(data.type)).slice(0, 42)}`
    );
  }
  const [required, optional] = FROM_KERNEL[data.type];
  const header = { v: () => '', type: () => '' };
  const wrong = object({ ...required, ...header }, optional)(data);
  if (wrong) {
    return refuse(`${data.type}: must be ${wrong}`);
  }
  if (data.type === 'insert') {
    const cells = data.cells as ICellToInsert[];
    const wrongMeta = cells.findIndex(
      cell =>
        !ownMetadata(cell.metadata, data.session as string, cell.tool_use_id)
    );
    if (wrongMeta >= 0) {
      return refuse(
        `insert: cell ${wrongMeta}'s metadata must be {"nbagent": {"session", "tool_use_id", "turn"}} naming this session and call`
      );
    }
  }
  return { ok: true, message: data as KernelMessage };
}

/** Whether a cell's metadata is exactly nbagent's record of this session and call (nothing else is written). */
export function ownMetadata(
  metadata: JSONObject,
  session: string,
  toolUseId: string
): boolean {
  const keys = Object.keys(metadata);
  const record = metadata.nbagent;
  return (
    keys.length === 1 &&
    keys[0] === 'nbagent' &&
    object({ session: ID, tool_use_id: ID, turn: intAtLeast(1) })(record) ===
      '' &&
    (record as JSONObject).session === session &&
    (record as JSONObject).tool_use_id === toolUseId
  );
}

// The button's bundle ---------------------------------------------------------------------------------------

export const MIME_TYPE = 'application/vnd.nbagent.cells+json';

/** What the `%agent` cell's output asks the button to draw. */
export interface IButtonData {
  v: 1;
  session: string;
  turn: number;
  calls: { tool_use_id: string; label: string }[];
}

const BUTTON = object({
  v: value => (value === VERSION ? '' : `${VERSION}`),
  session: ID,
  turn: intAtLeast(1),
  calls: list(object({ tool_use_id: ID, label: TEXT }), MAX_CELLS)
});

/** Check the button's bundle: its data, or what is wrong with it. */
export function parseButtonData(
  data: unknown
): { ok: true; data: IButtonData } | { ok: false; error: string } {
  const wrong = BUTTON(data);
  return wrong
    ? { ok: false, error: `the ${MIME_TYPE} bundle must be ${wrong}` }
    : { ok: true, data: data as IButtonData };
}

/**
 * The comm protocol's checks: every documented shape is accepted, anything else refused with what is wrong.
 */

import * as outgoing from '../outgoing';
import * as protocol from '../protocol';
import packageJson from '../../package.json';

const meta = (session = 's1', id = 'toolu_1') => ({
  nbagent: { session, tool_use_id: id, turn: 1 }
});
const cell = (over: Record<string, unknown> = {}) => ({
  tool_use_id: 'toolu_1',
  cell_type: 'code',
  source: 'x = 1',
  outputs: [{ output_type: 'stream', name: 'stdout', text: '1\n' }],
  metadata: meta(),
  ...over
});
const waiting = (over: Record<string, unknown> = {}) => ({
  v: 1,
  type: 'approval_waiting',
  session: 's1',
  tool_use_id: 'toolu_1',
  question_html: '<div class="nbagent-approval">Run this?</div>',
  ...over
});
const decided = (over: Record<string, unknown> = {}) => ({
  v: 1,
  type: 'approval_decided',
  session: 's1',
  tool_use_id: 'toolu_1',
  decision: 'approved',
  by: 'panel',
  ...over
});
const insert = (over: Record<string, unknown> = {}) => ({
  v: 1,
  type: 'insert',
  id: 'r1',
  session: 's1',
  anchor_cell_id: 'c1',
  cells: [cell()],
  ...over
});

describe('parseKernelMessage accepts the documented shapes', () => {
  it.each([
    ['hello', { v: 1, type: 'hello', nbagent: '0.1.0' }],
    ['insert', insert()],
    ['insert of no cells', insert({ cells: [] })],
    ['read_request', { v: 1, type: 'read_request', id: 'r2' }],
    [
      'apply_edit',
      {
        v: 1,
        type: 'apply_edit',
        id: 'r3',
        cell_id: 'c1',
        old_source: 'a',
        new_source: 'b'
      }
    ],
    ['error with id', { v: 1, type: 'error', id: 'r4', error: 'no' }],
    ['error without id', { v: 1, type: 'error', error: 'no' }],
    [
      'every output type',
      insert({
        cells: [
          cell({
            outputs: [
              { output_type: 'stream', name: 'stderr', text: ['a', 'b'] },
              {
                output_type: 'display_data',
                data: { 'image/png': 'iVBOR' },
                metadata: {}
              },
              {
                output_type: 'execute_result',
                data: { 'text/plain': '3' },
                metadata: {},
                execution_count: null
              },
              {
                output_type: 'error',
                ename: 'KeyError',
                evalue: "'b'",
                traceback: ['line']
              }
            ]
          })
        ]
      })
    ],
    [
      'a markdown cell',
      insert({ cells: [cell({ cell_type: 'markdown', outputs: [] })] })
    ],
    ['approval_waiting', waiting()],
    ['approval_waiting under a cell', waiting({ cell_id: 'c1' })],
    [
      'approval_waiting of a proposed edit',
      waiting({
        cell_id: 'c1',
        edit: { cell_id: 'c2', diff_html: '<pre class="nbagent-diff"></pre>' }
      })
    ],
    [
      'apply_edit offering to run the cell',
      {
        v: 1,
        type: 'apply_edit',
        id: 'r5',
        cell_id: 'c1',
        old_source: 'a',
        new_source: 'b',
        offer_run: true
      }
    ],
    ['approval_decided', decided()],
    ['approval_decided declined', decided({ decision: 'declined' })],
    [
      'approval_decided interrupted',
      decided({ decision: 'interrupted', by: '' })
    ]
  ])('%s', (_, message) => {
    expect(protocol.parseKernelMessage(message)).toEqual({
      ok: true,
      message
    });
  });
});

describe('parseKernelMessage refuses anything else', () => {
  it.each([
    ['not an object', 'hello', 'a JSON object', undefined],
    ['a list', [1], 'a JSON object', undefined],
    ['no version', { type: 'hello', nbagent: '1' }, "'v' = 1", undefined],
    ['version 2', { v: 2, type: 'hello', nbagent: '1' }, "'v' = 1", undefined],
    ['version "1"', { v: '1', type: 'read_request', id: 'r' }, "'v' = 1", 'r'],
    [
      'unknown type',
      { v: 1, type: 'eval', id: 'r' },
      'unknown message type',
      'r'
    ],
    [
      'browser type',
      { v: 1, type: 'inserted', id: 'r' },
      'unknown message type',
      'r'
    ],
    [
      'extra key',
      { v: 1, type: 'read_request', id: 'r', code: 'x' },
      'without the keys code',
      'r'
    ],
    ['missing id', { v: 1, type: 'read_request' }, "with 'id'", undefined],
    [
      'id not a string',
      { v: 1, type: 'read_request', id: 7 },
      "'id' is a string",
      undefined
    ],
    [
      'id too long',
      { v: 1, type: 'read_request', id: 'x'.repeat(201) },
      'at most 200',
      undefined
    ],
    [
      'source too long',
      {
        v: 1,
        type: 'apply_edit',
        id: 'r',
        cell_id: 'c',
        old_source: '',
        new_source: 'x'.repeat(1_000_001)
      },
      "'new_source'",
      'r'
    ],
    [
      'cell type raw',
      insert({ cells: [cell({ cell_type: 'raw' })] }),
      "'cell_type' is one of code, markdown",
      'r1'
    ],
    [
      'cell with extra key',
      insert({ cells: [cell({ execution_count: 3 })] }),
      'without the keys execution_count',
      'r1'
    ],
    [
      'output of unknown type',
      insert({
        cells: [
          cell({ outputs: [{ output_type: 'update_display_data', data: {} }] })
        ]
      }),
      'an output of type',
      'r1'
    ],
    [
      'stream named stdin',
      insert({
        cells: [
          cell({
            outputs: [{ output_type: 'stream', name: 'stdin', text: '' }]
          })
        ]
      }),
      "'name' is one of stdout, stderr",
      'r1'
    ],
    [
      'error without traceback',
      insert({
        cells: [
          cell({ outputs: [{ output_type: 'error', ename: 'E', evalue: '' }] })
        ]
      }),
      "'traceback'",
      'r1'
    ],
    [
      'metadata with more keys',
      insert({ cells: [cell({ metadata: { ...meta(), tags: ['x'] } })] }),
      'metadata must be',
      'r1'
    ],
    [
      'metadata of another session',
      insert({ cells: [cell({ metadata: meta('s2') })] }),
      'metadata must be',
      'r1'
    ],
    [
      'metadata of another call',
      insert({ cells: [cell({ metadata: meta('s1', 'toolu_9') })] }),
      'metadata must be',
      'r1'
    ],
    [
      'metadata turn 0',
      insert({
        cells: [
          cell({
            metadata: {
              nbagent: { session: 's1', tool_use_id: 'toolu_1', turn: 0 }
            }
          })
        ]
      }),
      'metadata must be',
      'r1'
    ],
    [
      'hello without version',
      { v: 1, type: 'hello' },
      "with 'nbagent'",
      undefined
    ],
    [
      'approval_waiting without its question',
      { v: 1, type: 'approval_waiting', session: 's1', tool_use_id: 't' },
      "with 'question_html'",
      undefined
    ],
    [
      'approval_waiting with a script key',
      waiting({ script: 'alert(1)' }),
      'without the keys script',
      undefined
    ],
    [
      'approval_waiting question too long',
      waiting({ question_html: 'x'.repeat(5_000_001) }),
      "'question_html' is a string of at most 5000000",
      undefined
    ],
    [
      'approval_waiting edit without its diff',
      waiting({ edit: { cell_id: 'c2' } }),
      "'edit' is an object with 'diff_html'",
      undefined
    ],
    [
      'approval_waiting edit with a script key',
      waiting({ edit: { cell_id: 'c2', diff_html: '', onload: 'x' } }),
      "'edit' is an object without the keys onload",
      undefined
    ],
    [
      'apply_edit offer_run not a boolean',
      {
        v: 1,
        type: 'apply_edit',
        id: 'r6',
        cell_id: 'c1',
        old_source: 'a',
        new_source: 'b',
        offer_run: 'yes'
      },
      "'offer_run' is true or false",
      'r6'
    ],
    [
      'approval_waiting cell id not a string',
      waiting({ cell_id: 3 }),
      "'cell_id' is a string",
      undefined
    ],
    [
      'approval_decided of another word',
      decided({ decision: 'maybe' }),
      "'decision' is one of approved, declined, interrupted",
      undefined
    ],
    [
      'approval_decided without by',
      {
        v: 1,
        type: 'approval_decided',
        session: 's',
        tool_use_id: 't',
        decision: 'approved'
      },
      "with 'by'",
      undefined
    ],
    [
      "approval_answer is the browser's",
      {
        v: 1,
        type: 'approval_answer',
        id: 'a',
        session: 's',
        tool_use_id: 't',
        approved: true
      },
      'unknown message type',
      'a'
    ],
    [
      'error text too long',
      { v: 1, type: 'error', error: 'e'.repeat(1001) },
      "'error'",
      undefined
    ]
  ])('%s', (_, message, wrong, id) => {
    const parsed = protocol.parseKernelMessage(message);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) {
      expect(parsed.error).toContain(wrong);
      expect(parsed.id).toBe(id);
    }
  });
});

describe('messages to the kernel', () => {
  it('are of the documented shapes', () => {
    expect(outgoing.hello('0.1.0')).toEqual({
      v: 1,
      type: 'hello',
      extension: '0.1.0'
    });
    expect(outgoing.insertRequest('i', 's', 2)).toEqual({
      v: 1,
      type: 'insert_request',
      id: 'i',
      session: 's',
      turn: 2
    });
    expect(outgoing.insertRequest('i', 's', 2, 't')).toEqual({
      v: 1,
      type: 'insert_request',
      id: 'i',
      session: 's',
      turn: 2,
      tool_use_id: 't'
    });
    expect(outgoing.editResult('i', false, 'why')).toEqual({
      v: 1,
      type: 'edit_result',
      id: 'i',
      ok: false,
      reason: 'why'
    });
    expect(outgoing.editResult('i', true)).toEqual({
      v: 1,
      type: 'edit_result',
      id: 'i',
      ok: true
    });
    expect(outgoing.approvalAnswer('a', 's', 't', false)).toEqual({
      v: 1,
      type: 'approval_answer',
      id: 'a',
      session: 's',
      tool_use_id: 't',
      approved: false
    });
    expect(outgoing.error('e'.repeat(2000))).toEqual({
      v: 1,
      type: 'error',
      error: 'e'.repeat(1000)
    });
  });
});

describe('the button bundle', () => {
  const good = {
    v: 1,
    session: 's',
    turn: 1,
    calls: [{ tool_use_id: 't', label: 'ran python · 1 plot' }]
  };
  it('is accepted when well formed', () => {
    expect(protocol.parseButtonData(good)).toEqual({ ok: true, data: good });
  });
  it.each([
    ['a string', 'x'],
    ['turn 0', { ...good, turn: 0 }],
    ['extra key', { ...good, html: '<b>' }],
    ['label not a string', { ...good, calls: [{ tool_use_id: 't', label: 3 }] }]
  ])('is refused when %s', (_, data) => {
    expect(protocol.parseButtonData(data).ok).toBe(false);
  });
});

it("the extension's version is package.json's", () => {
  expect(protocol.EXTENSION_VERSION).toBe(packageJson.version);
});

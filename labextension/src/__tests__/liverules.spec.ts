/**
 * The rules of a running turn shown live under its cell (liverules.ts): pure functions, as tables.
 */

import {
  asksRequest,
  ended,
  ILiveCell,
  ILiveTurn,
  openTurns,
  requestKey,
  step,
  streamUrl,
  turnsToShow
} from '../liverules';

const TURN: ILiveTurn = {
  notebook: 'dir/a b.ipynb',
  session: 's1',
  seq: 14,
  cellId: 'c1',
  request: 'Tell me   something'
};
const ROW = {
  notebook: 'dir/a b.ipynb',
  name: 's1',
  open_turn: { seq: 14, cell_id: 'c1', request: 'Tell me   something' }
};

describe('openTurns', () => {
  it.each([
    ['a running turn', { sessions: [ROW] }, [TURN]],
    ['no open turn', { sessions: [{ ...ROW, open_turn: null }] }, []],
    [
      'no cell id',
      {
        sessions: [{ ...ROW, open_turn: { ...ROW.open_turn, cell_id: null } }]
      },
      []
    ],
    [
      'a seq that is not a whole number',
      { sessions: [{ ...ROW, open_turn: { ...ROW.open_turn, seq: 1.5 } }] },
      []
    ],
    [
      'a seq of zero',
      { sessions: [{ ...ROW, open_turn: { ...ROW.open_turn, seq: 0 } }] },
      []
    ],
    [
      'a request that is not text',
      { sessions: [{ ...ROW, open_turn: { ...ROW.open_turn, request: 3 } }] },
      []
    ],
    ['no name', { sessions: [{ ...ROW, name: '' }] }, []],
    ['rows that are not objects', { sessions: [null, 'x', [ROW]] }, []],
    ['no rows', { message: 'no such notebook' }, []],
    ['not an object', 'sessions', []]
  ])('%s', (_, body, expected) => {
    expect(openTurns(body)).toEqual(expected);
  });
});

describe('asksRequest', () => {
  it.each([
    ['the same request', '%agent Tell me something', true],
    ['up to whitespace', '%agent   Tell me\tsomething  ', true],
    ['after options', '%agent --model opus Tell me something', true],
    ['on a later line', 'x = 1\n%agent Tell me something', true],
    ['a cell magic', '%%agent Tell me\nsomething', true],
    ['a cell magic with options', '%%agent --new\nTell me something', true],
    ['another request', '%agent Tell me more', false],
    ['a longer request', '%agent Tell me something else', false],
    ['a request ending the same', '%agent xTell me something', false],
    ['not an agent cell', 'print("Tell me something")', false],
    ['the request in a comment', '# %agent Tell me something', false]
  ])('%s', (_, source, expected) => {
    expect(asksRequest(source, 'Tell me something')).toBe(expected);
  });

  it('never matches an empty request', () => {
    expect(asksRequest('%agent', '')).toBe(false);
    expect(asksRequest('%agent  ', '  ')).toBe(false);
  });

  it('compares as the kernel does: up to whitespace', () => {
    expect(requestKey(' a\n b\t\tc ')).toBe('a b c');
  });
});

describe('turnsToShow', () => {
  const cell = (over: Partial<ILiveCell> = {}): ILiveCell => ({
    id: 'c1',
    source: '%agent Tell me something',
    hasLivePanel: false,
    ...over
  });
  const later: ILiveTurn = { ...TURN, session: 's2', seq: 30 };
  it.each([
    ['its cell is here', [TURN], [cell()], [TURN]],
    ['no such cell', [TURN], [cell({ id: 'c2' })], []],
    [
      'the cell asks something else now',
      [TURN],
      [cell({ source: '%agent other' })],
      []
    ],
    [
      'the cell shows its live panel',
      [TURN],
      [cell({ hasLivePanel: true })],
      []
    ],
    ['two turns for one cell: the latest', [later, TURN], [cell()], [later]],
    ['no turn', [], [cell()], []]
  ])('%s', (_, turns, cells, expected) => {
    expect(turnsToShow(turns, cells)).toEqual(expected);
  });
});

describe('streamUrl', () => {
  it.each([
    ['/', '', '/nbagent/api/sessions/dir%2Fa%20b.ipynb/s1/stream?since=13'],
    [
      '/base',
      '',
      '/base/nbagent/api/sessions/dir%2Fa%20b.ipynb/s1/stream?since=13'
    ],
    [
      'http://h:8888/',
      't&k',
      'http://h:8888/nbagent/api/sessions/dir%2Fa%20b.ipynb/s1/stream?since=13&token=t%26k'
    ]
  ])('%s, token %j', (base, token, expected) => {
    expect(streamUrl(base, TURN, token)).toBe(expected);
  });
});

describe('ended', () => {
  it.each([
    ['complete', true],
    ['unfinished: interrupted (model reply pending)', true],
    ['unfinished: stopped at its budget', true],
    ['unfinished: model reply', false],
    ['unfinished: 2 tool calls', false],
    ['unfinished: model reply (last model call failed)', false]
  ])('%s', (status, expected) => {
    expect(ended(status)).toBe(expected);
  });
});

describe('step', () => {
  const running = { status: 'unfinished: model reply' };
  it.each([
    ['not an object', 'x', { kind: 'skip' }],
    ['before the turn', { seq: 13, html: '<p>old</p>' }, { kind: 'skip' }],
    [
      'its request',
      { seq: 14, type: 'user_msg', html: '<p>ask</p>', session: running },
      { kind: 'html', html: '<p>ask</p>', endsStream: false }
    ],
    [
      'streamed text',
      { seq: 16, type: 'delta', html: '', text: 'Tell' },
      { kind: 'text', text: 'Tell' }
    ],
    [
      'a model call ends the streamed text',
      {
        seq: 15,
        type: 'model_call',
        html: '',
        stream: 'end',
        session: running
      },
      { kind: 'html', html: '', endsStream: true }
    ],
    [
      'a reply replaces it',
      {
        seq: 20,
        type: 'assistant_msg',
        html: '<p>A</p>',
        stream: 'replace',
        session: { status: 'unfinished: 1 tool call' }
      },
      { kind: 'html', html: '<p>A</p>', endsStream: true }
    ],
    [
      'the turn completes',
      {
        seq: 21,
        type: 'assistant_msg',
        html: '<p>B</p>',
        stream: 'replace',
        session: { status: 'complete' }
      },
      { kind: 'end', html: '<p>B</p>', endsStream: true }
    ],
    [
      'the turn is interrupted',
      {
        seq: 21,
        type: 'interrupted',
        html: '',
        session: { status: 'unfinished: interrupted' }
      },
      { kind: 'end', html: '', endsStream: false }
    ],
    [
      'a next turn begins',
      { seq: 30, type: 'user_msg', html: '<p>next</p>', session: running },
      { kind: 'end', html: '', endsStream: false }
    ],
    [
      'nothing to show',
      { seq: 17, type: 'trust', html: '', session: running },
      { kind: 'skip' }
    ],
    [
      'a seq that is not a number',
      { seq: '17', html: '<p>x</p>' },
      { kind: 'skip' }
    ]
  ])('%s', (_, record, expected) => {
    expect(step(record, 14)).toEqual(expected);
  });
});

/**
 * The rules of a finished turn written into its cell (fillrules.ts): pure functions, as tables.
 */

import {
  cleanOutputs,
  ICellNow,
  IMarker,
  markerOf,
  markersOf,
  namesAgent,
  skipReason
} from '../fillrules';
import { IFill, JSONObject, Output, parseKernelMessage } from '../protocol';

const MARK: IMarker = { session: 's1', from: 3, to: 9 };
const TRANSCRIPT: Output = {
  output_type: 'display_data',
  data: { 'text/html': '<div>hi</div>', 'text/plain': 'hi' },
  metadata: { nbagent: { final: MARK } }
};
const FILL: IFill = {
  id: 'c1',
  session: 's1',
  from: 3,
  to: 9,
  outputs: [TRANSCRIPT]
};
const SOURCE = '%agent say hello';
const NOW: ICellNow = { cellType: 'code', source: SOURCE, markers: [] };

describe('which cells a page asks about', () => {
  it.each<[string, boolean]>([
    ['%agent say hello', true],
    ['%%agent --new\nsay hello', true],
    ['x = 1\n  %agent go on', true],
    ['%agent', true],
    ['%agent_sessions', false],
    ["print('%agent')", false],
    ['# %agent in a comment', false],
    ['', false]
  ])('%j', (source, expected) => {
    expect(namesAgent(source)).toBe(expected);
  });
});

describe('the marker of an output', () => {
  it.each<[string, JSONObject, IMarker | null]>([
    ['a final transcript', TRANSCRIPT, MARK],
    ['no metadata', { output_type: 'display_data', data: {} }, null],
    [
      'a live panel',
      { output_type: 'display_data', metadata: { nbagent: { live: true } } },
      null
    ],
    [
      'a string seq',
      {
        output_type: 'display_data',
        metadata: { nbagent: { final: { ...MARK, from: '3' } } }
      },
      null
    ],
    [
      'no session',
      {
        output_type: 'display_data',
        metadata: { nbagent: { final: { from: 1, to: 2 } } }
      },
      null
    ]
  ])('%s', (_, output, expected) => {
    expect(markerOf(output)).toEqual(expected);
  });

  it('collects every marker of a cell', () => {
    expect(
      markersOf([TRANSCRIPT, { output_type: 'stream' }, TRANSCRIPT])
    ).toEqual([MARK, MARK]);
  });
});

describe('whether a fill is written into its cell', () => {
  it.each<
    [string, IFill, string | undefined, ICellNow | undefined, string | null]
  >([
    ['the cell lacks it', FILL, SOURCE, NOW, null],
    [
      'the cell is gone',
      FILL,
      SOURCE,
      undefined,
      'the cell is not in the notebook any more'
    ],
    [
      'a markdown cell now',
      FILL,
      SOURCE,
      { ...NOW, cellType: 'markdown' },
      'the cell is not in the notebook any more'
    ],
    [
      'edited since the page asked',
      FILL,
      SOURCE,
      { ...NOW, source: '%agent say bye' },
      'the cell changed since the page asked'
    ],
    [
      'never asked about',
      FILL,
      undefined,
      NOW,
      'the cell changed since the page asked'
    ],
    [
      'it shows it already',
      FILL,
      SOURCE,
      { ...NOW, markers: [MARK] },
      'the cell shows this turn already'
    ],
    [
      'an older turn shown',
      FILL,
      SOURCE,
      { ...NOW, markers: [{ ...MARK, to: 8 }] },
      null
    ],
    [
      'a stream output',
      {
        ...FILL,
        outputs: [{ output_type: 'stream', name: 'stdout', text: 'x' }]
      },
      SOURCE,
      NOW,
      'only display outputs are written'
    ],
    [
      'no outputs',
      { ...FILL, outputs: [] },
      SOURCE,
      NOW,
      'only display outputs are written'
    ]
  ])('%s', (_, fill, sent, now, expected) => {
    expect(skipReason(fill, sent, now)).toBe(expected);
  });

  it('drops script MIME types from what it writes', () => {
    const output: Output = {
      output_type: 'display_data',
      data: {
        'text/html': '<b>x</b>',
        'application/javascript': 'alert(1)',
        'Text/JavaScript': 'alert(2)'
      },
      metadata: {}
    };
    expect(cleanOutputs([output])).toEqual([
      { ...output, data: { 'text/html': '<b>x</b>' } }
    ]);
  });
});

describe('the transcripts message', () => {
  const message = {
    v: 1,
    type: 'transcripts',
    id: 'q1',
    write: true,
    cells: [FILL]
  };
  it.each<[string, unknown, boolean]>([
    ['good', message, true],
    ['no cells', { ...message, cells: [] }, true],
    ['write not a boolean', { ...message, write: 'yes' }, false],
    [
      'a cell with an extra key',
      { ...message, cells: [{ ...FILL, trusted: true }] },
      false
    ],
    ['a negative seq', { ...message, cells: [{ ...FILL, from: -1 }] }, false],
    [
      'an output of an unknown type',
      {
        ...message,
        cells: [{ ...FILL, outputs: [{ output_type: 'script' }] }]
      },
      false
    ],
    ['no id', { v: 1, type: 'transcripts', write: true, cells: [] }, false]
  ])('%s', (_, data, ok) => {
    expect(parseKernelMessage(data).ok).toBe(ok);
  });
});

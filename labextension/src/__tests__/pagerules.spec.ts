/**
 * The rules of the questions shown on every page and of a kernel gone: pure functions, as tables.
 */

import {
  cutTurn,
  decisionWords,
  drawOverlay,
  goneStatus,
  LOST,
  reaction,
  SessionEvent,
  STOPPED
} from '../pagerules';

describe('which session events mean the kernel running the turn is gone', () => {
  it.each<[string, SessionEvent, ReturnType<typeof reaction>]>([
    ['dead', { kind: 'status', status: 'dead' }, 'stopped'],
    ['restarting', { kind: 'status', status: 'restarting' }, 'stopped'],
    ['autorestarting', { kind: 'status', status: 'autorestarting' }, 'stopped'],
    ['busy', { kind: 'status', status: 'busy' }, null],
    ['idle', { kind: 'status', status: 'idle' }, null],
    ['unknown', { kind: 'status', status: 'unknown' }, null],
    [
      'disconnected',
      { kind: 'connection', status: 'disconnected' },
      'lost-later'
    ],
    ['connecting', { kind: 'connection', status: 'connecting' }, null],
    ['connected', { kind: 'connection', status: 'connected' }, 'back'],
    ['shut down', { kind: 'kernel', before: true, after: false }, 'stopped'],
    ['replaced', { kind: 'kernel', before: true, after: true }, 'stopped'],
    ['the first kernel', { kind: 'kernel', before: false, after: true }, null]
  ])('%s', (_, event, expected) => {
    expect(reaction(event)).toBe(expected);
  });
});

describe('what an ended question says', () => {
  it.each<[Parameters<typeof decisionWords>[0], string, string]>([
    ['approved', 'panel', 'approved (panel)'],
    ['declined', 'panel', 'declined (panel)'],
    ['approved', '', 'approved'],
    ['interrupted', '', 'not answered (interrupted)'],
    ['interrupted', 'panel', 'not answered (interrupted)']
  ])('%s by %s', (decision, by, words) => {
    expect(decisionWords(decision, by)).toBe(words);
  });
});

describe('where a page draws the question', () => {
  it.each([
    ['under a cell without a live panel', true, false, false, true],
    [
      'under a cell without a live panel, another cell live',
      true,
      false,
      true,
      true
    ],
    ['not where the cell shows the live panel', true, true, true, false],
    ['at the top when the cell is unknown', false, false, false, true],
    ['not at the top when some cell is live', false, false, true, false]
  ])('%s', (_, found, cellLive, anyLive, drawn) => {
    expect(drawOverlay(found, cellLive, anyLive)).toBe(drawn);
  });

  it.each([
    ['under a cell without a live panel', true, false, false],
    ['at the top when the cell is unknown', false, false, false],
    ['where the cell shows the live panel', true, true, true]
  ])(
    'never as well as a proposed edit shown at its cell: %s',
    (_, found, cellLive, anyLive) => {
      expect(drawOverlay(found, cellLive, anyLive, true)).toBe(false);
    }
  );
});

describe("what a marked live panel's header status says", () => {
  it.each([
    ['streaming', '— streaming', STOPPED, '— interrupted (the kernel stopped)'],
    [
      'with tokens',
      '— streaming (attempt 2) · 1.2k tokens in · on Amazon Bedrock',
      STOPPED,
      '— interrupted (the kernel stopped) · 1.2k tokens in · on Amazon Bedrock'
    ],
    [
      'working',
      '— running tools · 30 tokens',
      LOST,
      '— connection lost · 30 tokens'
    ],
    [
      'no dash',
      'waiting for the model',
      STOPPED,
      'interrupted (the kernel stopped)'
    ],
    ['empty', '', LOST, 'connection lost']
  ])('%s', (_, shown, words, expected) => {
    expect(goneStatus(shown, words)).toBe(expected);
  });
});

describe('which kernel message ends a turn cut off (a server stopped with SIGTERM)', () => {
  const FINAL = { session: 's1', from: 4, to: 9 };
  it.each<[string, string, unknown, typeof FINAL | null]>([
    [
      'the panel ends, interrupted with work left',
      'update_display_data',
      { data: {}, metadata: { nbagent: { final: FINAL, unfinished: true } } },
      FINAL
    ],
    [
      'a final output shown at once',
      'display_data',
      { data: {}, metadata: { nbagent: { final: FINAL, unfinished: true } } },
      FINAL
    ],
    [
      'the panel ends, done',
      'update_display_data',
      { data: {}, metadata: { nbagent: { final: FINAL } } },
      null
    ],
    [
      'not true but truthy',
      'update_display_data',
      { metadata: { nbagent: { final: FINAL, unfinished: 'yes' } } },
      null
    ],
    [
      'no marker',
      'update_display_data',
      { metadata: { nbagent: { unfinished: true } } },
      null
    ],
    [
      'another message',
      'execute_result',
      { metadata: { nbagent: { final: FINAL, unfinished: true } } },
      null
    ],
    ['no metadata', 'display_data', { data: {} }, null],
    ['metadata not an object', 'display_data', { metadata: 'x' }, null],
    ['no content', 'display_data', null, null]
  ])('%s', (_, type, content, expected) => {
    expect(cutTurn(type, content)).toEqual(expected);
  });
});

/**
 * Inserting, reading and editing cells, on a real shared notebook model (@jupyter/ydoc's YNotebook, the one
 * JupyterLab and Notebook 7 edit).
 */

import { YNotebook } from '@jupyter/ydoc';

import {
  applyEdit,
  CellsError,
  clip,
  insertCells,
  outputsText,
  readCells
} from '../cells';
import { ICellToInsert } from '../protocol';

const SESSION = 's1';

function notebook(): YNotebook {
  const nb = new YNotebook();
  nb.insertCells(0, [
    { cell_type: 'code', source: '%load_ext nbagent', metadata: {} },
    { cell_type: 'code', source: '%agent count the dhows', metadata: {} },
    { cell_type: 'markdown', source: '# after', metadata: {} }
  ] as any);
  return nb;
}

function call(id: string, source: string, turn = 1): ICellToInsert {
  return {
    tool_use_id: id,
    cell_type: 'code',
    source,
    outputs: [{ output_type: 'stream', name: 'stdout', text: `${source}\n` }],
    metadata: { nbagent: { session: SESSION, tool_use_id: id, turn } }
  };
}

const sources = (nb: YNotebook): string[] => nb.cells.map(c => c.getSource());

describe('insertCells', () => {
  it('puts the calls below the anchor, in order, with outputs and metadata', () => {
    const nb = notebook();
    const anchor = nb.cells[1].id;
    const result = insertCells(nb, SESSION, anchor, [
      call('t1', 'a = 1'),
      call('t2', 'b = 2')
    ]);
    expect(sources(nb)).toEqual([
      '%load_ext nbagent',
      '%agent count the dhows',
      'a = 1',
      'b = 2',
      '# after'
    ]);
    expect(result.skipped).toEqual([]);
    expect(result.cells).toEqual([
      { tool_use_id: 't1', cell_id: nb.cells[2].id, index: 2 },
      { tool_use_id: 't2', cell_id: nb.cells[3].id, index: 3 }
    ]);
    const cell = nb.cells[2].toJSON() as any;
    expect(cell.metadata).toEqual({
      nbagent: { session: SESSION, tool_use_id: 't1', turn: 1 }
    });
    expect(cell.outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: 'a = 1\n' }
    ]);
    expect(cell.execution_count).toBeNull();
  });

  it('inserts nothing twice: a second request skips every call already there', () => {
    const nb = notebook();
    const anchor = nb.cells[1].id;
    insertCells(nb, SESSION, anchor, [call('t1', 'a = 1')]);
    const again = insertCells(nb, SESSION, anchor, [
      call('t1', 'a = 1'),
      call('t2', 'b = 2')
    ]);
    expect(again.skipped).toEqual(['t1']);
    expect(again.cells.map(c => c.tool_use_id)).toEqual(['t2']);
    expect(sources(nb)).toEqual([
      '%load_ext nbagent',
      '%agent count the dhows',
      'a = 1',
      'b = 2',
      '# after'
    ]);
  });

  it("keeps a cell the user edited after it was inserted: it is the user's", () => {
    const nb = notebook();
    insertCells(nb, SESSION, nb.cells[1].id, [call('t1', 'a = 1')]);
    nb.cells[2].setSource('a = 100  # mine');
    const again = insertCells(nb, SESSION, nb.cells[1].id, [
      call('t1', 'a = 1')
    ]);
    expect(again).toEqual({ cells: [], skipped: ['t1'] });
    expect(nb.cells[2].getSource()).toBe('a = 100  # mine');
  });

  it('skips a call that appears twice in one request', () => {
    const nb = notebook();
    const result = insertCells(nb, SESSION, nb.cells[1].id, [
      call('t1', 'a = 1'),
      call('t1', 'a = 1')
    ]);
    expect(result.skipped).toEqual(['t1']);
    expect(nb.cells.length).toBe(4);
  });

  it('a later turn goes after the cells an earlier turn inserted', () => {
    const nb = notebook();
    insertCells(nb, SESSION, nb.cells[1].id, [call('t1', 'a = 1')]);
    insertCells(nb, SESSION, nb.cells[1].id, [call('t2', 'b = 2', 2)]);
    expect(sources(nb).slice(2, 4)).toEqual(['a = 1', 'b = 2']);
  });

  it('refuses when the anchor cell is gone', () => {
    const nb = notebook();
    expect(() =>
      insertCells(nb, SESSION, 'nope', [call('t1', 'a = 1')])
    ).toThrow(CellsError);
    expect(nb.cells.length).toBe(3);
  });

  it('drops script MIME types from the outputs it writes', () => {
    const nb = notebook();
    const cell = call('t1', 'x');
    cell.outputs = [
      {
        output_type: 'display_data',
        data: { 'application/javascript': 'alert(1)', 'text/plain': 'shown' },
        metadata: {}
      }
    ];
    insertCells(nb, SESSION, nb.cells[1].id, [cell]);
    expect((nb.cells[2].toJSON() as any).outputs[0].data).toEqual({
      'text/plain': 'shown'
    });
  });

  it('inserts a markdown summary without outputs', () => {
    const nb = notebook();
    const summary: ICellToInsert = {
      ...call('summary-1', 'The total is 36.'),
      cell_type: 'markdown',
      outputs: []
    };
    insertCells(nb, SESSION, nb.cells[1].id, [summary]);
    expect(nb.cells[2].cell_type).toBe('markdown');
  });
});

describe('applyEdit', () => {
  it("replaces the source when it is still the proposal's old source, and Undo restores it", () => {
    const nb = notebook();
    nb.cells[0].setSource('total = sum(x)\nprint(totl)\n');
    nb.cells[0].undoManager?.clear();
    const id = nb.cells[0].id;
    expect(
      applyEdit(
        nb,
        id,
        'total = sum(x)\nprint(totl)\n',
        'total = sum(x)\nprint(total)\n'
      )
    ).toBeNull();
    expect(nb.cells[0].getSource()).toBe('total = sum(x)\nprint(total)\n');
    nb.cells[0].undo();
    expect(nb.cells[0].getSource()).toBe('total = sum(x)\nprint(totl)\n');
  });

  it('refuses when the cell changed since the proposal, and leaves it', () => {
    const nb = notebook();
    const id = nb.cells[0].id;
    expect(applyEdit(nb, id, 'something else', 'new')).toBe(
      'the cell changed since the proposal'
    );
    expect(nb.cells[0].getSource()).toBe('%load_ext nbagent');
  });

  it('refuses when the cell is gone', () => {
    expect(applyEdit(notebook(), 'nope', '', 'x')).toBe(
      'the cell is not in the notebook any more'
    );
  });

  it.each([
    ['', 'abc'],
    ['abc', ''],
    ['abc', 'abc'],
    ['aXc', 'aYYc'],
    ['aaa', 'aa'],
    ['aa', 'aaa']
  ])('turns %j into %j', (before, after) => {
    const nb = notebook();
    nb.cells[0].setSource(before);
    expect(applyEdit(nb, nb.cells[0].id, before, after)).toBeNull();
    expect(nb.cells[0].getSource()).toBe(after);
  });
});

describe('readCells', () => {
  it('gives every cell with its live source, outputs as text and whether it was edited since it ran', () => {
    const nb = notebook();
    insertCells(nb, SESSION, nb.cells[1].id, [call('t1', 'a = 1')]);
    nb.cells[2].setSource('a = 2  # unsaved');
    const cells = readCells(nb, index => index === 2);
    expect(
      cells.map(c => [c.cell_type, c.source, c.outputs_text, c.dirty])
    ).toEqual([
      ['code', '%load_ext nbagent', '', false],
      ['code', '%agent count the dhows', '', false],
      ['code', 'a = 2  # unsaved', 'a = 1\n', true],
      ['markdown', '# after', '', false]
    ]);
    expect(cells[2].id).toBe(nb.cells[2].id);
  });
});

describe('outputsText and clip', () => {
  it('reads streams, text/plain and errors', () => {
    expect(
      outputsText([
        { output_type: 'stream', name: 'stdout', text: ['a', 'b\n'] },
        {
          output_type: 'execute_result',
          data: { 'text/plain': '3' },
          execution_count: 1,
          metadata: {}
        },
        {
          output_type: 'display_data',
          data: { 'image/png': 'x' },
          metadata: {}
        },
        {
          output_type: 'error',
          ename: 'KeyError',
          evalue: "'b'",
          traceback: []
        }
      ])
    ).toBe("ab\n3\n[image/png]\nKeyError: 'b'\n");
  });

  it('keeps a long text within the limit, head and tail', () => {
    const text = 'h'.repeat(30_000) + 't'.repeat(30_000);
    const clipped = clip(text, 20_000);
    expect(clipped.length).toBeLessThanOrEqual(20_000);
    expect(clipped.startsWith('hhh')).toBe(true);
    expect(clipped.endsWith('ttt')).toBe(true);
    expect(clipped).toContain('characters left out');
    expect(
      outputsText([{ output_type: 'stream', name: 'stdout', text }]).length
    ).toBeLessThanOrEqual(20_000);
  });
});

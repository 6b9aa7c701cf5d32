/**
 * Running one cell on the user's click (the "Run cell" offer after an accepted `%agent --fix`, inline.ts): the cell
 * is made the notebook's only selected, active cell, then JupyterLab's own `notebook:run-cell` command runs it, as
 * the Run menu and Shift+Enter's sibling do. Nothing here runs without a click.
 */

import type { Cell } from '@jupyterlab/cells';
import {
  NotebookActions,
  type INotebookTracker,
  type NotebookPanel
} from '@jupyterlab/notebook';

export const RUN_COMMAND = 'notebook:run-cell';

/** The part of the application's command registry used here. */
export interface ICommands {
  hasCommand(id: string): boolean;
  execute(id: string, args?: Record<string, unknown>): Promise<unknown>;
}

let app: { commands: ICommands; tracker: INotebookTracker } | null = null;

/** The plugin's commands and notebook tracker (index.ts, once). */
export function setCommands(
  commands: ICommands,
  tracker: INotebookTracker
): void {
  app = { commands, tracker };
}

/**
 * Run `cell` of `panel`: JupyterLab's run command where it acts on this notebook (the current one: the click was in
 * it), else the same action it calls (`NotebookActions.run`) on this notebook.
 */
export async function runCell(panel: NotebookPanel, cell: Cell): Promise<void> {
  const content = panel.content;
  const index = content.widgets.indexOf(cell);
  if (index < 0) {
    throw new Error('the cell is not in the notebook any more');
  }
  content.deselectAll();
  content.activeCellIndex = index;
  if (
    app &&
    app.tracker.currentWidget === panel &&
    app.commands.hasCommand(RUN_COMMAND)
  ) {
    await app.commands.execute(RUN_COMMAND);
    return;
  }
  await NotebookActions.run(content, panel.sessionContext);
}

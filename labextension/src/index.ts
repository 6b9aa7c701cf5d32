/**
 * nbagent's JupyterLab 4 / Notebook 7 extension: the bridge between the kernel's agent and the notebook model.
 */

import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';

import { CellsButtons } from './button';
import { bridgeFor } from './comm';
import { EXTENSION_VERSION, MIME_TYPE } from './protocol';
import { setCommands } from './runcell';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'nbagent:cells',
  description:
    "Inserts the agent's work as cells, applies approved edits, reads the live notebook (the nbagent.cells comm).",
  autoStart: true,
  requires: [INotebookTracker, IRenderMimeRegistry],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    rendermime: IRenderMimeRegistry
  ) => {
    setCommands(app.commands, tracker); // "Run cell" after an accepted --fix runs through notebook:run-cell
    rendermime.addFactory(
      {
        safe: true, // draws buttons from checked data; no markup or script from the output
        mimeTypes: [MIME_TYPE],
        createRenderer: () => new CellsButtons(tracker, EXTENSION_VERSION)
      },
      0
    );
    tracker.widgetAdded.connect((_, panel) => {
      bridgeFor(panel, EXTENSION_VERSION);
    });
    tracker.forEach(panel => bridgeFor(panel, EXTENSION_VERSION));
  }
};

export default plugin;

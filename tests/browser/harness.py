"""Real JupyterLab / Notebook 7 servers and a real Chromium (Playwright) for the browser tests and benchmarks/browser.py.

Only the standard library and nbformat are imported at module level, so that tests/conftest.py can ask
:func:`find_chromium` whether this machine can run the browser tests without importing Playwright.

Nothing reaches the network: the servers listen on 127.0.0.1 with news, update checks and the PyPI
extension manager turned off (a private Jupyter config folder), the kernels' API is the fake Anthropic
server, and Chromium resolves no host name but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import nbformat

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Locator, Page, Playwright

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # failure screenshots (ignored by git)
STARTUP_TIMEOUT = 90.0  # seconds for a server to answer /api/status on 2 busy cores
RUN_TIMEOUT = 120.0  # seconds for a Run All of a test notebook
LAB_THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}

# Chromium: no host name resolves except 127.0.0.1 (so no request can leave the machine), no background traffic.
CHROMIUM_ARGS = (
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--no-proxy-server",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-first-run",
    "--disable-dev-shm-usage",
)

# Jupyter server and JupyterLab settings for the private config folder (both `jupyter lab` and `jupyter notebook` read it).
SERVER_CONFIG: dict[str, Any] = {
    "ServerApp": {"open_browser": False, "terminals_enabled": False},
    "LabApp": {
        "news_url": None,  # no announcements feed
        "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
        "extension_manager": "readonly",  # no PyPI listing
        "expose_app_in_browser": True,  # window.jupyterapp, to run the app's commands as its menus do
    },
    "JupyterNotebookApp": {"expose_app_in_browser": True},
}
# Real-time collaboration's server and Lab extensions, turned off for every server but the collaborative one.
WITHOUT_RTC = {"jpserver_extensions": {"jupyter_server_ydoc": False, "jupyter_server_fileid": False}}
RTC_LAB_EXTENSIONS = ("@jupyter/collaboration-extension", "@jupyter/docprovider-extension")
# User settings (JUPYTERLAB_SETTINGS_DIR): never ask about or fetch news; every cell in the DOM (no windowing), so a
# test sees all outputs without scrolling; no autosave racing the tests' explicit saves.
USER_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/extensionmanager-extension/plugin": {"enabled": False},
}


# Finding the parts -------------------------------------------------------------------------------------------
def find_chromium(environ: Mapping[str, str] = os.environ) -> str | None:
    """The Chromium to drive: ``$CHROMIUM`` if set (a path or a name on PATH), else the first Chromium on PATH."""
    path = environ.get("PATH", "")
    explicit = environ.get("CHROMIUM", "").strip()
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        return shutil.which(explicit, path=path)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Notebook files ----------------------------------------------------------------------------------------------
def write_notebook(path: Path, cells: Sequence[str]) -> Path:
    """A notebook file of code cells (a cell starting with ``# md`` is markdown), with the python3 kernel, as a user would have."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for source in cells:
        if source.startswith("# md\n"):
            nb.cells.append(nbformat.v4.new_markdown_cell(source.removeprefix("# md\n")))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(source))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# Servers -----------------------------------------------------------------------------------------------------
def private_jupyter_env(home: Path, base: Mapping[str, str] | None = None, *, collaborative: bool = False, **extra: str) -> dict[str, str]:
    """An environment whose Jupyter config, data, runtime and Lab settings live in ``home`` (nothing of the user's is read or written).

    Real-time collaboration (jupyter-collaboration, in the test extra) is off unless ``collaborative``: its server
    extensions are disabled and its Lab extensions too, so the other servers are the plain JupyterLab users have.
    """
    env = dict(os.environ if base is None else base)
    folders = {
        "JUPYTER_CONFIG_DIR": home / "config",
        "JUPYTER_DATA_DIR": home / "data",
        "JUPYTER_RUNTIME_DIR": home / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": home / "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": home / "lab-workspaces",
        "IPYTHONDIR": home / "ipython",
    }
    for name, folder in folders.items():
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    config = SERVER_CONFIG if collaborative else {**SERVER_CONFIG, "ServerApp": {**SERVER_CONFIG["ServerApp"], **WITHOUT_RTC}}
    (folders["JUPYTER_CONFIG_DIR"] / "jupyter_server_config.json").write_text(json.dumps(config, indent=1))
    labconfig = folders["JUPYTER_CONFIG_DIR"] / "labconfig"
    labconfig.mkdir(exist_ok=True)
    disabled = {} if collaborative else {"disabledExtensions": dict.fromkeys(RTC_LAB_EXTENSIONS, True)}
    (labconfig / "page_config.json").write_text(json.dumps(disabled))
    for plugin, values in USER_SETTINGS.items():
        target = folders["JUPYTERLAB_SETTINGS_DIR"] / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra)
    return env


def kernel_env(home: Path, fake_url: str, data_dir: Path, *, collaborative: bool = False) -> dict[str, str]:
    """The server's (and so its kernels') environment: the fake Anthropic server as the API, a private NBAGENT_DATA_DIR."""
    data_dir.mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")}
    return private_jupyter_env(
        home,
        base,
        collaborative=collaborative,
        ANTHROPIC_BASE_URL=fake_url,
        ANTHROPIC_API_KEY="test-key-not-real",
        NBAGENT_DATA_DIR=str(data_dir),
        PYTHONUNBUFFERED="1",
    )


@dataclass
class JupyterServer:
    """A real ``jupyter lab`` or ``jupyter notebook`` server on 127.0.0.1, for one root folder."""

    kind: str  # "lab" or "notebook"
    root: Path
    env: dict[str, str]
    port: int = 0
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def base(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The command line that starts the server."""
        args = [
            sys.executable,
            "-m",
            "jupyter",
            self.kind,
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
        ]
        if self.kind == "lab":
            args += ["--LabApp.news_url=None", "--LabApp.extension_manager=readonly"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--allow-root")  # CI runs as root
        return args

    def _spawn(self, log: IO[bytes]) -> subprocess.Popen[bytes]:
        """The server's process, in a session of its own, its output to ``log``; SIGHUP ends it as in a terminal."""
        return subprocess.Popen(
            self.command(),
            cwd=self.root,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=hangup_ends_it,
        )

    def start(self, timeout: float = STARTUP_TIMEOUT) -> JupyterServer:
        """Start the server and wait until /api/status answers (retrying once on a port taken meanwhile)."""
        self.root.mkdir(parents=True, exist_ok=True)
        for attempt in range(2):
            self.port = free_port()
            self.log_path = self.root.parent / f"{self.kind}-server-{self.port}.log"
            with open(self.log_path, "wb") as log:
                self.process = self._spawn(log)
            try:
                self._wait_ready(timeout)
                return self
            except RuntimeError:
                self.stop()
                if attempt or not self._port_taken():
                    raise
        return self

    def _port_taken(self) -> bool:
        """Whether the server stopped because its port was taken meanwhile."""
        # The OS says "Address already in use"; jupyter_server, checking before it binds, "The port N is already in use".
        return "already in use" in self.log_tail().lower()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter {self.kind} exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                self.api("GET", "api/status")
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.25)
        raise RuntimeError(f"jupyter {self.kind} did not answer /api/status within {timeout:.0f} s:\n{self.log_tail()}")

    def offline_problems(self) -> list[str]:
        """What in the server could reach the network: news, update checks, a PyPI extension manager (none expected)."""
        problems = []
        news = self.api("GET", "lab/api/news")
        if news.get("news"):
            problems.append(f"the server serves news: {news}")
        update = self.api("GET", "lab/api/update")
        if update.get("notification"):
            problems.append(f"the server checks for updates: {update}")
        if "Extension Manager is 'readonly'" not in self.log_tail(400):
            problems.append("the extension manager is not the read-only one (the PyPI manager queries pypi.org)")
        return problems

    def url(self, path: str = "", **query: str) -> str:
        """A URL on this server, with the token."""
        return f"{self.base}/{path.lstrip('/')}?{urllib.parse.urlencode({**query, 'token': self.token})}"

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call the server's REST API; the parsed JSON answer (None for an empty one)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base}/{path.lstrip('/')}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def kernels(self) -> list[dict[str, Any]]:
        """The running kernels."""
        return list(self.api("GET", "api/kernels"))

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's log."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Shut the server down (its kernels with it); kill it if it does not go within 20 s."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            self.api("POST", "api/shutdown")
        except (OSError, urllib.error.URLError):
            process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(10)

    def stop_as_user(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Stop the server as a user does (``sig`` to its process, as Ctrl+C or ``kill`` sends), and wait until it exits; its code.

        The server shuts its kernels down on the way out; the port stays this server's for :meth:`start_again`.
        """
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            raise RuntimeError(f"jupyter {self.kind} is not running")
        process.send_signal(sig)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(10)
            raise RuntimeError(f"jupyter {self.kind} did not exit within {timeout:.0f} s of signal {sig}:\n{self.log_tail()}") from None

    def start_again(self, timeout: float = STARTUP_TIMEOUT) -> JupyterServer:
        """Start the stopped server again on the same port, root, token and config (as a user re-runs the same command)."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"jupyter {self.kind} is still running")
        self.log_path = self.root.parent / f"{self.kind}-server-{self.port}-again.log"
        deadline = time.monotonic() + timeout
        while True:  # the old server's socket may linger a moment
            with open(self.log_path, "wb") as log:
                self.process = self._spawn(log)
            try:
                self._wait_ready(max(1.0, deadline - time.monotonic()))
                return self
            except RuntimeError:
                if self.process is not None and self.process.poll() is None:
                    self.stop()
                self.process = None
                if not self._port_taken() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


# The browser -------------------------------------------------------------------------------------------------
def launch_chromium(playwright: Playwright, executable: str | None = None) -> Browser:
    """Headless Chromium from the distribution (Playwright's own download is not used)."""
    path = executable or find_chromium()
    if path is None:
        raise RuntimeError("no Chromium found: install the chromium package or set CHROMIUM to its path")
    return playwright.chromium.launch(executable_path=path, headless=True, args=list(CHROMIUM_ARGS))


@dataclass
class ConsoleLog:
    """Every console error and uncaught page exception of the pages it watches."""

    entries: list[dict[str, str]] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    baseline: list[dict[str, str]] = field(default_factory=list)  # what a page logged while the app loaded, before any notebook

    def mark_baseline(self, label: str) -> None:
        """Note the entries ``label``'s page logged so far (loading the app, no notebook open: none can be nbagent's)."""
        self.baseline += [e for e in self.entries if e["page"] == label and e not in self.baseline]

    def in_baseline(self, entry: Mapping[str, str]) -> bool:
        """Whether the same error (page, kind, text) was logged while the app loaded."""
        return any((b["page"], b["kind"], b["text"]) == (entry["page"], entry["kind"], entry["text"]) for b in self.baseline)

    def watch(self, page: Page, label: str) -> None:
        """Collect ``page``'s console errors, page errors and failed or outside requests."""
        page.on("console", lambda message: self._console(label, message))
        page.on(
            "pageerror",
            lambda error: self.entries.append(
                {"page": label, "kind": "pageerror", "text": f"{error.name}: {error.message}", "stack": error.stack or ""}
            ),
        )
        page.on(
            "requestfailed", lambda request: self.failed_requests.append(f"{label}: {request.method} {request.url} ({request.failure})")
        )

    def _console(self, label: str, message: ConsoleMessage) -> None:
        if message.type in ("error", "assert"):
            where = message.location or {}
            self.entries.append(
                {"page": label, "kind": f"console.{message.type}", "text": message.text, "stack": str(where.get("url", ""))}
            )


# Driving JupyterLab / Notebook 7 -----------------------------------------------------------------------------
APP_READY_JS = """
() => {
  const app = window.jupyterapp;
  if (!app || !app.shell || !app.shell.isAttached || !app.commands.hasCommand('docmanager:open')) return false;
  if (/[?&]reset(=|&|$)/.test(window.location.search)) return false;
  if (!window.nbagentTestRestored) {
    window.nbagentTestRestored = 'waiting';
    app.restored.then(() => { window.nbagentTestRestored = 'yes'; });
  }
  return window.nbagentTestRestored === 'yes';
}
"""

PANEL_JS = """
(path) => {
  const app = window.jupyterapp;
  for (const w of app.shell.widgets('main')) {
    if (w.context && w.context.path === path && w.content && w.content.widgets) return w;
  }
  return null;
}
"""

STATE_JS = (
    """
(path) => {
  const find = """
    + PANEL_JS
    + """;
  const panel = find(path);
  if (!panel) return {open: false};
  const session = panel.sessionContext;
  const kernel = session && session.session ? session.session.kernel : null;
  const cells = panel.content.widgets.map((cell) => {
    const prompt = cell.node.querySelector('.jp-InputPrompt');
    return {type: cell.model.type, prompt: prompt ? prompt.textContent.trim() : ''};
  });
  return {
    open: true,
    id: panel.id,
    ready: panel.context.isReady,
    dirty: panel.context.model.dirty,
    kernel: kernel ? kernel.id : null,
    status: kernel ? kernel.status : 'none',
    busy: cells.some((c) => c.prompt.includes('*')),
    cells,
  };
}
"""
)


class Jupyter:
    """One page of a running JupyterLab (``kind="lab"``) or Notebook 7 (``kind="notebook"``) and the actions a user takes there."""

    def __init__(self, page: Page, server: JupyterServer) -> None:
        self.page = page
        self.server = server
        self.kind = server.kind

    # Opening and closing ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Load the app (Lab: an empty workspace) and wait until its commands work."""
        target = self.server.url("lab", reset="") if self.kind == "lab" else self.server.url("tree")
        self.page.goto(target)
        self.wait_app()

    def wait_app(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Wait until ``window.jupyterapp`` is started, its shell attached and its layout restored, on the page's final URL.

        Lab's ``?reset`` may clear the workspace after the commands exist, and reloads the page when the workspace
        was read first; a notebook opened before that would vanish.
        """
        self.page.wait_for_function(APP_READY_JS, timeout=timeout * 1000)

    def open(self, path: str, timeout: float = STARTUP_TIMEOUT) -> None:
        """Open a notebook the way a user does (Lab: the file browser's open; Notebook 7: its own page) and wait for its kernel."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

        if self.kind == "lab":
            script = "(path) => window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'}).then(() => true)"
            self.page.evaluate(script, path)
        else:
            self.page.goto(self.server.url(f"notebooks/{urllib.parse.quote(path)}"))
            self.wait_app(timeout)
        try:
            self.page.wait_for_function(
                "([js, path]) => { const s = eval(js)(path); return s.open && s.ready && s.status === 'idle'; }",
                arg=[STATE_JS, path],
                timeout=timeout * 1000,
            )
        except PlaywrightTimeoutError:
            dialogs = self.page.locator(".jp-Dialog").all_inner_texts()
            state = self.state(path)
            raise TimeoutError(
                f"{path} did not open with an idle kernel in {timeout:.0f} s: {state}; dialogs {dialogs}; at {self.page.url}"
            ) from None
        self.page.locator(f"#{self.state(path)['id']}").wait_for(state="visible", timeout=timeout * 1000)

    def state(self, path: str) -> dict[str, Any]:
        """What the notebook panel shows: open, ready, dirty, kernel id and status, each cell's prompt."""
        return dict(self.page.evaluate(f"(path) => ({STATE_JS})(path)", path))

    def activate(self, path: str) -> None:
        """Make the notebook the current widget (the app's notebook commands act on it)."""
        self.page.evaluate(f"(path) => {{ const p = ({PANEL_JS})(path); window.jupyterapp.shell.activateById(p.id); }}", path)

    def notebook(self, path: str) -> Locator:
        """The notebook panel's element."""
        return self.page.locator(f"#{self.state(path)['id']}")

    def cell(self, path: str, index: int) -> Locator:
        """The ``index``-th cell (0-based) of the notebook."""
        return self.notebook(path).locator(".jp-Notebook > .jp-Cell, .jp-WindowedPanel-viewport > .jp-Cell").nth(index)

    def output(self, path: str, index: int) -> Locator:
        """The output area of the ``index``-th cell."""
        return self.cell(path, index).locator(".jp-OutputArea").first

    def command(self, command: str, args: Mapping[str, Any] | None = None, *, wait: bool = True) -> Any:
        """Run one of the app's commands, as its menu item does (``wait``: until the command's promise settles)."""
        script = "([id, args]) => window.jupyterapp.commands.execute(id, args)"
        if not wait:
            script = "([id, args]) => { window.jupyterapp.commands.execute(id, args); }"
        return self.page.evaluate(script, [command, dict(args or {})])

    def accept_dialog(self, timeout: float = 15) -> str:
        """Click the accepting button of the dialog that is shown (e.g. "Restart"); its title."""
        dialog = self.page.locator(".jp-Dialog").last
        dialog.wait_for(state="visible", timeout=timeout * 1000)
        title = dialog.locator(".jp-Dialog-header").inner_text()
        dialog.locator("button.jp-mod-accept").click()
        dialog.wait_for(state="detached", timeout=timeout * 1000)
        return title

    # Running ---------------------------------------------------------------------------------------------
    def run_all(self, path: str) -> None:
        """Run all cells (returns at once; see :meth:`wait_idle`)."""
        self.activate(path)
        self.command("notebook:run-all-cells", wait=False)
        self.wait_started(path)

    def run_cell(self, path: str, index: int) -> None:
        """Select cell ``index`` and run it (returns at once)."""
        before = self.state(path)["cells"][index]["prompt"]
        self.activate(path)
        self.page.evaluate(
            f"([path, index]) => {{ const p = ({PANEL_JS})(path); p.content.activeCellIndex = index; }}",
            [path, index],
        )
        self.command("notebook:run-cell", wait=False)
        self.wait_started(path, index, before)

    def wait_started(self, path: str, index: int = -1, before: str = "", timeout: float = 30) -> None:
        """Wait until a cell is queued or running (or cell ``index``'s prompt is no longer ``before``: a quick cell that ran)."""
        self.page.wait_for_function(
            "([js, path, index, before]) => { const s = eval(js)(path);"
            " return s.busy || s.status === 'busy' || (index >= 0 && s.cells[index].prompt !== before); }",
            arg=[STATE_JS, path, index, before],
            timeout=timeout * 1000,
        )

    def wait_idle(self, path: str, timeout: float = RUN_TIMEOUT, settle: float = 0.3) -> None:
        """Wait until no cell is queued or running and the kernel is idle (twice, ``settle`` seconds apart)."""
        deadline = time.monotonic() + timeout
        script = "([js, path]) => { const s = eval(js)(path); return !s.busy && s.status === 'idle'; }"
        while True:
            remaining = max(1.0, deadline - time.monotonic())
            self.page.wait_for_function(script, arg=[STATE_JS, path], timeout=remaining * 1000, polling=100)
            self.page.wait_for_timeout(settle * 1000)
            if self.page.evaluate(script, [STATE_JS, path]):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path}: cells still running after {timeout:.0f} s")

    def save(self, path: str) -> None:
        """Save the notebook (as File > Save does) and wait until it is clean on disk."""
        self.activate(path)
        self.command("docmanager:save")
        self.page.wait_for_function(
            "([js, path]) => { const s = eval(js)(path); return s.open && !s.dirty; }", arg=[STATE_JS, path], timeout=30_000
        )

    def restart_run_all(self, path: str) -> str:
        """Kernel > Restart Kernel and Run All Cells…, confirming the dialog; the dialog's title (see :meth:`statuses`)."""
        self.record_statuses(path)
        self.activate(path)
        self.command("notebook:restart-run-all", wait=False)
        return self.accept_dialog()

    def wait_run_all(self, path: str, timeout: float = RUN_TIMEOUT) -> None:
        """Wait until the kernel restarted by :meth:`restart_run_all` has run every code cell and is idle.

        The prompts alone cannot say so: until Run All starts, the last cell still shows the count of the run before
        the restart, which is the same number. So the cells the new kernel began (its ``execute_input``) are counted.
        """
        code_cells = sum(cell["type"] == "code" for cell in self.state(path)["cells"])

        def done() -> bool:
            seen = self.statuses(path)
            after = seen[seen.index("restarting") + 1 :] if "restarting" in seen else []
            state = self.state(path)
            return after.count("execute_input") >= code_cells and not state["busy"] and state["status"] == "idle"

        wait_until(
            done,
            timeout,
            lambda: f"{path}: Restart and Run All did not finish in {timeout:.0f} s: {self.statuses(path)}, {self.state(path)}",
            0.25,
        )
        self.wait_idle(path)

    def record_statuses(self, path: str) -> None:
        """From now on, note every kernel status the notebook goes through ('restarting', 'busy', 'idle', ...).

        A cell the kernel begins to run is noted too, as ``execute_input`` (the message the kernel sends then).
        """
        self.page.evaluate(
            f"""(path) => {{
                const p = ({PANEL_JS})(path);
                window.__nbStatuses = window.__nbStatuses || {{}};
                window.__nbStatuses[path] = [];
                p.sessionContext.statusChanged.connect((_, status) => window.__nbStatuses[path].push(status));
                p.sessionContext.iopubMessage.connect((_, msg) => {{
                    if (msg.header.msg_type === 'execute_input') window.__nbStatuses[path].push('execute_input');
                }});
            }}""",
            path,
        )

    def statuses(self, path: str) -> list[str]:
        """The kernel statuses noted since :meth:`record_statuses`."""
        return list(self.page.evaluate("(path) => (window.__nbStatuses || {})[path] || []", path))

    def interrupt(self, path: str) -> None:
        """Kernel > Interrupt Kernel."""
        self.activate(path)
        self.command("notebook:interrupt-kernel")

    def shutdown_kernel(self, path: str, timeout: float = 30) -> None:
        """Kernel > Shut Down Kernel (confirming a dialog if one asks), and wait until the notebook has no kernel."""
        self.activate(path)
        self.command("kernelmenu:shutdown", wait=False)
        gone = "([js, path]) => { const s = eval(js)(path); return !s.kernel || s.status === 'dead' || s.status === 'unknown'; }"
        deadline = time.monotonic() + timeout
        while not self.page.evaluate(gone, [STATE_JS, path]):
            if self.page.locator(".jp-Dialog").count():
                self.accept_dialog()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path}: the kernel was not shut down within {timeout:.0f} s: {self.state(path)}")
            time.sleep(0.1)

    def close(self, path: str) -> None:
        """Close the notebook's tab (Lab) or leave its page (Notebook 7), without saving again."""
        if self.kind == "lab":
            self.page.evaluate(f"(path) => {{ const p = ({PANEL_JS})(path); p.context.model.dirty = false; p.close(); }}", path)
            self.page.wait_for_function(f"(path) => !({PANEL_JS})(path)", arg=path, timeout=15_000)
        else:
            self.page.evaluate(f"(path) => {{ const p = ({PANEL_JS})(path); p.context.model.dirty = false; }}", path)
            self.page.goto(self.server.url("tree"))
            self.wait_app()

    def change_theme(self, name: str) -> None:
        """Settings > Theme (``apputils:change-theme``), waiting until the new theme's colours are in effect."""
        theme = LAB_THEMES.get(name, name)
        light = "true" if "light" in theme.lower() else "false"
        self.command("apputils:change-theme", {"theme": theme})
        self.page.wait_for_function(
            "(light) => document.body.dataset.jpThemeLight === light && "
            "getComputedStyle(document.body).getPropertyValue('--jp-layout-color0').trim() !== ''",
            arg=light,
            timeout=30_000,
        )
        self.page.wait_for_timeout(500)  # the theme's stylesheet is swapped in; let layout and fonts settle

    def shoot_themes(self, element: Locator, name: str) -> list[Path]:
        """Screenshots of ``element`` in the light and the dark theme (ARTIFACTS/<name>-<theme>.png), printed; back to light."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shots = []
        for theme in ("light", "dark"):
            self.change_theme(theme)
            element.scroll_into_view_if_needed()
            shots.append(ARTIFACTS / f"{name}-{theme}.png")
            element.screenshot(path=str(shots[-1]))
        self.change_theme("light")
        print("\n" + "\n".join(f"screenshot: {shot}" for shot in shots))
        return shots


def hangup_ends_it() -> None:
    """In a server's child process: SIGHUP ends it, as in a terminal, even when the tests run under ``nohup``."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def wait_until(condition: Callable[[], Any], timeout: float, message: str | Callable[[], str], interval: float = 0.1) -> Any:
    """Poll ``condition`` until it returns something true (returned); on timeout fail with ``message``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(message() if callable(message) else message)
        time.sleep(interval)


def visible_text(locator: Locator) -> str:
    """The text a user sees in an element (innerText: hidden parts left out)."""
    return str(locator.evaluate("(el) => el.innerText"))


def screenshot_pages(pages: Iterable[Page], name: str) -> list[Path]:
    """Save a full-page screenshot of each open page to ARTIFACTS; their paths."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    saved = []
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:150]
    for i, page in enumerate(pages):
        if page.is_closed():
            continue
        target = ARTIFACTS / f"{safe}{'-' + str(i) if i else ''}.png"
        try:
            page.screenshot(path=str(target), full_page=True, timeout=15_000)
            saved.append(target)
        except Exception:  # a page that cannot be drawn any more is no reason to hide the test's own failure
            continue
    return saved


# Reading what is on screen -----------------------------------------------------------------------------------
def wait_stable(locator: Locator, quiet: float = 1.5, timeout: float = 30) -> str:
    """Wait until an element's visible text has not changed for ``quiet`` seconds; that text."""
    deadline = time.monotonic() + timeout
    last, since = visible_text(locator), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = visible_text(locator)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return now
    return last


# WCAG 2 contrast of every visible text node under the given elements, from computed styles.  The background is the
# first opaque background up the tree, with the translucent ones above it composited in; the text colour's alpha and
# the ancestors' opacity are applied over it.  Text inside disabled controls (WCAG exempts inactive components) and
# highlighted code whose colour is one of the theme's own editor colours (--jp-mirror-editor-*-color: JupyterLab's
# palette, not nbagent's) is measured but reported as excluded; highlighted code in colours of its own is judged.
CONTRAST_JS = """
(roots) => {
  const PALETTE = ['keyword', 'atom', 'number', 'def', 'variable', 'variable-2', 'variable-3', 'punctuation', 'property',
                   'operator', 'comment', 'string', 'string-2', 'meta', 'qualifier', 'builtin', 'bracket', 'tag',
                   'attribute', 'header', 'quote', 'link', 'error', 'hr'];
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const parse = (value) => {
    const m = /^rgba?\\(([^)]*)\\)$/.exec(String(value).trim());
    if (m) {
      const p = m[1].split(/[\\s,\\/]+/).filter(Boolean);
      const channel = (s) => s.endsWith('%') ? parseFloat(s) * 2.55 : parseFloat(s);
      const alpha = p.length > 3 ? (p[3].endsWith('%') ? parseFloat(p[3]) / 100 : parseFloat(p[3])) : 1;
      return [channel(p[0]), channel(p[1]), channel(p[2]), alpha];
    }
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = 'rgba(0, 0, 0, 0)';
    ctx.fillStyle = value;
    ctx.fillRect(0, 0, 1, 1);
    const d = ctx.getImageData(0, 0, 1, 1).data;
    return [d[0], d[1], d[2], d[3] / 255];
  };
  const over = (top, bottom) => {
    const a = top[3] + bottom[3] * (1 - top[3]);
    if (a === 0) return [0, 0, 0, 0];
    const mix = (i) => (top[i] * top[3] + bottom[i] * bottom[3] * (1 - top[3])) / a;
    return [mix(0), mix(1), mix(2), a];
  };
  const luminance = (c) => {
    const lin = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
  };
  const css = (c) => `rgba(${c.map((v, i) => i < 3 ? Math.round(v) : +v.toFixed(2)).join(', ')})`;
  const background = (el) => {
    const layers = [];
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const bg = parse(getComputedStyle(node).backgroundColor);
      if (bg[3] > 0) layers.push(bg);
      if (bg[3] >= 1) break;
    }
    let result = [255, 255, 255, 1];  // the canvas of a page with no opaque background at all
    if (layers.length && layers[layers.length - 1][3] >= 1) result = layers.pop();
    while (layers.length) result = over(layers.pop(), result);
    return result;
  };
  const opacity = (el) => {
    let o = 1;
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) o *= parseFloat(getComputedStyle(node).opacity || '1');
    return o;
  };
  const where = (el) => {
    const parts = [];
    for (let node = el; node && node.nodeType === 1 && parts.length < 4; node = node.parentElement) {
      const cls = [...node.classList].filter((c) => !c.startsWith('lm-')).slice(0, 2).join('.');
      parts.unshift(node.tagName.toLowerCase() + (cls ? '.' + cls : ''));
      if (node.classList.contains('jp-OutputArea-output')) break;
    }
    return parts.join(' > ');
  };
  const body = getComputedStyle(document.body);
  const palette = new Set(PALETTE.map((name) => body.getPropertyValue(`--jp-mirror-editor-${name}-color`).trim())
                                 .filter(Boolean).map((value) => css(parse(value))));
  const excluded = (el, fg) => {
    if (el.closest('button:disabled, [disabled], .mod-disabled, [aria-disabled="true"]')) return 'disabled control';
    const highlighted = el.closest('.cm-editor') || (el.tagName === 'SPAN' && el.className && el.closest('pre, code'));
    if (highlighted && palette.has(css(fg))) return "the theme's syntax palette";
    return '';
  };
  const measure = (el, text) => {
    const bg = background(el);
    const fg = parse(getComputedStyle(el).color);
    const reason = excluded(el, fg);
    fg[3] *= opacity(el);
    const shown = over(fg, bg);
    const [hi, lo] = [luminance(shown), luminance(bg)].sort((a, b) => b - a);
    return {
      text: text.replace(/\\s+/g, ' ').trim().slice(0, 70),
      ratio: Math.round(((hi + 0.05) / (lo + 0.05)) * 100) / 100,
      color: css(fg), background: css(bg), where: where(el), excluded: reason,
    };
  };
  const results = [];
  for (const root of roots) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const el = node.parentElement;
      if (!el || !node.textContent.trim() || el.closest('script, style, noscript, template')) continue;
      if (!el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) continue;
      if (el.tagName !== 'OPTION') {
        const range = document.createRange();
        range.selectNodeContents(node);
        if (![...range.getClientRects()].some((r) => r.width > 0 && r.height > 0)) continue;
      }
      results.push(measure(el, node.textContent));
    }
    for (const field of root.querySelectorAll('input, textarea')) {
      if (field.type === 'range' || field.type === 'checkbox' || !field.value || !field.checkVisibility()) continue;
      results.push(measure(field, field.value));
    }
  }
  return results;
}
"""


def contrast(locators: Iterable[Locator]) -> list[dict[str, Any]]:
    """The contrast of every visible text under each element (see CONTRAST_JS), one record per text node."""
    results: list[dict[str, Any]] = []
    for locator in locators:
        for handle in locator.element_handles():
            results += handle.evaluate(f"(el) => ({CONTRAST_JS})([el])")
    return results

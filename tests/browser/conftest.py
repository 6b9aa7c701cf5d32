"""Fixtures for the browser suite: the fake Anthropic server, a real JupyterLab and Notebook 7 server, headless Chromium.

One server and one page per module (they take seconds to start); one Chromium for the whole run. Every test in
this folder is marked ``browser`` and ``slow`` (tests/conftest.py skips it here, with a one-line reason, when
Chromium, Playwright, JupyterLab, Notebook 7 or a python3 kernel is missing, and fails it under CI=true). A failing test's pages are saved as screenshots
in ``tests/browser/artifacts/`` (ignored by git); their paths are printed with the failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.harness import ConsoleLog, Jupyter, JupyterServer, kernel_env, launch_chromium, screenshot_pages
from tests.notebook.test_labextension import need_extension
from tests.support.fake_anthropic import FakeAnthropic

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

HERE = Path(__file__).resolve().parent
VIEWPORT = {"width": 1280, "height": 1000}
_pages: list[Page] = []  # every page the fixtures opened, screenshotted when a test fails
_servers: list[JupyterServer] = []  # every server started, whose log a failure points to


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test in tests/browser/ is a ``browser`` test, and ``slow`` (servers and Chromium take seconds to start)."""
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    """On a failure, save a screenshot of every open page and print where it is (and where the servers' logs are)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or HERE not in Path(str(item.path)).resolve().parents:
        return
    saved = screenshot_pages(_pages, f"{item.name}-{report.when}")
    lines = [f"screenshot: {path}" for path in saved] or ["screenshot: none (no open page)"]
    lines += [f"{server.kind} server log: {server.log_path}" for server in _servers if server.log_path is not None]
    report.sections.append(("browser artifacts", "\n".join(lines)))
    print("\n" + "\n".join(lines))


@pytest.fixture(scope="module")
def fake_api() -> Iterator[FakeAnthropic]:
    """The fake Messages API the kernels talk to (one per module: the kernels outlive a test)."""
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(scope="module")
def browser_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's folder: notebooks under ``root/``, Jupyter's own files under ``home/``, nbagent's under ``data/``."""
    return tmp_path_factory.mktemp("browser")


def _server(kind: str, home: Path, fake: FakeAnthropic, *, collaborative: bool = False) -> Iterator[JupyterServer]:
    """Start a server of ``kind`` for the module (real-time collaboration only when ``collaborative``), stopped after it."""
    env = kernel_env(home / f"{kind}-home", fake.base_url, home / "nbagent-data", collaborative=collaborative)
    server = JupyterServer(kind, home / f"{kind}-root", env)
    _servers.append(server)
    try:
        server.start()
        problems = server.offline_problems()
    except RuntimeError as exc:
        pytest.fail(f"could not start jupyter {kind}: {exc}", pytrace=False)
    if problems:
        server.stop()
        pytest.fail(f"jupyter {kind} is not offline: " + "; ".join(problems), pytrace=False)
    try:
        yield server
    finally:
        server.stop()
        _servers.remove(server)


@pytest.fixture(scope="module")
def lab_server(browser_home: Path, fake_api: FakeAnthropic) -> Iterator[JupyterServer]:
    """A real JupyterLab server on 127.0.0.1 whose kernels use the fake API and a private NBAGENT_DATA_DIR."""
    yield from _server("lab", browser_home, fake_api)


@pytest.fixture(scope="module")
def lab_rtc_server(browser_home: Path, fake_api: FakeAnthropic) -> Iterator[JupyterServer]:
    """A JupyterLab server with real-time collaboration on (jupyter-collaboration: one shared document per notebook)."""
    yield from _server("lab", browser_home, fake_api, collaborative=True)


@pytest.fixture(scope="module")
def notebook7_server(browser_home: Path, fake_api: FakeAnthropic) -> Iterator[JupyterServer]:
    """A real Jupyter Notebook 7 server, set up like ``lab_server``."""
    yield from _server("notebook", browser_home, fake_api)


@pytest.fixture(scope="module")  # not session: sync_playwright keeps an event loop running until it exits
def chromium() -> Iterator[Browser]:
    """Headless Chromium from the distribution (``$CHROMIUM`` or the first chromium on PATH), driven by Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium: Browser, server: Any) -> Iterator[Page]:
    """A fresh page of its own for a test of a plain server's session page (the module defines ``server``)."""
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    _pages.append(page)  # screenshotted if the test fails
    try:
        yield page
    finally:
        _pages.remove(page)
        context.close()


@pytest.fixture(scope="module")
def console() -> ConsoleLog:
    """The console errors, page errors and failed requests of every page the module opens."""
    return ConsoleLog()


def _app(chromium: Browser, server: JupyterServer, console: ConsoleLog, label: str) -> Iterator[Jupyter]:
    context = chromium.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(30_000)
    console.watch(page, label)
    _pages.append(page)
    app = Jupyter(page, server)
    try:
        app.start()
        page.wait_for_timeout(1000)  # late errors of the app's own start-up
        console.mark_baseline(label)
        yield app
    finally:
        _pages.remove(page)
        context.close()


@pytest.fixture(scope="module")
def lab(chromium: Browser, lab_server: JupyterServer, console: ConsoleLog) -> Iterator[Jupyter]:
    """One JupyterLab page for the module, loaded and ready."""
    yield from _app(chromium, lab_server, console, "JupyterLab")


@pytest.fixture(scope="module")
def lab_rtc(chromium: Browser, lab_rtc_server: JupyterServer, console: ConsoleLog) -> Iterator[Jupyter]:
    """One JupyterLab page on the collaborative server."""
    yield from _app(chromium, lab_rtc_server, console, "JupyterLab (RTC)")


@pytest.fixture(scope="module")
def notebook7(chromium: Browser, notebook7_server: JupyterServer, console: ConsoleLog) -> Iterator[Jupyter]:
    """One Notebook 7 page for the module, loaded and ready."""
    yield from _app(chromium, notebook7_server, console, "Notebook 7")


@pytest.fixture(scope="module")
def extension_installed() -> None:
    """Skip a module that needs nbagent's extension where it is not installed (a machine with no Node.js); fail under CI."""
    need_extension()


@pytest.fixture(params=["lab", "notebook7"], scope="module")
def app(request: pytest.FixtureRequest) -> Iterator[Jupyter]:
    """JupyterLab, then Notebook 7 (for the modules that ask for ``app``)."""
    yield request.getfixturevalue(request.param)

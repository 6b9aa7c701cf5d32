"""Shared fixtures (a fake Anthropic server on 127.0.0.1, a real SDK client, real kernels) and the markers' part checks."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.support.fake_anthropic import FakeAnthropic

# Tests never talk to the real API: drop any real key and base URL from the environment.
for _name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
    os.environ.pop(_name, None)

# Tests never touch the real signing secret: every test (and every child process or kernel
# it starts, which inherit os.environ) uses a throwaway per-user data folder.
_DATA_DIR = tempfile.mkdtemp(prefix="nbagent-test-data-")
os.environ["NBAGENT_DATA_DIR"] = _DATA_DIR


def missing_part(marker: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """Why this machine lacks the part a ``kernel``, ``browser``, ``postgres`` or ``mcp`` test needs (None: it has it)."""
    path = environ.get("PATH", "")
    if marker == "kernel":
        for package in ("jupyter_client", "ipykernel"):
            if importlib.util.find_spec(package) is None:
                return f"needs a Jupyter kernel: {package} is not installed"
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

        try:
            KernelSpecManager().get_kernel_spec("python3")
        except NoSuchKernel:
            return "needs a Jupyter kernel: no python3 kernelspec"
    elif marker == "browser":
        from tests.browser.harness import find_chromium

        if find_chromium(environ) is None:
            return "needs Chromium: set CHROMIUM to its path or put chromium on PATH (apt-get install chromium)"
        for package, what in (("playwright", "Playwright for Python"), ("jupyterlab", "JupyterLab"), ("notebook", "Jupyter Notebook 7")):
            if importlib.util.find_spec(package) is None:
                return f"needs {what}: {package} is not installed (pip install -e '.[test]')"
        return missing_part("kernel", environ)  # the notebooks run in a real python3 kernel
    elif marker == "postgres":
        if not environ.get("NBAGENT_TEST_POSTGRES") and not (shutil.which("initdb", path=path) and shutil.which("pg_ctl", path=path)):
            return "needs PostgreSQL: set NBAGENT_TEST_POSTGRES to a server's DSN, or put initdb and pg_ctl on PATH"
    elif marker == "mcp":
        if importlib.util.find_spec("mcp") is None:
            return "needs the mcp SDK: pip install -e '.[test]' (or 'nbagent[mcp]')"
    return None


def scope_of(nodeid: str) -> str:
    """Which tests run together on one pytest-xdist worker: a test file, or all the browser tests (tests/browser/)."""
    path = nodeid.split("::", 1)[0]
    return "tests/browser/" if path.startswith("tests/browser/") else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadfile``: a test file runs whole on one worker (its module fixtures start once), and the browser
    tests all run on one worker, one at a time (two Chromiums and Jupyter servers at once starve a small machine).
    xdist's own ``loadgroup`` would say this with markers, but it renames items through an attribute pytest 9 no longer reads."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class ByScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ByScope(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test whose part is missing here, with a one-line reason; under CI=true fail instead (CI runs everything)."""
    for marker in ("kernel", "browser", "postgres", "mcp"):
        if item.get_closest_marker(marker) is None:
            continue
        reason = missing_part(marker)
        if reason is None:
            continue
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI=true, so a {marker} test may not be skipped: it {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(autouse=True, scope="session")
def _private_data_dir() -> Iterator[None]:
    """The throwaway NBAGENT_DATA_DIR, removed after the run."""
    yield
    shutil.rmtree(_DATA_DIR, ignore_errors=True)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """A running fake Messages API server."""
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def kernels(tmp_path: Path, fake: FakeAnthropic) -> Iterator[Callable[[], Any]]:
    """Start real kernels for the notebook ``work.ipynb`` in ``tmp_path``, their API the fake one; each is shut down after."""
    from tests.support.kernels import notebook_kernels

    with notebook_kernels(tmp_path, fake.base_url) as start:
        yield start


@pytest.fixture
def client(fake: FakeAnthropic) -> anthropic.Anthropic:
    """The real SDK client, talking HTTP to the fake server."""
    return anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=2)


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    """Where a test's session log goes."""
    return tmp_path / "session.jsonl"


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeAnthropic) -> Iterator[Any]:
    """An in-process IPython shell in a fresh folder with nbagent loaded and the fake server as the API."""
    from IPython.core.interactiveshell import InteractiveShell

    import nbagent

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    ip = InteractiveShell.instance()
    names_before = set(ip.user_ns)
    ip.run_cell("%load_ext nbagent")
    yield ip
    ip.run_cell("%unload_ext nbagent")
    # The shell is one per process: names a test made (or a tool it defined) must not reach the next test.
    for name in [n for n, v in ip.user_ns.items() if n not in names_before or isinstance(v, nbagent.Tool)]:
        del ip.user_ns[name]
    ip.config.pop("Agent", None)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAnthropic]:
    """A fake Messages API server shared by a module's tests (for a kernel that outlives one test)."""
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real ipykernel (``tests.support.kernels.Kernel``) shared by a module's tests, in its own folder, its API at ``server``."""
    from tests.support.kernels import Kernel, kernel_env

    with Kernel(tmp_path_factory.mktemp("kernel"), kernel_env(server.base_url)) as started:
        yield started

"""The house's floors, held: nbagent's packages stack, each importing only from below, with no circle between modules.

Read from the code with ``ast`` (nothing is imported): an import inside a function counts like one at the top; one
under ``if TYPE_CHECKING:`` counts for no rule.  The same checker runs on small made-up trees first, so that each
rule is seen to fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nbagent"

# Bottom to top.  A floor may import its own package and any floor below; packages on one floor import each other not at all.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors", "terminal", "threads", "_version"),  # the leaves
    ("record",),  # one log line and its reading
    ("state",),  # pure rules over events
    ("stores",),  # where logs live
    ("model", "tools"),  # the model seam; tools
    ("agent",),  # the impure engine
    ("render",),  # events shown to people
    ("history",),  # the sessions on disk, listed and checked
    ("cli", "notebook", "server"),  # the front ends
)
FACADE = ("__init__", "__main__")  # nbagent itself: the public names, imported by nobody inside
FRONT_END_ONLY = ("IPython", "ipywidgets", "ipykernel", "comm", "jupyter_server", "tornado")
FRONT_ENDS = ("notebook", "server")
MAX_LINES = 400
MAX_TOP_MODULES = 8


@dataclass(frozen=True)
class Import:
    """One import of one module by another, with where it is written."""

    importer: str
    imported: str
    line: int


def module_name(path: Path, root: Path) -> str:
    """The dotted name of a file under ``root`` (the package's folder)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name."""
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def imports(root: Path) -> Iterator[Import]:
    """Every import of a module, inside the package or outside it, that counts (TYPE_CHECKING blocks left out)."""
    known = modules(root)
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        skipped = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(name, alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                source = ".".join([*base, node.module] if node.module else base)
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    yield Import(name, submodule if submodule in known else source, node.lineno)


def floor_of(name: str, top: str) -> tuple[int, str] | None:
    """The floor and package of a module of the package ``top``; None for the facade."""
    parts = name.split(".")
    if parts[0] != top or len(parts) == 1 or parts[1] in FACADE:
        return None
    for level, packages in enumerate(FLOORS):
        if parts[1] in packages:
            return level, parts[1]
    raise AssertionError(f"{name} is on no floor: put it in a package of FLOORS (tests/test_layers.py)")


def upward_imports(root: Path) -> list[str]:
    """Imports of a floor above, of a neighbour on the same floor, or of the facade."""
    top, found = root.name, []
    for edge in imports(root):
        if edge.imported.split(".")[0] != top:
            continue
        here, there = floor_of(edge.importer, top), floor_of(edge.imported, top)
        if here is None:
            continue
        if there is None:
            found.append(f"{edge.importer}:{edge.line} imports {edge.imported}, the facade (import from the module that defines it)")
        elif there[0] > here[0] or (there[0] == here[0] and there[1] != here[1]):
            found.append(f"{edge.importer}:{edge.line} imports {edge.imported}, which is not below it")
    return found


def circles(root: Path) -> list[list[str]]:
    """The import circles between modules (Tarjan's strongly connected components of two or more)."""
    graph: dict[str, set[str]] = {name: set() for name in modules(root)}
    for edge in imports(root):
        if edge.imported in graph and edge.imported != edge.importer:
            graph[edge.importer].add(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def front_end_imports(root: Path) -> list[str]:
    """IPython, widgets, the kernel or the Jupyter server imported outside the front ends; the two front ends importing each other."""
    top, found = root.name, []
    for edge in imports(root):
        parts = edge.importer.split(".")
        inside = parts[1] if len(parts) > 1 else ""
        library = edge.imported.split(".")[0]
        if library in FRONT_END_ONLY and inside not in FRONT_ENDS and inside not in FACADE:
            found.append(f"{edge.importer}:{edge.line} imports {edge.imported} outside {' and '.join(FRONT_ENDS)}")
        imported = edge.imported.split(".")
        if library == top and inside in FRONT_ENDS and len(imported) > 1 and imported[1] in FRONT_ENDS and imported[1] != inside:
            found.append(f"{edge.importer}:{edge.line} imports {edge.imported}: {' and '.join(FRONT_ENDS)} never import each other")
    return found


def long_modules(root: Path) -> list[str]:
    """Modules over MAX_LINES lines."""
    return [f"{name}: {n} lines" for name, path in modules(root).items() if (n := len(path.read_text().splitlines())) > MAX_LINES]


def look_alikes(root: Path) -> list[str]:
    """Pairs of modules whose file names are the same, or differ by one letter (model/models, two replay.py)."""
    stems = sorted({(path.stem, name) for name, path in modules(root).items() if path.stem != "__init__"})
    stems += sorted((name.rsplit(".", 1)[-1], name) for name, path in modules(root).items() if path.stem == "__init__" and "." in name)
    found = []
    for i, (stem, name) in enumerate(stems):
        for other_stem, other in stems[i + 1 :]:
            if _one_apart(stem, other_stem):
                found.append(f"{name} and {other}")
    return found


def _one_apart(a: str, b: str) -> bool:
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def undocumented_packages(root: Path) -> list[str]:
    """Packages whose docstring does not say what they may import."""
    found = []
    for name, path in modules(root).items():
        if path.name == "__init__.py" and name != root.name:
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            if "May import" not in doc:
                found.append(f"{name}: its docstring does not say 'May import: ...'")
    return found


def test_no_floor_imports_one_above_it() -> None:
    assert upward_imports(PACKAGE) == []


def test_no_circle_between_modules() -> None:
    assert circles(PACKAGE) == []


def test_ipython_widgets_and_the_server_only_in_the_front_ends() -> None:
    assert front_end_imports(PACKAGE) == []


def test_every_module_is_at_most_400_lines() -> None:
    assert long_modules(PACKAGE) == []


def test_every_extension_source_is_at_most_400_lines() -> None:
    sources = sorted((PACKAGE.parent / "labextension" / "src").glob("*.ts"))
    assert sources, "labextension/src holds the extension's TypeScript"
    assert [f"{path.name}: {n} lines" for path in sources if (n := len(path.read_text().splitlines())) > MAX_LINES] == []


def test_no_two_modules_have_look_alike_names() -> None:
    assert look_alikes(PACKAGE) == []


def test_each_package_says_what_it_may_import() -> None:
    assert undocumented_packages(PACKAGE) == []


def test_few_modules_stand_directly_in_the_package() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    assert {path.name for path in PACKAGE.iterdir() if path.is_dir() and (path / "__init__.py").exists()} == {
        package for floor in FLOORS for package in floor if (PACKAGE / package).is_dir()
    }


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "nbagent"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "check", "expected"),
    [
        (
            {"record/__init__.py": "", "record/a.py": "from ..state import b\n", "state/__init__.py": "", "state/b.py": ""},
            upward_imports,
            "not below",
        ),
        (
            {"record/__init__.py": "", "record/a.py": "def f():\n    from ..agent import c\n", "agent/__init__.py": "", "agent/c.py": ""},
            upward_imports,
            "not below",
        ),
        (
            {"model/__init__.py": "", "model/a.py": "from ..tools import b\n", "tools/__init__.py": "", "tools/b.py": ""},
            upward_imports,
            "not below",
        ),
        ({"state/__init__.py": "", "state/a.py": "from .. import __version__\n"}, upward_imports, "the facade"),
        (
            {"state/__init__.py": "", "state/a.py": "from . import b\n", "state/b.py": "def f():\n    from . import a\n"},
            circles,
            "nbagent.state.a",
        ),
        ({"agent/__init__.py": "", "agent/a.py": "import IPython\n"}, front_end_imports, "outside"),
        (
            {"notebook/__init__.py": "", "notebook/a.py": "from ..server import b\n", "server/__init__.py": "", "server/b.py": ""},
            front_end_imports,
            "never import",
        ),
        ({"state/__init__.py": "", "state/a.py": "x = 1\n" * 401}, long_modules, "401 lines"),
        (
            {"state/__init__.py": "", "state/model.py": "", "agent/__init__.py": "", "agent/models.py": ""},
            look_alikes,
            "nbagent.agent.models",
        ),
        ({"state/__init__.py": '"""Rules."""\n'}, undocumented_packages, "May import"),
    ],
    ids=[
        "up-a-floor",
        "up-inside-a-function",
        "same-floor-neighbour",
        "the-facade",
        "circle",
        "ipython",
        "front-ends",
        "long",
        "look-alike",
        "docstring",
    ],
)
def test_each_rule_fails_on_a_tree_that_breaks_it(tmp_path: Path, files: dict[str, str], check, expected: str) -> None:  # noqa: ANN001
    found = check(_tree(tmp_path, files))
    assert found and expected in str(found), found


def test_type_checking_imports_count_for_no_rule(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "state/__init__.py": "",
            "state/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..agent import b\n    import IPython\n",
            "agent/__init__.py": "",
            "agent/b.py": "from ..state import a\n",
        },
    )
    assert upward_imports(root) == [] and circles(root) == [] and front_end_imports(root) == []

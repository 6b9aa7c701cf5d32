"""Export to .ipynb (validated, executed with nbclient) and Markdown, with hostile model output kept inert."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import anthropic
import nbformat
import pytest
from markdown_it import MarkdownIt

import nbagent
from nbagent import history
from nbagent.cli import export
from tests.history.test_history import PNG, python_tool, read_file, record_session
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

HOSTILE = (
    "Here you go <script>alert('x')</script> and <img src=x onerror=alert(1)> "
    "[click me](javascript:alert(document.cookie)) <svg onload=alert(2)></svg> "
    "<a href='javascript:alert(3)'>link</a> &lt;b&gt; "
    "[ref]\n\n[ref]: javascript:alert(4)\n\n\\`<iframe src=javascript:alert(5)>`\n\n"
    "```html\n<script>inside a fence is only code</script>\n```\n"
)


def rendered_html(markdown: str) -> str:
    """What a Markdown renderer that allows raw HTML (as Jupyter's does) would produce."""
    return MarkdownIt("commonmark", {"html": True}).render(markdown)


SAFE_TAGS = {
    "p",
    "strong",
    "em",
    "code",
    "pre",
    "a",
    "h1",
    "h2",
    "h3",
    "ul",
    "ol",
    "li",
    "blockquote",
    "br",
    "hr",
    "img",
    "details",
    "summary",
}  # the last two: a long note, collapsed (render/markdown.py)


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))


def assert_inert(html: str) -> None:
    """Only harmless elements: no script-capable tag, no event handler, no script or foreign-data URL."""
    parser = _Elements()
    parser.feed(html)
    for tag, attrs in parser.found:
        assert tag in SAFE_TAGS, (tag, html)
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        for name in ("href", "src"):
            scheme = attrs.get(name, "").split(":", 1)[0].strip().lower() if ":" in attrs.get(name, "") else ""
            assert scheme not in ("javascript", "vbscript", "data") or attrs[name].startswith("data:image/png;base64,"), attrs


@pytest.fixture
def recorded(log_path: Path, client: anthropic.Anthropic, fake: FakeAnthropic) -> Path:
    return record_session(log_path, client, fake)


def test_notebook_cells_follow_the_session(recorded: Path) -> None:
    notebook = export.to_notebook(history.read_all(recorded), source=recorded)
    nbformat.validate(notebook)
    kinds = [(c.cell_type, c.metadata.get("nbagent", {}).get("kind")) for c in notebook.cells]
    assert kinds == [
        ("markdown", None),  # the header
        ("markdown", "request"),
        ("markdown", "reply"),  # "Let me compute."
        ("code", "call"),  # the python tool call
        ("markdown", "call"),  # read_file
        ("markdown", "reply"),
        ("markdown", "request"),
        ("markdown", "reply"),
    ]
    code = notebook.cells[3]
    assert code.source == "print(1 + 1)"
    assert code.outputs[0] == {"output_type": "stream", "name": "stdout", "text": "ran 12 characters\n"}
    assert code.outputs[1]["data"]["image/png"] == PNG
    assert "read_file" in notebook.cells[4].source and "Quarterly Revenue was 42" in notebook.cells[4].source
    assert "claude-test" in notebook.cells[0].source and notebook.metadata["nbagent"]["source"] == recorded.name


@pytest.mark.kernel
def test_the_exported_notebook_runs_with_nbclient(recorded: Path, tmp_path: Path) -> None:
    from nbclient import NotebookClient

    out = export.export(history.read_all(recorded), tmp_path / "session.ipynb")
    notebook = nbformat.read(out, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    (code,) = [c for c in notebook.cells if c.cell_type == "code"]
    assert code.outputs[0]["text"] == "2\n"  # re-executed: the real output of the recorded code


def test_markdown_export(recorded: Path) -> None:
    markdown = export.to_markdown(history.read_all(recorded), source=recorded)
    assert markdown.count("## Request") == 2
    assert "```python\nprint(1 + 1)\n```" in markdown and "ran 12 characters" in markdown
    assert f"![output image](data:image/png;base64,{PNG})" in markdown
    assert "<img" in rendered_html(markdown)  # the image (a data: URL of a PNG) is the only HTML element


def test_hostile_output_is_inert_in_both_formats(tmp_path: Path, client: anthropic.Anthropic, fake: FakeAnthropic) -> None:
    fake.script(
        tool_use("read_file", {"path": "<script>alert(9)</script>"}, text=HOSTILE),
        text(HOSTILE),
    )

    @nbagent.tool(effect="read", name="read_file")
    def hostile_file(path: str) -> str:
        """Return hostile content."""
        return HOSTILE + "\n```\n<script>breakout</script>"

    with nbagent.Session.open(tmp_path / "h.jsonl") as session:
        nbagent.run(session, "show me <b onmouseover=alert(0)>this</b>", tools=[hostile_file], client=client, model="claude-test")
    events = history.read_all(tmp_path / "h.jsonl")
    notebook = export.to_notebook(events)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            assert_inert(rendered_html(cell.source))
    markdown = export.to_markdown(events)
    assert_inert(rendered_html(markdown))
    # The fenced code keeps the model's text as it was written; prose keeps it readable as text.
    assert "<script>inside a fence is only code</script>" in markdown
    assert "&lt;script>alert('x')&lt;/script>" in markdown
    assert "<script>alert('x')</script>" in rendered_html(markdown).replace("&lt;", "<").replace("&gt;", ">")
    assert "javascript-blocked:alert(4)" in markdown


def test_safe_markdown_and_fences() -> None:
    assert export.safe_markdown("a < b && c") == "a &lt; b &amp;&amp; c"
    assert export.safe_markdown("```\na < b\n```") == "```\na < b\n```"
    assert export.safe_markdown("    indented <code>") == "    indented <code>"
    assert export.fenced("x ```` y").startswith("`````\n")
    with pytest.raises(ValueError, match="use a .ipynb or .md"):
        export.format_for(Path("x.txt"))
    assert export.format_for(Path("x.txt"), "markdown") == "md"


def test_unfinished_calls_and_interruptions_are_shown(tmp_path: Path, client: anthropic.Anthropic, fake: FakeAnthropic) -> None:
    fake.script(tool_use("python", {"code": "import time"}))
    path = tmp_path / "cut.jsonl"
    with nbagent.Session.open(path) as session:
        session.append("user_msg", content="start")
        nbagent.Loop(session, tools=[python_tool, read_file], model=nbagent.AnthropicModel("claude-test", client=client))._call_model()
        session.append("interrupted", during="tools", open_calls=list(session.state.open_calls))
    notebook = export.to_notebook(history.read_all(path))
    code = [c for c in notebook.cells if c.cell_type == "code"][0]
    assert code.outputs[0]["name"] == "stderr" and "no result recorded" in code.outputs[0]["text"]
    assert any("Interrupted (during tools, 1 tool call(s) open)" in c.source for c in notebook.cells)


def test_notes_to_the_model_are_exported_as_notes_never_as_the_request(tmp_path: Path) -> None:
    restart = "[nbagent note: the Jupyter kernel was restarted since your last reply.]"
    with nbagent.Session.open(tmp_path / "s.jsonl", fsync="never") as session:
        session.append("user_msg", content="first question")
        session.append("assistant_msg", content=[{"type": "text", "text": "first answer"}], stop_reason="end_turn")
        session.append("note", kind="kernel_restarted", text="the kernel was restarted", to_model=restart)
        session.append("user_msg", content="second question")
        # a pre-v3 log sent the restart note inline, as the request's first text block
        session.append("user_msg", content=[{"type": "text", "text": restart}, {"type": "text", "text": "third question"}])
        events = list(session.events())
    requests = [p.text for p in export.parts(events) if p.kind == "request"]
    notes = [p.text for p in export.parts(events) if p.kind == "note"]
    assert requests == ["first question", "second question", "third question"]
    assert notes == ["Note to the model: the Jupyter kernel was restarted since your last reply."] * 2
    markdown = export.to_markdown(events)
    assert "[nbagent note:" not in markdown and markdown.count("Note to the model") == 2


def test_the_written_notebook_is_what_nbformat_writes(recorded: Path, tmp_path: Path) -> None:
    """Built without nbformat (its import takes about 2 s), the file is valid nbformat 4.5 and byte for byte its writer's."""
    out = export.export(history.read_all(recorded), tmp_path / "out.ipynb", source=recorded)
    written = out.read_text(encoding="utf-8")
    notebook = nbformat.reads(written, as_version=4)
    nbformat.validate(notebook)
    assert (notebook.nbformat, notebook.nbformat_minor) == (4, 5) and len({c.id for c in notebook.cells}) == len(notebook.cells)
    assert any(o.output_type == "display_data" for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    assert written == nbformat.writes(notebook) + "\n"


def test_an_ipynb_export_imports_neither_nbformat_nor_jsonschema(recorded: Path, tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from nbagent import history; from nbagent.cli import export; "
        f"export.export(history.read_all(Path({str(recorded)!r})), {str(tmp_path / 'x.ipynb')!r}); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nbformat', 'jsonschema', 'fastjsonschema')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]" and (tmp_path / "x.ipynb").stat().st_size > 0

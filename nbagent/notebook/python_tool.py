"""The ``python`` tool: the agent runs code in the kernel's user namespace, as if in a hidden cell.

Output is captured while the code runs: stdout and stderr into bounded buffers
(:class:`nbagent.tools.clipping.HeadTail`: the head and the tail are kept, the middle only
counted, so code printing gigabytes does not fill the kernel's memory), the value
of the last expression, ``display()`` calls and inline figures with IPython's own
capture utilities.  Text goes back to the model; images go back as base64 image
blocks so the model can see its plots.  Errors are returned to the model, never
printed into the cell.
"""

from __future__ import annotations

import ast
import base64
import re
import traceback
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from typing import Any, cast

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from ..state.image_limits import IMAGE_TYPES
from ..tools.clipping import HeadTail, fit
from ..tools.decorator import Tool

MAX_TEXT = 20_000  # characters of text in one block; the middle of longer output is counted, not kept
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NAME = "python"  # the one name of this tool (the magics offer it, the restart reader finds its calls)
DESCRIPTION = (
    "Run Python code in the user's Jupyter kernel. Variables, imports and functions persist between calls and "
    "are shared with the user's notebook cells (which the user may have run, so existing variables can be used). "
    "IPython syntax (%magics, !commands) works. Returns stdout, stderr, the value of the last expression, "
    "rich outputs (figures come back as images) and errors with a traceback."
)


class _Capture(HeadTail):
    """Where the code's stdout or stderr goes: a HeadTail whose ``write`` cannot be replaced on the instance.

    IPython 9's ``run_cell`` replaces ``sys.stdout.write`` for the cell to keep every write in its
    output history, unbounded; the agent's output is the model's (bounded here), not the user's cell's.
    """

    @property
    def write(self) -> Callable[[str], int]:
        return super().write

    @write.setter
    def write(self, _replacement: Any) -> None:
        pass


def _text(text: str) -> HeadTail:
    part = HeadTail(MAX_TEXT)
    part.write(text)
    return part


def _joined(texts: list[tuple[str, HeadTail]]) -> str:
    shown = fit([part for _, part in texts], MAX_TEXT)
    return "\n".join(label + text.rstrip("\n") for (label, _), text in zip(texts, shown, strict=True))


def run_code(shell: InteractiveShell, code: str) -> tuple[list[dict[str, Any]], BaseException | None]:
    """Run ``code`` in ``shell``'s user namespace; return content blocks for the model and the error, if any.

    A ``KeyboardInterrupt`` raised by the code is re-raised, so the loop records the interruption.
    """
    try:
        compile(shell.transform_cell(code), "<agent>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as exc:
        return [{"type": "text", "text": "".join(traceback.format_exception_only(exc)).strip()}], exc
    failure: list[tuple[type[BaseException], BaseException, Any]] = []

    def keep_error(_shell: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: Any = None) -> None:
        failure.append((etype, value, tb))  # returned to the model instead of being shown in the cell

    saved = (shell.custom_exceptions, shell.CustomTB)
    shell.set_custom_exc((BaseException,), keep_error)
    try:
        # Entering the display trap first makes run_cell's own (nested) entry keep the capturing hook.
        out, err = _Capture(MAX_TEXT), _Capture(MAX_TEXT)
        with (
            shell.display_trap,
            capture_output(stdout=False, stderr=False, display=True) as captured,
            redirect_stdout(out),
            redirect_stderr(err),
        ):
            shell.run_cell(code, store_history=False)
    finally:
        shell.custom_exceptions, shell.CustomTB = saved
    error = failure[0][1] if failure else None
    if isinstance(error, KeyboardInterrupt):
        raise KeyboardInterrupt
    blocks: list[dict[str, Any]] = []
    texts: list[tuple[str, HeadTail]] = []  # (label, text)
    if out.total:
        texts.append(("", out))
    if err.total:
        texts.append(("[stderr]\n", err))
    for output in captured.outputs:
        data = output.data or {}
        images = [m for m in IMAGE_TYPES if m in data]
        if images:
            if texts:
                blocks.append({"type": "text", "text": _joined(texts)})
                texts = []
            image = data[images[0]]
            if isinstance(image, bytes):
                image = base64.b64encode(image).decode()
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": images[0], "data": image.strip()}})
        elif "text/plain" in data:
            texts.append(("", _text(str(data["text/plain"]))))
    if failure:
        etype, value, tb = failure[0]
        tb = tb.tb_next if tb is not None and tb.tb_next is not None else tb  # skip IPython's own frame
        formatted = "".join(traceback.format_exception(etype, value, tb))
        texts.append(("", _text(_ANSI.sub("", formatted).rstrip())))
    if texts or not blocks:
        blocks.append({"type": "text", "text": _joined(texts) if texts else "(no output)"})
    return blocks, error


def python_tool(shell: InteractiveShell) -> Tool:
    """The ``python`` tool bound to ``shell`` (effect "write": running code changes the kernel's state)."""

    def python(code: str) -> list[dict[str, Any]]:
        """Run Python code in the user's Jupyter kernel.

        Args:
            code: The code to run, as in a notebook cell; the value of its last line is returned.
        """
        from anthropic.lib.tools import ToolError  # here: the SDK is loaded by the run that calls this (%load_ext never loads it)

        blocks, error = run_code(shell, code)
        if error is not None:
            raise ToolError(cast(Any, blocks))  # plain dicts of the shape of the SDK's block TypedDicts
        return blocks

    return Tool(python, effect="write", name=NAME, description=DESCRIPTION)

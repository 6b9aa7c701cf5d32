"""Tool-result images the API would refuse are downscaled or named in a note (nbagent/tools/image_fit.py)."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import anthropic
import pytest
from PIL import Image

import nbagent
from nbagent.state.image_limits import MAX_SIDE
from nbagent.tools.image_fit import fit_image, fit_images
from tests.support import fake_context
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use


def png(width: int, height: int) -> dict[str, Any]:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, format="PNG")
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(out.getvalue()).decode()}}


def size_of(block: dict[str, Any]) -> tuple[int, int]:
    with Image.open(io.BytesIO(base64.b64decode(block["source"]["data"]))) as image:
        return image.size


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (png(640, 480), (640, 480)),  # fits: the very same block
        (png(8_000, 200), (MAX_SIDE, 50)),  # too wide: downscaled, aspect kept
        (png(300, 3_000), (200, MAX_SIDE)),
    ],
)
def test_images_are_kept_or_downscaled(block: dict[str, Any], expected: tuple[int, int]) -> None:
    fitted = fit_image(block)
    assert size_of(fitted) == expected
    assert (fitted is block) == (expected == size_of(block))


@pytest.mark.parametrize(
    ("data", "why"),
    [("not base64!!", "not valid base64"), (base64.b64encode(b"plain text, not an image").decode(), "could not be read as an image")],
)
def test_an_unreadable_image_becomes_a_note(data: str, why: str) -> None:
    fitted = fit_image({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})
    assert fitted["type"] == "text" and why in fitted["text"]


def test_text_results_pass_untouched() -> None:
    content = [{"type": "text", "text": "hello"}]
    assert fit_images(content) is content and fit_images("plain") == "plain"


def test_a_tool_returning_a_huge_plot_sends_an_image_the_api_accepts(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    @nbagent.tool(effect="read")
    def plot() -> list[dict[str, Any]]:
        """Draw the plot."""
        return [{"type": "text", "text": "the plot:"}, png(9_000, 900)]

    fake.script(tool_use("plot", {}), text("a red bar"))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        nbagent.run(session, "plot it", tools=[plot], client=client, model="claude-test")
    sent = fake.requests[1].body["messages"][2]["content"][0]["content"]
    assert sent[0] == {"type": "text", "text": "the plot:"} and size_of(sent[1]) == (MAX_SIDE, 200)


def test_a_session_with_more_plots_than_a_request_may_carry_goes_on(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    @nbagent.tool(effect="read")
    def plots() -> list[dict[str, Any]]:
        """Draw thirty small plots."""
        return [png(8, 8) for _ in range(30)]

    fake.script(*[tool_use("plots", {}) for _ in range(4)], text("120 plots drawn"))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        nbagent.run(session, "plot them all", tools=[plots], client=client, model="claude-test")
        assert session.state.final_text == "120 plots drawn"
    sent = [fake_context.image_blocks(m) for m in fake.requests[-1].body["messages"]]
    assert sum(sent) == 100 and sent[2] == 10  # the first result's 20 oldest images went in as notes
    notes = [b["text"] for b in fake.requests[-1].body["messages"][2]["content"][0]["content"] if b["type"] == "text"]
    assert len(notes) == 20 and "a request carries at most 100 images" in notes[0]
    logged = [e for e in nbagent.read_events(tmp_path / "s.jsonl") if e["type"] == "tool_result"]
    assert [len(e["content"]) for e in logged] == [30] * 4  # the log keeps every image

"""Images by the Messages API's limits: base64 length, pixels, count and request size (issue 21, must hold 6).

The fake holds each request to the limits the docs give (tests/support/fake_images.py cites them); the tests below
send real tool results through the real SDK and check that every request is accepted and the session goes on.
"""

from __future__ import annotations

import base64
import functools
import io
import os
from pathlib import Path
from typing import Any

import anthropic
import pytest
from PIL import Image

import nbagent
from nbagent.record import events as ev
from nbagent.state import context as ctx
from nbagent.state.fold import State, fold
from nbagent.state.image_limits import MAX_BASE64, MAX_SIDE, refusal, sendable
from nbagent.tools.builtin import file_tools
from nbagent.tools.image_fit import fit_image
from tests.support import fake_images
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use


@functools.cache
def noise_png(width: int, height: int) -> bytes:
    """A PNG that does not compress: its size in bytes is about width x height x 3."""
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), os.urandom(width * height * 3)).save(out, format="PNG", compress_level=1)
    return out.getvalue()


def block(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}}


def flat_png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (20, 90, 200)).save(out, format="PNG")
    return out.getvalue()


def size_of(image: dict[str, Any]) -> tuple[int, int]:
    with Image.open(io.BytesIO(base64.b64decode(image["source"]["data"]))) as opened:
        return opened.size


def body_with(images: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": [*images, {"type": "text", "text": "look"}]}]}


# The fake knows the limits (the real API's wording) ------------------------------------------------------------------
OVER_5MB = block(noise_png(1_400, 1_000))  # 4.2 MB decoded, 5.6 MB of base64


@pytest.mark.parametrize(
    ("images", "refused"),
    [
        ([block(flat_png(8_000, 10))], None),
        ([block(flat_png(9_000, 10))], "At least one of the image dimensions exceed max allowed size: 8000 pixels"),
        ([block(flat_png(2_000, 10))] * 25, None),
        ([block(flat_png(2_500, 10))] * 20, None),  # 20 images: the 8,000-pixel limit still holds
        ([block(flat_png(2_500, 10))] * 21, "exceed max allowed size for many-image requests: 2000 pixels"),
        ([block(flat_png(8, 8))] * 101, "Too much media: 0 document pages + 101 images > 100"),
        ([OVER_5MB], "messages.0.content.0.image.source.base64: image exceeds 5 MB maximum: 5"),
    ],
)
def test_the_fake_refuses_what_the_api_refuses(images: list[dict[str, Any]], refused: str | None) -> None:
    problem = fake_images.problem(body_with(images))
    assert (problem is None) if refused is None else (problem is not None and refused in problem)


def test_the_5mb_limit_is_on_the_base64_not_the_bytes() -> None:
    data = noise_png(1_400, 1_000)
    assert len(data) < 5 * 1024 * 1024 < len(OVER_5MB["source"]["data"])


# The tool boundary: every image fits, or is a note --------------------------------------------------------------------
def test_an_image_over_5mb_of_base64_is_downscaled_under_it() -> None:
    fitted = fit_image(OVER_5MB)
    assert fitted["type"] == "image" and len(fitted["source"]["data"]) <= MAX_BASE64
    assert fake_images.problem(body_with([fitted])) is None


def test_a_declared_media_type_that_lies_is_corrected() -> None:
    out = io.BytesIO()
    Image.new("RGB", (30, 20)).save(out, format="JPEG")
    assert fit_image(block(out.getvalue(), "image/png"))["source"]["media_type"] == "image/jpeg"


def test_an_image_that_cannot_be_read_is_a_note() -> None:
    bomb = io.BytesIO()
    Image.new("1", (20_000, 20_000)).save(bomb, format="PNG")  # 400 megapixels in a few kilobytes
    fitted = fit_image(block(bomb.getvalue()))
    assert fitted["type"] == "text" and "could not be read" in fitted["text"]


# The fold: what the log holds from earlier versions never reaches a request ---------------------------------------------
@pytest.mark.parametrize(
    ("image", "why"),
    [
        (block(flat_png(MAX_SIDE, 10)), None),
        (block(flat_png(MAX_SIDE + 1, 10)), "2,001x10 pixels"),
        (OVER_5MB, "over the API's 5,242,880"),
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}, None),  # no header: the API decides
        ({"type": "text", "text": "hi"}, None),
    ],
)
def test_the_fold_names_the_images_the_api_would_refuse(image: dict[str, Any], why: str | None) -> None:
    found = refusal(image)
    assert (found is None) if why is None else (found is not None and why in found)
    sent = sendable([image], 7)
    assert (sent == [image]) if why is None else ("event 7" in sent[0]["text"])


def image_turn(n: int, images: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (ev.ASSISTANT_MSG, {"content": [{"type": "tool_use", "id": f"t{n}", "name": "plot", "input": {}}], "stop_reason": "tool_use"}),
        (ev.TOOL_RESULT, {"tool_use_id": f"t{n}", "content": images}),
    ]


def state_of(specs: list[tuple[str, dict[str, Any]]]) -> State:
    log = [ev.make(i + 1, kind, payload) for i, (kind, payload) in enumerate([(ev.USER_MSG, {"content": "q"}), *specs])]
    return fold(log)


def sent(state: State) -> list[int]:
    """The characters of image data each tool result carries in the request."""
    return [
        ctx.image_data(b["content"]) for m in state.messages for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def test_the_request_carries_at_most_max_image_data_the_oldest_go_first() -> None:
    big = block(noise_png(1_100, 1_100))  # about 4.85 MB of base64
    each = len(big["source"]["data"])
    state = state_of([step for n in range(7) for step in image_turn(n, [big])])
    assert sum(sent(state)) <= ctx.MAX_IMAGE_DATA < sum(sent(state)) + each
    assert sent(state)[:3] == [0, 0, 0] and sent(state)[3:] == [each] * 4
    assert [e[4] for e in state.images] == [each] * 4


def test_one_result_over_the_budget_keeps_its_latest_images() -> None:
    big = block(noise_png(1_100, 1_100))
    state = state_of(image_turn(1, [big] * 5))
    content = state.messages[-1]["content"][0]["content"]
    assert [b["type"] for b in content] == ["text", "image", "image", "image", "image"]
    assert sum(sent(state)) <= ctx.MAX_IMAGE_DATA


# End to end: the real SDK against the fake ------------------------------------------------------------------------------
def accepted(fake: FakeAnthropic) -> bool:
    """Whether the fake took every request the session sent (no 4xx)."""
    return all(fake_images.problem(r.body or {}) is None and len(r.raw) <= fake_images.MAX_REQUEST_BYTES for r in fake.requests)


@pytest.mark.slow
def test_a_4_2_mb_image_read_by_a_tool_does_not_poison_the_session(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    (tmp_path / "photo.png").write_bytes(noise_png(1_400, 1_000))
    fake.script(tool_use("read_file", {"path": "photo.png"}), text("a noisy photo"), text("still here"))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        tools = list(file_tools(tmp_path))
        nbagent.run(session, "what is in photo.png?", tools=tools, client=client, model="claude-test")
        assert session.state.final_text == "a noisy photo"
        nbagent.run(session, "and now?", tools=tools, client=client, model="claude-test")
        assert session.state.final_text == "still here"
    assert accepted(fake) and len(fake.requests) == 3
    image = fake.requests[1].body["messages"][2]["content"][0]["content"][1]
    assert image["type"] == "image" and len(image["source"]["data"]) <= MAX_BASE64


@pytest.mark.slow
def test_25_images_of_2500_pixels_go_in_one_valid_request(fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path) -> None:
    @nbagent.tool(effect="read")
    def frames() -> list[dict[str, Any]]:
        """Return the frames."""
        return [block(flat_png(2_500, 1_000)) for _ in range(25)]

    fake.script(tool_use("frames", {}), text("25 frames"))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        nbagent.run(session, "show the frames", tools=[frames], client=client, model="claude-test")
        assert session.state.final_text == "25 frames"
    images = fake.requests[1].body["messages"][2]["content"][0]["content"]
    assert accepted(fake) and [size_of(i) for i in images] == [(MAX_SIDE, 800)] * 25


@pytest.mark.slow
def test_a_session_near_the_request_size_limit_stays_under_it(fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path) -> None:
    photo = block(noise_png(1_100, 1_100))  # about 4.85 MB of base64: seven of them pass 32 MB

    @nbagent.tool(effect="read")
    def snapshot() -> list[dict[str, Any]]:
        """Take a snapshot."""
        return [photo]

    fake.script(*[tool_use("snapshot", {}) for _ in range(7)], text("seven snapshots"))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        nbagent.run(session, "take seven snapshots", tools=[snapshot], client=client, model="claude-test")
        assert session.state.final_text == "seven snapshots"
    assert accepted(fake) and len(fake.requests) == 8
    assert max(len(r.raw) for r in fake.requests) < ctx.MAX_IMAGE_DATA + 100_000  # 34 MB without the budget
    assert sum(fake_images.in_content(fake.requests[-1].body["messages"])[:1]) == 4  # the three oldest went in as notes


@pytest.mark.slow
def test_an_image_an_earlier_version_logged_over_5mb_is_left_out_of_later_requests(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    path = tmp_path / "s.jsonl"
    with nbagent.Session.open(path) as session:  # what the earlier version wrote: the 5.6 MB of base64 as the tool returned it
        session.append(ev.USER_MSG, content="what is in photo.png?")
        session.append(
            ev.ASSISTANT_MSG, content=[{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}], stop_reason="tool_use"
        )
        session.append(ev.TOOL_RESULT, tool_use_id="t1", content=[{"type": "text", "text": "photo.png:"}, OVER_5MB])
    fake.script(text("I could not see it"))
    with nbagent.Session.open(path) as session:
        nbagent.run(session, "well?", client=client, model="claude-test")
        assert session.state.final_text == "I could not see it"
    assert accepted(fake)
    result = fake.requests[0].body["messages"][2]["content"][0]["content"]
    assert result[1]["type"] == "text" and "the session log keeps it (event 4)" in result[1]["text"]

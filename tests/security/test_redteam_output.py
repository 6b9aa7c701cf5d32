"""Issue 20, defect 10: a tool printing hundreds of megabytes is bounded while it is read, not after.

The attacks are reliability/redteam/output.py's (the campaign runs the same functions): a real
``nbagent.run`` against the fake API in a child process, the shell tool and the python tool (in an
in-process IPython shell) printing 200 MB, and a command printing until its timeout kills it; the
child's peak memory must stay far below the output, and the result must be the head, an exact
count of what was left out, and the tail. The table tests below check the buffer itself.
"""

from __future__ import annotations

import random

import pytest

from nbagent.tools import builtin as toolkit
from nbagent.tools.clipping import ByteHeadTail, HeadTail, fit, note
from reliability import redteam
from reliability.redteam import output as attacks


@pytest.mark.slow  # child processes printing 200 MB through the loop
def test_every_output_attack_held() -> None:
    with redteam.context(quick=True) as ctx:
        findings = attacks.attacks(ctx)
    assert {f.defect for f in findings} == {10} and len(findings) == 3
    failed = [f"#{f.defect} {f.attack}: {f.outcome}; {'; '.join(f.problems)}" for f in findings if not f.held]
    assert not failed, "\n".join(failed)


def clipped(whole: str, limit: int) -> str:
    """What a HeadTail of ``whole`` must show within ``limit``: all of it, or its head, a note and its tail."""
    if len(whole) <= limit:
        return whole
    return whole[: limit // 2] + note(len(whole) - limit) + whole[len(whole) - (limit - limit // 2) :]


@pytest.mark.parametrize("seed", range(40))
def test_head_tail_shows_what_one_cut_of_the_whole_would(seed: int) -> None:
    rnd = random.Random(seed)
    limit = rnd.randint(0, 60)
    buffer, whole = HeadTail(limit), ""
    for _ in range(rnd.randint(0, 30)):
        piece = "".join(rnd.choice("ab\né☃") for _ in range(rnd.choice([0, 1, 5, 40, 200])))
        assert buffer.write(piece) == len(piece)
        whole += piece
    assert buffer.total == len(whole)
    for shown in range(limit + 1):
        assert buffer.text(shown) == clipped(whole, shown)
    assert buffer.text() == clipped(whole, limit)


def test_head_tail_keeps_little_however_much_is_written() -> None:
    buffer = HeadTail(100)
    for n in range(10_000):
        buffer.write(f"line {n}\n")
    kept = sum(len(s) for s in buffer._head + buffer._tail)
    assert kept <= 3 * 100 and buffer.dropped == buffer.total - kept
    assert buffer.text().startswith("line 0\nline 1\n") and buffer.text().endswith("line 9999\n")


@pytest.mark.parametrize(
    ("text", "step"),
    [("é☃𝄞x" * 50, 1), ("é☃𝄞x" * 50, 2), ("é☃𝄞x" * 50, 3), ("é☃𝄞x" * 50, 7), ("ab" * 300, 64)],
)
def test_bytes_are_decoded_whole_across_reads(text: str, step: int) -> None:
    data = text.encode()
    buffer = ByteHeadTail(40)
    for at in range(0, len(data), step):
        buffer.feed(data[at : at + step])
    buffer.feed(b"", final=True)
    assert buffer.text() == clipped(text, 40)  # no character cut in two, the count in characters


@pytest.mark.parametrize(
    ("data", "shown"),
    [(b"ok\xff\xfeok", "ok\ufffd\ufffdok"), (b"cut \xe2\x98", "cut \ufffd"), (b"\xe2\x98\x83", "\u2603")],
)
def test_invalid_bytes_become_replacement_characters_as_before(data: bytes, shown: str) -> None:
    buffer = ByteHeadTail(100)
    for byte in data:
        buffer.feed(bytes([byte]))
    buffer.feed(b"", final=True)
    assert buffer.text() == shown == data.decode("utf-8", errors="replace")


def _parts(*sizes: int) -> list[HeadTail]:
    parts = []
    for n, size in enumerate(sizes):
        part = HeadTail(100)
        part.write(str(n) * size)
        parts.append(part)
    return parts


@pytest.mark.parametrize(
    ("sizes", "lengths"),
    [
        ((10, 20), [10, 20]),  # within the limit: whole
        ((500, 5), [100 - 5, 5]),  # a short one whole, the long one gets the rest
        ((5, 500), [5, 95]),
        ((500, 500), [50, 50]),  # both long: an even share
        ((0, 500), [0, 100]),
        ((30, 30, 500), [30, 30, 40]),
    ],
)
def test_fit_shares_one_limit(sizes: tuple[int, ...], lengths: list[int]) -> None:
    shown = fit(_parts(*sizes), 100)
    for n, (text, size, length) in enumerate(zip(shown, sizes, lengths, strict=True)):
        assert text == clipped(str(n) * size, length)


def test_shell_keeps_the_head_and_tail_of_each_stream() -> None:
    content, is_error = toolkit.shell.invoke({"command": "seq 1 20000; seq 1 20000 >&2"}, key="k")
    assert not is_error
    out, err = content.removeprefix("exit code 0\nstdout:\n").split("\nstderr:\n")
    whole = "".join(f"{n}\n" for n in range(1, 20001))
    assert out == clipped(whole, 25_000) and err == clipped(whole, 25_000)


def test_shell_output_under_the_limit_is_unchanged() -> None:
    content, _ = toolkit.shell.invoke({"command": "printf 'caf\\303\\251\\n'; printf 'x' >&2; exit 4"}, key="k")
    assert content == "exit code 4\nstdout:\ncafé\n\nstderr:\nx"

"""The trust check fed a piece at a time (``trust.Checker``, what the server uses to keep its memory small) equals the whole check."""

from __future__ import annotations

import random
from pathlib import Path

from nbagent.agent.session import Session
from nbagent.record import trust
from nbagent.record.log_reader import whole_lines
from tests.agent.test_session import add_turns


def pieces(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` cut at random line ends (and once inside a line, whose rest goes with the next piece)."""
    ends = [pos + len(line) + 1 for pos, line in whole_lines(data)]
    cuts = sorted(rng.sample(ends, k=min(len(ends), rng.randint(1, 8))))
    out, at = [], 0
    for cut in cuts:
        out.append(data[at:cut])
        at = cut
    out.append(data[at:])
    return out


def checked_in_pieces(data: bytes, rng: random.Random) -> trust.Report:
    checker = trust.Checker(user=trust.user_signer_or_none())
    for piece in pieces(data, rng):
        checker.feed(piece)
    return checker.report


def test_pieces_give_the_whole_check_with_trust_events_forks_and_altered_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.open(path) as session:
        add_turns(session, 30)
        session.trust_log()
        add_turns(session, 12)
        with session.fork(at=22) as forked:
            add_turns(forked, 9)
            fork_path = forked.path
    logs = [path.read_bytes(), Path(fork_path).read_bytes()]
    altered = bytearray(logs[0])
    at = altered.index(b"request", len(altered) // 2)
    altered[at] = ord("R")  # a line whose signature no longer matches
    logs.append(bytes(altered))
    logs.append(logs[0].replace(b'"sig":"', b'"sog":"', 3))  # unsigned lines at the start: the trust event vouches for them
    rng = random.Random(5)
    user = trust.user_signer_or_none()
    for data in logs:
        whole = trust.check_log(data, user=user)
        assert whole.lines > 30
        for _ in range(20):
            assert checked_in_pieces(data, rng) == whole
    assert trust.check_log(logs[2], user=user).altered == 1
    assert trust.check_log(logs[0], user=user).trust_events == 1

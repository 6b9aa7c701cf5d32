"""``nbagent verify``: check a log and its snapshot without changing either."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import HistoryError
from ..record import events as ev
from ..record import trust
from ..record.log_reader import Reader
from ..record.readfile import open_regular, read_lines
from ..state import fold
from ..stores import FILES, Store, session_url, snapshot
from . import fork_check as forks


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a log or its snapshot, and exactly where."""

    file: str
    line: int | None
    offset: int | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f", line {self.line}"
        if self.offset is not None:
            where += f" (byte offset {self.offset})"
        return f"{where}: {self.message}"


@dataclass
class Report:
    """What :func:`verify` found."""

    path: str
    events: int = 0
    size: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    trust: str = ""  # who wrote the log's lines, as a sentence

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems


def verify(path: str | os.PathLike[str], source: Store = FILES) -> Report:
    """Check a log and its snapshot without changing either: checksums, sequence, schema, shapes, torn tail, snapshot agreement.

    A session in a database (``source``) is checked from its rows' bytes, by the same rules as a file.
    """
    log_path = Path(path)
    if source.url:
        from ..stores.postgres import PostgresStore

        assert isinstance(source, PostgresStore)
        data, where = source.read_bytes(log_path), session_url(source, log_path)
        snapshot_at, size = source.snapshot_file(log_path), len(data)
    else:
        where, snapshot_at = str(log_path), log_path
        try:
            with open_regular(log_path) as handle:  # read-only: verify never repairs
                size = os.fstat(handle.fileno()).st_size
                data = read_lines(handle)  # up to a line over the limit, where reading stops
        except FileNotFoundError:
            raise HistoryError(f"{log_path}: no such file.") from None
        except OSError as exc:
            raise HistoryError(f"cannot read {log_path}: {exc.strerror or exc}.") from None
    report = Report(where)
    report.size = size
    reader = Reader(where, "report")
    good: list[ev.Event] = []
    line_starts: dict[int, tuple[int, str]] = {}  # seq -> (line start, crc)
    state, fold_problem = fold.State(), ""
    for event in reader.feed(data):
        line_starts[event["seq"]] = (reader.last_start, event["crc"])
        good.append(event)
        if not fold_problem:
            try:
                fold.apply(state, event)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                fold_problem = f"event does not fit schema v{ev.SCHEMA_VERSION}: {type(exc).__name__} {exc}"
                report.problems.append(Problem(where, event["seq"], reader.last_start, fold_problem))
    report.problems[:0] = [Problem(where, p.line, p.offset, p.message) for p in reader.problems]
    checked = forks.check(data, good, {seq: start for seq, (start, _crc) in line_starts.items()}, forks.beside(log_path, source))
    report.problems += [Problem(where, line, offset, message) for line, offset, message in checked.problems]
    report.notes += checked.notes
    report.problems.sort(key=lambda p: p.line or 0)
    report.events = len(good)
    report.trust = trust.check_log(data, user=trust.user_signer_or_none()).describe()
    for side in [] if source.url else sorted(log_path.parent.glob(log_path.name + ".torn-*")):
        report.notes.append(f"{side.name}: a torn tail cut off by an earlier repair is kept here")
    for side in [] if source.url else sorted(log_path.parent.glob(log_path.name + ".damaged-*")):
        report.notes.append(f"{side.name}: a copy of this log kept when damage was found on opening")
    damaged = any(not p.message.startswith("torn tail") for p in reader.problems)
    name = where + (" (snapshot)" if source.url else ".snapshot")
    _verify_snapshot(snapshot_at, name, data, good, line_starts, report, not fold_problem and not damaged)
    return report


def _verify_snapshot(
    log_path: Path | None,
    name: str,
    data: bytes,
    good: list[ev.Event],
    line_starts: dict[int, tuple[int, str]],
    report: Report,
    can_fold: bool,
) -> None:
    """Check the snapshot beside ``log_path`` (None: there is none) against the log's bytes ``data``."""
    if log_path is None or not snapshot.path_for(log_path).exists():
        report.notes.append("no snapshot (opening replays the whole log)")
        return
    loaded, why = snapshot.load(log_path)
    if loaded is None:
        report.problems.append(Problem(name, 1, 0, f"snapshot header unusable: {why} (opening ignores it and replays the log)"))
        return
    header = loaded.header
    for line, read in ((2, loaded.state_line), (3, loaded.messages_line)):
        try:
            read()
        except (OSError, ValueError) as exc:
            report.problems.append(Problem(name, line, None, f"{exc} (opening ignores it and replays the log)"))
            return
    seq, offset = loaded.seq, loaded.offset
    where = line_starts.get(seq)
    if where is None:
        report.problems.append(Problem(name, 1, 0, f"snapshot is of event {seq}, which is not a valid event of the log"))
        return
    start, crc = where
    line_end = data.find(b"\n", start) + 1
    if start != header["line_start"] or line_end != offset or crc != header["line_crc"]:
        report.problems.append(
            Problem(
                name,
                1,
                0,
                f"snapshot says event {seq} is at bytes {header['line_start']}-{offset} "
                f"with crc {header['line_crc']}, but the log has it at {start}-{line_end} with crc {crc}",
            )
        )
        return
    if not can_fold:
        report.notes.append("snapshot state not compared: the log itself has problems")
        return
    try:
        saved = loaded.state().to_dict()
    except (ValueError, TypeError, KeyError) as exc:
        report.problems.append(Problem(name, None, None, f"snapshot does not hold a state ({exc})"))
        return
    expected_state = fold.fold(e for e in good if e["seq"] <= seq)
    expected = json.loads(json.dumps(expected_state.to_dict()))
    if saved != expected:
        differing = sorted(k for k in set(saved) | set(expected) if saved.get(k) != expected.get(k))
        report.problems.append(
            Problem(name, 2, None, f"snapshot state differs from a full fold of events 1-{seq} in: {', '.join(differing)}")
        )
        return
    head = json.loads(json.dumps(snapshot.summary(expected_state)))
    if header.get("summary") != head:
        report.problems.append(Problem(name, 1, 0, "snapshot header summary differs from its state"))
        return
    after = len(good) - seq
    report.notes.append(f"snapshot agrees with the log (events 1-{seq}" + (f"; {after} events after it" if after else "") + ")")

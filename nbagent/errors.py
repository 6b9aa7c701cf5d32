"""Every error nbagent raises on purpose, each with a message that says what to do."""

from __future__ import annotations


class NbagentError(Exception):
    """Base class of nbagent's own errors."""


class LogError(NbagentError):
    """A session log cannot be used as it is."""


class LogCorruptError(LogError):
    """A log has damage before its last line, or a gap in its sequence."""

    def __init__(self, path: str, line: int, offset: int, reason: str, kept: str | None = None) -> None:
        self.path, self.line, self.offset, self.reason, self.kept = path, line, offset, reason, kept
        where = f"{path}, line {line} (byte offset {offset})"
        copy = f" A copy of the damaged file was kept at {kept}." if kept else ""
        super().__init__(
            f"The session log {where} is damaged: {reason}. Nothing was deleted.{copy} "
            "Run `nbagent verify` on it for a full report; to start over, open a new session."
        )


class NotALogError(LogError):
    """A file that is not an nbagent session log was given where a log was expected; it was left untouched."""

    def __init__(self, path: str, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(
            f"{path} is not an nbagent session log ({reason}); nbagent left it untouched. Give a session name "
            "(see `nbagent sessions` or %agent_sessions) or the path of a .jsonl log that nbagent wrote."
        )


class LogVersionError(LogError):
    """A log was written by a newer nbagent whose schema this one does not know."""


class UntrustedLogError(LogError):
    """A session this user did not write (or that changed after they trusted it) is not continued; nothing was sent or run."""


class LogLockedError(LogError):
    """Another process (or another open Session) is writing this log."""


class LogWriteError(LogError):
    """A write or fsync failed; the log refuses further writes until it is reopened."""


class HistoryError(NbagentError):
    """A request about recorded sessions cannot be served; ``usage`` says whether the user asked for something wrong."""

    def __init__(self, message: str, *, usage: bool = True) -> None:
        super().__init__(message)
        self.usage = usage


class ModelError(NbagentError):
    """A model call failed (the loop owns retries: the SDK client it uses never retries on its own)."""

    def __init__(
        self, message: str, *, status: int | None = None, kind: str = "api_error", retryable: bool = False, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.kind, self.retryable = status, kind, retryable
        self.retry_after = retry_after  # seconds the API asked to wait (retry-after-ms / retry-after), None: not said


class RefusedRequestError(ModelError):
    """The API refused this session's last request as malformed; nbagent does not send the same request again."""

    @classmethod
    def of(cls, message: str, *, status: int | None = 400, kind: str = "invalid_request_error") -> RefusedRequestError:
        """The error for a refusal whose API message is ``message``, saying what the user can do."""
        return cls(
            f"The API refused this session's last request as malformed ({message}). nbagent does not send the same request "
            "again. To go on: make a new request; or compact the conversation (`%agent --compact`, Loop.compact()); or leave "
            "out the thinking blocks the API may reject (`%agent --drop-thinking`, Loop.drop_thinking()). The log keeps everything.",
            status=status,
            kind=kind,
        )


class Interrupted(KeyboardInterrupt):
    """The run was interrupted; the interruption is in the log and the session can continue."""

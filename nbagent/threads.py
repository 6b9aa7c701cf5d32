"""Threads and timers that run in the context (``contextvars``) of the code that started them.

A new thread starts with an empty context (before Python 3.14's ``Thread(context=...)``). In a Jupyter kernel that
loses which request the work belongs to: ipykernel keeps the request being handled (the "parent") in a context
variable and, where a thread has none, falls back to whatever request any thread handled last. That may be a widget
message JupyterLab sent on a kernel subshell; ipykernel 7.4 then sends the next click on each widget the thread updated
to that subshell, which JupyterLab deletes once its widgets are gone, and the click is dropped ("Unknown subshell_id").
Started from here, a thread's outputs and widget updates belong to the cell that started it, as they would in the
main thread.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any


def in_context(target: Callable[..., Any]) -> Callable[..., Any]:
    """``target``, to run in a copy of the caller's context (taken now, so each thread gets its own copy)."""
    context = contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> Any:
        return context.run(target, *args, **kwargs)

    return run


def thread(target: Callable[..., Any], *, name: str, args: tuple[Any, ...] = ()) -> threading.Thread:
    """A daemon thread (not started) that runs ``target(*args)`` in the caller's context."""
    return threading.Thread(target=in_context(target), args=args, name=name, daemon=True)


def timer(interval: float, function: Callable[[], Any]) -> threading.Timer:
    """A daemon timer (not started) that calls ``function`` in the caller's context after ``interval`` seconds."""
    started = threading.Timer(interval, in_context(function))
    started.daemon = True
    return started

"""One-line summaries of kernel values for the model, built without running any user code.

Known types (:mod:`.value_kinds`: exact built-in types and the classes numpy, pandas, polars and the standard
library define; those libraries are never imported here) show their metadata: a DataFrame its shape and column
dtypes, an array its shape and dtype, a builtin container its length, a number or short string its value.  Anything
else shows its type only, and a user's subclass of a known type its name and the type it extends: a user
``__repr__``, property, ``__len__`` or ``__iter__`` may be slow, huge or have side effects.  A summary reads only
metadata, so its cost does not grow with the data; :func:`.value_details.details` (``inspect_variable``) reads more.
"""

from __future__ import annotations

import itertools
import math
import types
from collections.abc import Iterable
from typing import Any, cast

from .value_kinds import _SCALARS, is_known, known_base, type_label
from .value_kinds import kind as _kind

__all__ = ["is_known", "summary", "type_label"]

SHORT_STR = 80  # a string up to this long is shown whole
BIG_INT_BITS = 128  # a larger int shows its size, not its digits (str() of a huge int is slow or refused)
COLUMNS = 20  # columns named in a DataFrame's summary before "+N more"
KEYS = 5  # a dict's keys named in its summary


def summary(value: object, *, limit: int = 300) -> str:
    """One line a model reads: type and, for known types, shape/len/value; never runs user code."""
    cls, v = type(value), cast(Any, value)
    if cls is int and -(2**63) < v < 2**63 or cls is str and len(v) <= SHORT_STR:  # the common case, quickly
        text = f"{cls.__name__} {v!r}"
        return text if len(text) <= limit else _clip(text, limit)
    try:
        text = _summary(value, limit)
    except Exception:  # a known type's metadata misbehaved: its type still says something
        text = type_label(type(value))
    return _clip(text, limit)


def _summary(value: Any, limit: int) -> str:
    cls = type(value)
    kind, label = _kind(cls), type_label(cls)
    if kind == "scalar":
        return _scalar(value)
    if kind == "str":
        return f"str {value!r}" if len(value) <= SHORT_STR else f"str, {len(value):,} chars"
    if kind == "bytes":
        return f"{label}, {value.nbytes if cls is memoryview else len(value):,} bytes"
    if kind == "container":
        return _container(value, label, limit)
    if kind == "named":
        return _named(value)
    if kind == "safe":
        return f"{label} {_clip(repr(value), limit)}"
    if kind == "pandas.DataFrame":
        rows, cols = value.shape
        return f"{label}, {rows:,} rows × {cols:,} columns: {_columns(zip(value.columns, value.dtypes), cols, limit)}"
    if kind == "pandas.Series":
        return f"{label} {_label(value.name)}, {len(value):,} rows, dtype {_dtype(value.dtype)}"
    if kind == "pandas.Index":
        return f"{label}, {len(value):,} entries, dtype {_dtype(value.dtype)}"
    if kind == "polars.DataFrame":
        rows, cols = value.shape
        return f"{label}, {rows:,} rows × {cols:,} columns: {_columns(value.schema.items(), cols, limit)}"
    if kind == "polars.Series":
        return f"{label} {_label(value.name)}, {len(value):,} rows, dtype {_dtype(value.dtype)}"
    if kind == "numpy.ndarray":
        return f"{label}, shape {_shape(value.shape)}, dtype {_dtype(value.dtype)}"
    if kind == "numpy.generic":
        if value.dtype.kind in "biufc":
            return f"{label} {_value(value.item())}"
        if value.dtype.kind in "mM":
            return f"{label} {_clip(str(value), limit)}"
        return f"{label}, dtype {_dtype(value.dtype)}"
    base = known_base(cls)
    return label if base is None else f"{label} (a {base} subclass: not read)"


def _scalar(value: Any) -> str:
    if value is None:
        return "None"
    if type(value) is int and value.bit_length() > BIG_INT_BITS:
        return f"int, {value.bit_length():,} bits"
    if type(value) is float and not math.isfinite(value):
        return f"float {value}"
    return f"{type(value).__name__} {value!r}"


def _container(value: Any, label: str, limit: int) -> str:
    text = f"{label}, {_items_count(len(value))}"
    if isinstance(value, dict) and value:
        keys = [_label(k) for k in itertools.islice(iter(value), KEYS)]
        more = ", …" if len(value) > KEYS else ""
        text += f": keys {', '.join(keys)}{more}"
    elif isinstance(value, (list, tuple)) and value:
        first = value[0]
        if all(type(v) is type(first) for v in itertools.islice(value, 20)):
            text += f" of {type_label(type(first))}"
    return text


def _items_count(n: int) -> str:
    return "1 item" if n == 1 else f"{n:,} items"


def _value(v: Any) -> str:
    """A plain value as itself (``1.5``, ``'a'``), anything else by its summary."""
    if id(type(v)) in _SCALARS:
        return _scalar(v).partition(" ")[2] or "None"
    return _clip(repr(v), 40) if type(v) is str else summary(v, limit=40)


def _named(value: Any) -> str:
    if type(value) is range:
        return f"range({value.start}, {value.stop}, {value.step})"
    if type(value) is types.ModuleType:
        return f"module {_attr_str(value, '__name__') or '?'}"
    what = "class" if isinstance(value, type) else "function"
    return f"{what} {_attr_str(value, '__qualname__') or '?'}"


def _columns(pairs: Iterable[tuple[Any, Any]], total: int, limit: int) -> str:
    parts: list[str] = []
    size = 0
    for name, dtype in itertools.islice(pairs, COLUMNS):
        part = f"{_label(name)} {_dtype(dtype)}"
        size += len(part) + 2
        if parts and size > limit:
            break
        parts.append(part)
    more = total - len(parts)
    return ", ".join(parts) + (f", +{more:,} more" if more > 0 else "")


def _label(name: Any, limit: int = 40) -> str:
    """A column, key or Series name: its value for plain types, else its type (a label can be any object)."""
    cls = type(name)
    if cls is str:
        return _clip(repr(name), limit)
    if id(cls) in _SCALARS:
        return _clip(_scalar(name).partition(" ")[2] or "None", limit)
    if cls is tuple:
        return _clip("(" + ", ".join(_label(n, limit) for n in name[:4]) + (", …" if len(name) > 4 else "") + ")", limit)
    return f"<{type_label(cls)}>"


def _dtype(dtype: Any) -> str:
    """A dtype's name: numpy, pandas and polars dtypes all have a bounded str()."""
    return _clip(str(dtype), 60)


def _shape(shape: Any) -> str:
    return "(" + ", ".join(f"{int(n):,}" for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _attr_str(obj: Any, name: str) -> str | None:
    """An attribute of a function, class or module of an exact built-in type that should be a string, or None."""
    value = getattr(obj, name, None)
    return value if type(value) is str else None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"

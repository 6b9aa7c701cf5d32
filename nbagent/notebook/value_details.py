"""``inspect_variable``'s text for one kernel value: more than its summary, still bounded, still no user code.

A DataFrame shows its dtypes, null counts, ``describe()`` and first rows; an array statistics over at most
:data:`SAMPLE` evenly spaced values (said so when sampled) and its first values, and a memory-mapped array no values
at all (reading them would page the file in); a builtin container its first items; an object of another type its
instance attributes.  Values under a secret-looking key, attribute or column name (:mod:`.secret_names`:
``cfg["db_password"]``, ``conn.password``, ``users.api_token``) are hidden; a user subclass of a known type is named,
not read (:mod:`.value_kinds`).
"""

from __future__ import annotations

import itertools
import mmap
import types
from collections.abc import Callable
from typing import Any

from .secret_names import HIDDEN, secret_label
from .value_kinds import _SCALARS, class_attr, mro
from .value_kinds import kind as _kind
from .value_summary import _clip, _dtype, _label, _value, summary

ROWS = 5  # rows shown in details
DETAIL_COLUMNS = 20  # columns shown in details
ITEMS = 20  # items of a container shown in details
SAMPLE = 100_000  # an array's values its statistics read at most (evenly spaced over the whole array)
BASES = 32  # the .base links followed to find a memory-mapped buffer under an array


def details(value: object, *, limit: int = 4000) -> str:
    """inspect_variable's text: a DataFrame's dtypes, null counts, describe() and first rows; an array's stats; else summary()."""
    try:
        text = _details(value, limit)
    except Exception as e:  # describe() and friends can fail on odd data: the summary still stands
        text = f"{summary(value, limit=limit)}\n(details not available: {type(e).__name__})"
    return _clip(text, limit)


def _details(value: Any, limit: int) -> str:
    kind = _kind(type(value))
    head = summary(value, limit=limit)
    if kind == "pandas.DataFrame":
        return _pandas_frame(value, head)
    if kind == "pandas.Series":
        return _pandas_frame(value.to_frame(), head)
    if kind == "numpy.ndarray":
        return _array(value, head)
    if kind == "polars.DataFrame" or kind == "polars.Series":
        return _polars(value, head, kind == "polars.DataFrame")
    if kind == "container":
        return _items(value, head)
    if kind == "str":
        return f"{head}\n{_clip(value, limit)}"
    if kind is None:
        return _attributes(value, head)
    return head


def _hidden_note(labels: list[Any]) -> str:
    return f"values of {', '.join(_label(c) for c in labels[:ITEMS])} hidden (secret-looking names)"


def _pandas_frame(df: Any, head: str) -> str:
    df = df.iloc[:, :DETAIL_COLUMNS]
    secret = [i for i, name in enumerate(df.columns) if secret_label(name)]
    shown = df.iloc[:, [i for i in range(df.shape[1]) if i not in secret]] if secret else df
    nulls = df.isna().sum()
    lines = [head, "", "column  dtype  nulls"]
    lines += [
        f"{_label(name)}  {_dtype(dtype)}  {int(nulls.iloc[i]):,}" + (f"  {HIDDEN}" if i in secret else "")
        for i, (name, dtype) in enumerate(df.dtypes.items())
    ]
    numeric = shown.select_dtypes("number")
    if numeric.shape[1]:
        lines += ["", "describe():", _frame_text(numeric.describe())]
    if shown.shape[1] or not secret:
        lines += ["", f"first {ROWS} rows:", _frame_text(_safe_frame(shown.head(ROWS)))]
    if secret:
        lines += ["", _hidden_note([df.columns[i] for i in secret])]
    return "\n".join(lines)


def _safe_frame(df: Any) -> Any:
    """A copy of a few rows whose object cells, labels and index are made safe to print (unknown objects: their type)."""
    df = df.copy()
    df.columns = [_clip(c, 40) if type(c) is str else _label(c) for c in df.columns]
    if str(df.index.dtype) == "object":
        df.index = [_cell(v) for v in df.index]
    for i, dtype in enumerate(df.dtypes):
        if str(dtype) in ("object", "category"):
            df.isetitem(i, [_cell(v) for v in df.iloc[:, i]])
    return df


def _cell(v: Any) -> str:
    return _clip(v, 40) if type(v) is str else summary(v, limit=40)


def _frame_text(df: Any) -> str:
    return str(df.to_string(max_rows=20, max_cols=DETAIL_COLUMNS, max_colwidth=40))


def _array(a: Any, head: str) -> str:
    import numpy as np  # only reached for a numpy array: numpy is loaded

    if _mapped(a, np):
        return f"{head}\nmemory-mapped file: no values read and no statistics computed (reading them would page the file in)"
    lines = [head]
    n = int(a.size)
    if n and a.dtype.kind in "iuf":
        if n <= SAMPLE:
            sample, over = a, "all values"
        else:  # evenly spaced flat indices: a strided or non-contiguous array is not copied whole
            sample = a.flat[np.linspace(0, n - 1, SAMPLE, dtype=np.intp)]
            over = f"a sample of {SAMPLE:,} evenly spaced values of {n:,}"
        stats: list[tuple[str, Callable[[Any], Any]]] = [("min", np.nanmin), ("max", np.nanmax), ("mean", np.nanmean), ("std", np.nanstd)]
        lines.append("  ".join(f"{name} {float(f(sample)):.6g}" for name, f in stats) + ("" if n <= SAMPLE else f"  (over {over})"))
        if a.dtype.kind == "f":
            lines.append(f"NaN: {int(np.isnan(sample).sum()):,}" + ("" if n <= SAMPLE else " in the sample"))
    first = a.flat[:ITEMS]
    shown = [_value(v.item() if a.dtype.kind in "biufc" else v) for v in first]
    lines.append(f"first {len(shown)} values (flattened): " + ", ".join(shown))
    return "\n".join(lines)


def _mapped(a: Any, np: Any) -> bool:
    """Whether the array's memory is a mapped file: a ``np.memmap``, or a view whose base chain ends in one or an ``mmap``."""
    base_of = np.ndarray.base.__get__  # the C attribute itself: a subclass's property would be user code
    for _ in range(BASES):
        cls = type(a)  # issubclass on type(a), never isinstance: that may read a user __class__
        if issubclass(cls, np.memmap) or cls is mmap.mmap:
            return True
        if cls is memoryview:
            a = a.obj
        elif issubclass(cls, np.ndarray):
            a = base_of(a)
        else:
            return False
        if a is None:
            return False
    return True  # a chain this long: count it as mapped rather than read it


def _polars(value: Any, head: str, frame: bool) -> str:
    dtypes = value.dtypes if frame else [value.dtype]
    if any(str(d) == "Object" for d in dtypes):
        return head  # an Object column would print user reprs
    if frame:
        secret = [c for c in value.columns if secret_label(c)]
        shown = value.drop(secret) if secret else value
        empty = bool(secret) and shown.width == 0
    else:
        secret = [value.name] if secret_label(value.name) else []
        shown, empty = value, bool(secret)
    text = head if empty else f"{head}\n\nfirst {ROWS} rows:\n{_clip(str(shown.head(ROWS)), 3000)}"
    return f"{text}\n\n{_hidden_note(secret)}" if secret else text


def _items(value: Any, head: str) -> str:
    lines = [head]
    if isinstance(value, dict):
        lines += [
            f"  {_label(k)}: {HIDDEN if secret_label(k) else summary(v, limit=100)}" for k, v in itertools.islice(value.items(), ITEMS)
        ]
    elif isinstance(value, (set, frozenset)):
        lines += [f"  {_cell(v)}" for v in itertools.islice(value, ITEMS)]
    else:
        lines += [
            f"  [{i}] {_value(v) if id(type(v)) in _SCALARS else summary(v, limit=100)}"
            for i, v in enumerate(itertools.islice(value, ITEMS))
        ]
    if len(value) > ITEMS:
        lines.append(f"  … {len(value) - ITEMS:,} more")
    return "\n".join(lines)


def _attributes(value: Any, head: str) -> str:
    """An object's instance attributes, from its ``__dict__`` read through the C descriptor only (no property runs)."""
    attrs = _instance_dict(value)
    if not attrs:
        return head
    lines = [f"{head} (repr not shown), attributes:"]
    lines += [
        f"  {_clip(k, 40)}: {HIDDEN if secret_label(k) else summary(v, limit=100)}"
        for k, v in itertools.islice(attrs.items(), ITEMS)
        if type(k) is str
    ]
    if len(attrs) > ITEMS:
        lines.append(f"  … {len(attrs) - ITEMS:,} more")
    return "\n".join(lines)


def _instance_dict(value: Any) -> dict[str, Any] | None:
    """The instance's ``__dict__`` if its class gives it by Python's own slot descriptor (a user property never runs)."""
    for klass in mro(type(value)):
        space = class_attr(klass, "__dict__")
        if isinstance(space, types.MappingProxyType) and "__dict__" in space:
            slot = space["__dict__"]
            if type(slot) is not types.GetSetDescriptorType:
                return None
            try:
                attrs = slot.__get__(value, type(value))
            except Exception:
                return None
            return attrs if type(attrs) is dict else None
    return None

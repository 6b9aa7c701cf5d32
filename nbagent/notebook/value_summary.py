"""One-line summaries of kernel values for the model, built without calling a user ``__repr__``/``__str__``.

Known types are recognised by their class's module and name (pandas, polars and numpy are never
imported here): a DataFrame shows its shape and column dtypes, an array its shape and dtype, a
builtin container its length, a number or short string its value.  Anything else shows its type
only: a user ``__repr__`` may be slow, huge or have side effects.  A summary reads only metadata
(shape, dtypes, length), so its cost does not grow with the data; :func:`details` (for
``inspect_variable``) may read the data, but its text is bounded too.
"""

from __future__ import annotations

import itertools
import math
import types
from collections.abc import Callable, Iterable
from typing import Any, cast

SHORT_STR = 80  # a string up to this long is shown whole
BIG_INT_BITS = 128  # a larger int shows its size, not its digits (str() of a huge int is slow or refused)
COLUMNS = 20  # columns named in a DataFrame's summary before "+N more"
KEYS = 5  # a dict's keys named in its summary
# Classes are compared by identity (id), never with ==: a metaclass's __eq__ would be user code.
_SCALARS = frozenset(map(id, (bool, int, float, complex, type(None))))
_BYTES = frozenset(map(id, (bytes, bytearray, memoryview)))
_CONTAINERS = frozenset(map(id, (list, tuple, dict, set, frozenset)))
_NAMED = frozenset(map(id, (range, types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)))
_COLLECTIONS = frozenset({"OrderedDict", "defaultdict", "Counter", "deque"})
# Standard classes whose repr is short and runs no user code (checked by exact class, never a subclass).
_SAFE_REPR = frozenset(
    {
        ("datetime", "datetime"),
        ("datetime", "date"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("decimal", "Decimal"),
        ("pathlib", "PosixPath"),
        ("pathlib", "WindowsPath"),
        ("pathlib", "PurePosixPath"),
        ("pathlib", "PureWindowsPath"),
        ("uuid", "UUID"),
        ("pandas", "Timestamp"),
        ("pandas", "Timedelta"),
    }
)


def summary(value: object, *, limit: int = 300) -> str:
    """One line a model reads: type and, for known types, shape/len/value; never calls a repr/str it can't bound."""
    cls, v = type(value), cast(Any, value)
    if cls is int and -(2**63) < v < 2**63 or cls is str and len(v) <= SHORT_STR:  # the common case, quickly
        text = f"{cls.__name__} {v!r}"
        return text if len(text) <= limit else _clip(text, limit)
    try:
        text = _summary(value, limit)
    except Exception:  # a known type's metadata misbehaved: its type still says something
        text = type_label(type(value))
    return _clip(text, limit)


def details(value: object, *, limit: int = 4000) -> str:
    """inspect_variable's text: a DataFrame's dtypes, null counts, describe() and first rows; an array's stats; else summary()."""
    try:
        text = _details(value, limit)
    except Exception as e:  # describe() and friends can fail on odd data: the summary still stands
        text = f"{summary(value, limit=limit)}\n(details not available: {type(e).__name__})"
    return _clip(text, limit)


def type_label(cls: type) -> str:
    """A class's name as a model reads it: bare for builtins and ``__main__``, else qualified by its module."""
    return _type_info(cls)[2]


def is_known(value: object) -> bool:
    """Whether :func:`summary` shows more than the type for this value."""
    return _kind(type(value)) is not None


# Recognising types ---------------------------------------------------------------------------------------
_TYPES: dict[int, tuple[type, str | None, str]] = {}  # by id(cls) (a metaclass's __hash__ would be user code)


def _type_info(cls: type) -> tuple[type, str | None, str]:
    """(cls, its kind, its label), looked up once per class."""
    hit = _TYPES.get(id(cls))
    if hit is not None and hit[0] is cls:
        return hit
    if len(_TYPES) > 1024:
        _TYPES.clear()
    name = _attr_str(cls, "__qualname__") or _attr_str(cls, "__name__") or "object"
    module = _attr_str(cls, "__module__")
    label = name if module in (None, "builtins", "__main__") else f"{module}.{name}"
    kind = _find_kind(cls)
    if kind is not None and kind.endswith(f".{name}"):  # polars.DataFrame, not polars.dataframe.frame.DataFrame
        label = kind
    info = _TYPES[id(cls)] = (cls, kind, label)
    return info


def _kind(cls: type) -> str | None:
    """Which known family a class belongs to ('scalar', 'str', 'pandas.DataFrame', 'numpy.ndarray', ...), or None."""
    return _type_info(cls)[1]


def _find_kind(cls: type) -> str | None:
    if id(cls) in _SCALARS:
        return "scalar"
    if cls is str:
        return "str"
    if id(cls) in _BYTES:
        return "bytes"
    if id(cls) in _CONTAINERS:
        return "container"
    if id(cls) in _NAMED:
        return "named"
    if (_attr_str(cls, "__module__"), _attr_str(cls, "__qualname__")) in _SAFE_REPR:
        return "safe"
    for base in cls.__mro__:
        module = _attr_str(base, "__module__") or ""
        name = _attr_str(base, "__name__") or ""
        root = module.partition(".")[0]
        if root == "pandas" and name in ("DataFrame", "Series", "Index"):
            return f"pandas.{name}"
        if root == "polars" and name in ("DataFrame", "Series"):
            return f"polars.{name}"
        if root == "numpy" and name in ("ndarray", "generic"):
            return f"numpy.{name}"
        if module == "collections" and name in _COLLECTIONS:
            return "container"
    return None


def _summary(value: Any, limit: int) -> str:
    cls = type(value)
    _, kind, label = _type_info(cls)
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
    return label


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
    if isinstance(value, range):
        return f"range({value.start}, {value.stop}, {value.step})"
    if isinstance(value, types.ModuleType):
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
    """An attribute that should be a string, or None if it is not one (no user code beyond the lookup)."""
    value = getattr(obj, name, None)
    return value if type(value) is str else None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


# Details --------------------------------------------------------------------------------------------------
ROWS = 5  # rows shown in details
DETAIL_COLUMNS = 20  # columns shown in details
ITEMS = 20  # items of a container shown in details


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
        return _polars(value, head)
    if kind == "container":
        return _items(value, head)
    if kind == "str":
        return f"{head}\n{_clip(value, limit)}"
    if kind is None:
        return _attributes(value, head)
    return head


def _pandas_frame(df: Any, head: str) -> str:
    df = df.iloc[:, :DETAIL_COLUMNS]
    nulls = df.isna().sum()
    lines = [head, "", "column  dtype  nulls"]
    lines += [f"{_label(name)}  {_dtype(dtype)}  {int(nulls.iloc[i]):,}" for i, (name, dtype) in enumerate(df.dtypes.items())]
    numeric = df.select_dtypes("number")
    if numeric.shape[1]:
        lines += ["", "describe():", _frame_text(numeric.describe())]
    lines += ["", f"first {ROWS} rows:", _frame_text(_safe_frame(df.head(ROWS)))]
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

    lines = [head]
    if a.size and a.dtype.kind in "iuf":
        stats: list[tuple[str, Callable[[Any], Any]]] = [("min", np.nanmin), ("max", np.nanmax), ("mean", np.nanmean), ("std", np.nanstd)]
        lines.append("  ".join(f"{name} {float(f(a)):.6g}" for name, f in stats))
        if a.dtype.kind == "f":
            lines.append(f"NaN: {int(np.isnan(a).sum()):,}")
    first = a.flat[:ITEMS]
    shown = [_value(v.item() if a.dtype.kind in "biufc" else v) for v in first]
    lines.append(f"first {len(shown)} values (flattened): " + ", ".join(shown))
    return "\n".join(lines)


def _polars(value: Any, head: str) -> str:
    dtypes = value.dtypes if hasattr(value, "dtypes") else [value.dtype]
    if any(str(d) == "Object" for d in dtypes):
        return head  # an Object column would print user reprs
    return f"{head}\n\nfirst {ROWS} rows:\n{_clip(str(value.head(ROWS)), 3000)}"


def _items(value: Any, head: str) -> str:
    lines = [head]
    if isinstance(value, dict):
        lines += [f"  {_label(k)}: {summary(v, limit=100)}" for k, v in itertools.islice(value.items(), ITEMS)]
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
    """An unknown object's instance attributes (from its ``__dict__``, read without ``__getattribute__``)."""
    try:
        attrs = object.__getattribute__(value, "__dict__")
    except Exception:
        return head
    if type(attrs) is not dict or not attrs:
        return head
    lines = [f"{head} (repr not shown), attributes:"]
    lines += [f"  {_clip(k, 40)}: {summary(v, limit=100)}" for k, v in itertools.islice(attrs.items(), ITEMS) if type(k) is str]
    if len(attrs) > ITEMS:
        lines.append(f"  … {len(attrs) - ITEMS:,} more")
    return "\n".join(lines)

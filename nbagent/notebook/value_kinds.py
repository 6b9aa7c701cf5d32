"""Which known family a kernel value's class belongs to, found without running any user code.

A class counts as known only if it is exactly a built-in type, or a class that numpy, pandas, polars or the standard
library defines (the object its ``__module__`` and ``__qualname__`` name in that already imported module: a user's
look-alike with a borrowed ``__module__`` is not it).  A user's subclass of a known class (a DataFrame subclass, a
list or ``Counter`` subclass) is not read at all: its properties, ``__len__`` and ``__iter__`` are user code, so it
is told by its name and the known class it extends.  Class attributes are read through ``type``'s own descriptors, so
a metaclass's ``__getattribute__``, ``__eq__`` or ``__hash__`` never runs either.
"""

from __future__ import annotations

import sys
import types
from typing import Any

# Classes are compared by identity (id), never with ==: a metaclass's __eq__ would be user code.
_SCALARS = frozenset(map(id, (bool, int, float, complex, type(None))))
_BYTES = frozenset(map(id, (bytes, bytearray, memoryview)))
_CONTAINERS = frozenset(map(id, (list, tuple, dict, set, frozenset)))
_NAMED = frozenset(map(id, (range, types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)))
_COLLECTIONS = frozenset({"OrderedDict", "defaultdict", "Counter", "deque"})
_LIBRARIES = frozenset({"numpy", "pandas", "polars"})
# Standard classes whose repr is short and runs no user code: (module, public name), resolved to the class itself.
_SAFE_REPR = (
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
)
_TYPE_ATTRS: dict[str, Any] = dict(type.__dict__)  # type's own descriptors: __module__, __qualname__, __mro__, __dict__


def class_attr(cls: type, name: str) -> object:
    """``cls.__module__`` (or ``__qualname__``, ``__name__``, ``__mro__``, ``__dict__``) as ``type`` stores it, or None."""
    try:
        return _TYPE_ATTRS[name].__get__(cls, type)
    except Exception:  # not a class type knows (a C type's __module__ lookup can raise)
        return None


def class_str(cls: type, name: str) -> str | None:
    """A class attribute that should be a string, or None if it is not one."""
    value = class_attr(cls, name)
    return value if type(value) is str else None


def mro(cls: type) -> tuple[type, ...]:
    """The class's method resolution order, as ``type`` stores it."""
    value = class_attr(cls, "__mro__")
    return value if type(value) is tuple else (cls,)


def type_label(cls: type) -> str:
    """A class's name as a model reads it: bare for builtins and ``__main__``, else qualified by its module."""
    return _type_info(cls)[2]


def kind(cls: type) -> str | None:
    """Which known family a class belongs to ('scalar', 'str', 'pandas.DataFrame', 'numpy.ndarray', ...), or None."""
    return _type_info(cls)[1]


def is_known(value: object) -> bool:
    """Whether the summaries show more than the type for this value."""
    return kind(type(value)) is not None


def known_base(cls: type) -> str | None:
    """For a class that is not known but extends one (a user's DataFrame or list subclass): that class's label."""
    if kind(cls) is not None:
        return None
    for base in mro(cls)[1:]:
        if kind(base) is not None:
            return type_label(base)
    return None


def defined_by(cls: type, roots: frozenset[str]) -> bool:
    """Whether ``cls`` is the very class its module and qualified name name, in a loaded module under one of ``roots``."""
    module, qualname = class_str(cls, "__module__"), class_str(cls, "__qualname__")
    if module is None or qualname is None or module.partition(".")[0] not in roots:
        return False
    found: object = sys.modules.get(module)
    for part in qualname.split("."):
        # the module's or class's own __dict__: no module __getattr__, no descriptor runs
        space = getattr(found, "__dict__", None) if type(found) is types.ModuleType else None
        if space is None and isinstance(found, type):
            space = class_attr(found, "__dict__")
        if not isinstance(space, (dict, types.MappingProxyType)):
            return False
        found = space.get(part)
    return found is cls


_TYPES: dict[int, tuple[type, str | None, str]] = {}  # by id(cls) (a metaclass's __hash__ would be user code)


def _type_info(cls: type) -> tuple[type, str | None, str]:
    """(cls, its kind, its label), looked up once per class."""
    hit = _TYPES.get(id(cls))
    if hit is not None and hit[0] is cls:
        return hit
    if len(_TYPES) > 1024:
        _TYPES.clear()
    name = class_str(cls, "__qualname__") or class_str(cls, "__name__") or "object"
    module = class_str(cls, "__module__")
    label = name if module in (None, "builtins", "__main__") else f"{module}.{name}"
    found = _find_kind(cls)
    if found is not None and found.endswith(f".{name}"):  # polars.DataFrame, not polars.dataframe.frame.DataFrame
        label = found
    info = _TYPES[id(cls)] = (cls, found, label)
    return info


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
    if any(_public(module, name) is cls for module, name in _SAFE_REPR):
        return "safe"
    if class_str(cls, "__qualname__") in _COLLECTIONS and _public("collections", class_str(cls, "__qualname__") or "") is cls:
        return "container"
    if not defined_by(cls, _LIBRARIES):
        return None
    for base in mro(cls):
        module = class_str(base, "__module__") or ""
        name = class_str(base, "__name__") or ""
        root = module.partition(".")[0]
        if root == "pandas" and name in ("DataFrame", "Series", "Index"):
            return f"pandas.{name}"
        if root == "polars" and name in ("DataFrame", "Series"):
            return f"polars.{name}"
        if root == "numpy" and name in ("ndarray", "generic"):
            return f"numpy.{name}"
    return None


def _public(module: str, name: str) -> object:
    """``module.name`` if that module is loaded (from its ``__dict__``: nothing runs), else None."""
    loaded = sys.modules.get(module)
    space = getattr(loaded, "__dict__", None) if type(loaded) is types.ModuleType else None
    return space.get(name) if isinstance(space, dict) else None

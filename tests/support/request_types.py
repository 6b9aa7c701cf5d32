"""A strict check of a Messages request body against the `anthropic` SDK's own request types.

The real API refuses a key it does not know with 400 ``<path>: Extra inputs are not permitted``. pydantic's
``TypeAdapter`` over the SDK's ``MessageCreateParams`` TypedDicts drops unknown keys silently, so this module
walks the body itself: every key must be named by the TypedDict it sits in (``Required`` keys present),
every literal must be one the types allow, and a union of blocks is chosen by its ``type`` (or ``role``) tag.
The SDK sends ``betas``, ``user_profile_id`` and ``workspace_id`` as headers, so the body never holds them.
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from typing import Any

import pydantic
import typing_extensions
from anthropic.types import message_create_params as plain_params
from anthropic.types.beta import message_create_params as beta_params

__all__ = ["problem"]

HEADER_PARAMS = frozenset({"betas", "user_profile_id", "workspace_id"})  # the SDK moves these to headers
TAGS = ("type", "role")  # the keys a union of objects is told apart by
_UNIONS = (typing.Union, types.UnionType)
_REQUIRED = (typing.Required, typing_extensions.Required)
_NOT_REQUIRED = (typing.NotRequired, typing_extensions.NotRequired)
_ANNOTATED = (typing.Annotated, typing_extensions.Annotated)
_LITERALS = (typing.Literal, typing_extensions.Literal)
_SEQUENCES = (list, tuple, collections.abc.Iterable, collections.abc.Sequence, collections.abc.Collection)
_MAPPINGS = (dict, collections.abc.Mapping)
_SCALARS: dict[type, str] = {
    str: "a valid string",
    int: "a valid integer",
    float: "a valid number",
    bool: "a valid boolean",
    types.NoneType: "None",
}


def problem(body: Any, *, beta: bool) -> str | None:
    """The API's 400 message (``path: reason``) for the first part of ``body`` the SDK's types refuse, else None."""
    if not isinstance(body, dict):
        return "Input should be a valid dictionary"
    module = beta_params if beta else plain_params
    top = module.MessageCreateParamsStreaming if body.get("stream") is True else module.MessageCreateParamsNonStreaming
    return _object(body, top, (), exclude=HEADER_PARAMS)


class _Shape(typing.NamedTuple):
    """What an object type takes: its keys' types, the required keys, and whether other keys are allowed."""

    fields: dict[str, Any]
    required: frozenset[str]
    extra: bool


@functools.cache
def _shape(cls: type) -> _Shape:
    """The keys of a TypedDict or a pydantic model (the SDK's response blocks are accepted as input too)."""
    if isinstance(cls, type) and issubclass(cls, pydantic.BaseModel):
        fields = {info.alias or name: info.annotation for name, info in cls.model_fields.items()}
        required = frozenset(info.alias or name for name, info in cls.model_fields.items() if info.is_required())
        return _Shape(fields, required, False)
    hints = typing.get_type_hints(cls, include_extras=True)
    fields, required = {}, set()
    for name, hint in hints.items():
        origin = typing.get_origin(hint)
        if origin in _REQUIRED or (origin not in _NOT_REQUIRED and name in cls.__required_keys__):
            required.add(name)
        fields[name] = typing.get_args(hint)[0] if origin in _REQUIRED + _NOT_REQUIRED else hint
    config = getattr(cls, "__pydantic_config__", None) or {}
    return _Shape(fields, frozenset(required), config.get("extra") == "allow")


def _is_object(tp: Any) -> bool:
    """Whether ``tp`` is a TypedDict or a pydantic model."""
    return typing_extensions.is_typeddict(tp) or (isinstance(tp, type) and issubclass(tp, pydantic.BaseModel))


def _strip(tp: Any) -> Any:
    """``tp`` without Annotated / Required / NotRequired wrappers."""
    while typing.get_origin(tp) in _ANNOTATED + _REQUIRED + _NOT_REQUIRED:
        tp = typing.get_args(tp)[0]
    return tp


@functools.cache
def _members(tp: Any) -> tuple[Any, ...]:
    """The flattened members of a union."""
    out: list[Any] = []
    for arg in typing.get_args(tp):
        arg = _strip(arg)
        out.extend(_members(arg) if typing.get_origin(arg) in _UNIONS else [arg])
    return tuple(out)


def _tag_values(tp: Any, key: str) -> tuple[Any, ...] | None:
    """The literal values an object type requires under ``key`` (None: it has no such literal)."""
    shape = _shape(tp)
    hint = _strip(shape.fields.get(key))
    if key not in shape.required and not (isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)):
        return None
    return typing.get_args(hint) if typing.get_origin(hint) in _LITERALS else None


@functools.cache
def _plan(tp: Any) -> tuple[str | None, dict[Any, tuple[Any, ...]]]:
    """How a union's objects are told apart: the tag key and, per tag value, its members (TypedDicts first)."""
    objects = sorted((m for m in _members(tp) if _is_object(m)), key=lambda m: not typing_extensions.is_typeddict(m))
    for key in TAGS:
        tagged = [(m, _tag_values(m, key)) for m in objects]
        if objects and all(values for _, values in tagged):
            table: dict[Any, tuple[Any, ...]] = {}
            for member, values in tagged:
                for value in values or ():
                    table[value] = (*table.get(value, ()), member)
            return key, table
    return None, {}


def _where(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path)


def _fail(path: tuple[Any, ...], reason: str) -> str:
    return f"{_where(path)}: {reason}" if path else reason


def _literal_text(values: tuple[Any, ...]) -> str:
    shown = [repr(v) if isinstance(v, str) else str(v) for v in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _object(value: Any, tp: Any, path: tuple[Any, ...], exclude: frozenset[str] = frozenset()) -> str | None:
    """Check a JSON object against a TypedDict / pydantic model: known keys only, required keys present."""
    if not isinstance(value, dict):
        return _fail(path, "Input should be a valid dictionary")
    shape = _shape(tp)
    missing = sorted(shape.required - value.keys())
    if missing:
        return _fail((*path, missing[0]), "Field required")
    for key, item in value.items():
        if key not in shape.fields or key in exclude:
            if shape.extra and key not in exclude:
                continue
            return _fail((*path, key), "Extra inputs are not permitted")
        found = _check(item, shape.fields[key], (*path, key))
        if found is not None:
            return found
    return None


def _union(value: Any, tp: Any, path: tuple[Any, ...]) -> str | None:
    """Check a value against a union: objects by their tag, other members in order; the closest member's error."""
    members = _members(tp)
    if isinstance(value, dict):
        key, table = _plan(tp)
        loose = [m for m in members if not _is_object(m) and _accepts_kind(m, value)]
        if key is not None:
            tag = value.get(key)
            chosen = table.get(tag, ()) if isinstance(tag, str) else ()
            if not chosen and not loose:
                expected = ", ".join(repr(t) for t in table)
                return _fail(path, f"Input tag {tag!r} found using {key!r} does not match any of the expected tags: {expected}")
            members = (*chosen, *loose)
    errors = []
    for member in members:
        found = _check(value, member, path)
        if found is None:
            return None
        if _accepts_kind(member, value):
            errors.append(found)
    return errors[0] if errors else _check(value, members[0], path) if members else _fail(path, "Input is not allowed")


def _accepts_kind(tp: Any, value: Any) -> bool:
    """Whether a type takes values of the JSON kind of ``value`` (so its error is the one worth showing)."""
    tp = _strip(tp)
    origin = typing.get_origin(tp) or tp
    if tp in (Any, object) or isinstance(tp, typing.TypeVar):
        return True
    if isinstance(value, dict):
        return _is_object(tp) or origin in _MAPPINGS
    if isinstance(value, list):
        return origin in _SEQUENCES
    if origin in _LITERALS:
        return any(type(v) is type(value) for v in typing.get_args(tp))
    return isinstance(tp, type) and isinstance(value, tp) and not (tp is int and isinstance(value, bool))


def _check(value: Any, tp: Any, path: tuple[Any, ...]) -> str | None:
    """Check one JSON value against one SDK type; None when the types take it."""
    tp = _strip(tp)
    if tp in (Any, object) or isinstance(tp, typing.TypeVar):
        return None
    origin = typing.get_origin(tp)
    if origin in _UNIONS:
        return _union(value, tp, path)
    if origin in _LITERALS:
        allowed = typing.get_args(tp)
        if any(value == v and type(value) is type(v) for v in allowed):
            return None
        return _fail(path, f"Input should be {_literal_text(allowed)}")
    if _is_object(tp):
        return _object(value, tp, path)
    if origin in _MAPPINGS or tp in _MAPPINGS:
        if not isinstance(value, dict):
            return _fail(path, "Input should be a valid dictionary")
        args = typing.get_args(tp)
        for key, item in value.items():
            found = _check(item, args[1], (*path, key)) if args else None
            if found is not None:
                return found
        return None
    if origin in _SEQUENCES or tp in _SEQUENCES:
        if not isinstance(value, list):
            return _fail(path, "Input should be a valid list")
        args = typing.get_args(tp)
        for index, item in enumerate(value):
            found = _check(item, args[0], (*path, index)) if args else None
            if found is not None:
                return found
        return None
    if tp in _SCALARS:
        ok = isinstance(value, tp) and not (tp is int and isinstance(value, bool))
        ok = ok or (tp is float and isinstance(value, int) and not isinstance(value, bool))
        return None if ok else _fail(path, f"Input should be {_SCALARS[tp]}")
    return _fail(path, f"Input should be an instance of {getattr(tp, '__name__', tp)}")  # IO, PathLike: never JSON

"""JSON of the shape a reader expects, or one error line.

xlt reads back files it wrote (a run's config.json, a fine-tuning's train.json and cached
evaluations, tracking records, extraction headers, map headers). Edited by hand, damaged, or written
by another version, such a file can hold valid JSON of another shape: a list where an object was, a
number where a name was. :func:`require_fields` finds that where the file is read and names it, so
that it is the usual ``xlt <cmd>: error: <file>[:<line>]: ...`` and not a TypeError at its first use.

A kind is a Python type (``str``, ``int``, ``float`` for any number, ``bool``, ``dict``, ``list``),
``None`` for null, :class:`ListOf` / :class:`MapOf` for containers, or a tuple of kinds (any of them).
JSON's ``true`` is not a number here, and ``1`` is a number wherever a float is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

from xlt.utils.errors import PathLike, XltError


@dataclass(frozen=True)
class ListOf:
    """A JSON list whose every item is of ``kind``."""

    kind: "Kind"


@dataclass(frozen=True)
class MapOf:
    """A JSON object whose every value is of ``kind`` (keys are strings in JSON)."""

    kind: "Kind"


Kind = Union[type, None, ListOf, MapOf, tuple]
NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "an object",
         list: "a list"}


def matches(value: Any, kind: Kind) -> bool:
    """Whether ``value`` (parsed JSON) is of ``kind``."""
    if isinstance(kind, tuple):
        return any(matches(value, k) for k in kind)
    if kind is None:
        return value is None
    if isinstance(kind, ListOf):
        return isinstance(value, list) and all(matches(v, kind.kind) for v in value)
    if isinstance(kind, MapOf):
        return isinstance(value, dict) and all(matches(v, kind.kind) for v in value.values())
    if kind in (int, float):
        return isinstance(value, int if kind is int else (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)


def describe(kind: Kind) -> str:
    """``kind`` in words: "a string or null", "a list of integers", "an object of objects"."""
    if isinstance(kind, tuple):
        return " or ".join(describe(k) for k in kind)
    if isinstance(kind, (ListOf, MapOf)):
        return f"{'a list' if isinstance(kind, ListOf) else 'an object'} of {_plural(kind.kind)}"
    return "null" if kind is None else NAMES.get(kind, kind.__name__)


def _plural(kind: Kind) -> str:
    if isinstance(kind, tuple):
        return " or ".join(_plural(k) for k in kind)
    if isinstance(kind, (ListOf, MapOf)):
        return "lists" if isinstance(kind, ListOf) else "objects"
    plurals = {None: "nulls", str: "strings", int: "integers", float: "numbers", bool: "true or false values",
               dict: "objects", list: "lists"}
    return plurals[kind] if kind in plurals else kind.__name__ + "s"


def require_fields(value: Any, fields: Mapping[str, Kind], path: PathLike, what: str,
                   line: Optional[int] = None, optional: Mapping[str, Kind] = {}) -> dict:
    """``value`` when it is a JSON object with every key of ``fields`` (and any of ``optional``) of its
    kind; else XltError naming ``path`` (and ``line``): "not <what>: 'epochs' is a string, expected an
    integer"."""
    if not isinstance(value, dict):
        raise XltError(f"not {what} (a JSON object was expected, this is {_of(value)})", path, line)
    for key, kind in {**fields, **optional}.items():
        if key not in value:
            if key in fields:
                raise XltError(f"not {what}: no {key!r} field", path, line)
        elif not matches(value[key], kind):
            containers = tuple({ListOf: list, MapOf: dict}[type(k)] for k in (kind if isinstance(kind, tuple) else (kind,))
                               if isinstance(k, (ListOf, MapOf)))
            found = "has items of another kind" if isinstance(value[key], containers) else f"is {_of(value[key])}"
            raise XltError(f"not {what}: {key!r} {found}, expected {describe(kind)}", path, line)
    return value


def _of(value: Any) -> str:
    """The JSON kind of a parsed value, in words."""
    if value is None:
        return "null"
    return NAMES.get(bool if isinstance(value, bool) else type(value), type(value).__name__)

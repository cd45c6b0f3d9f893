"""Values checked against the type of the dataclass field they are meant for.

Config files and ``--task-option NAME VALUE`` reach typed dataclasses without click's type checks in
between; a wrong value must be one error line naming the option, not a ``TypeError`` deep inside a
run, and never a silent surprise (the string ``"False"`` is true in Python).
"""

from __future__ import annotations

import types
import typing
from dataclasses import field
from typing import Any, Optional, Union

from xlt.utils.errors import PathLike, XltError

TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def help_field(text: str, metavar: Optional[str] = None, **kwargs: Any) -> Any:
    """A dataclass field carrying its command-line help (and metavar) in its metadata."""
    return field(metadata={"help": text, "metavar": metavar}, **kwargs)


def conform(value: Any, hint: Any, what: str, from_text: bool = False, path: Optional[PathLike] = None) -> Any:
    """``value`` as the type ``hint`` (bool, int, float, str, Optional, list, tuple, dict, Any).

    Lists become tuples where the hint is a tuple (JSON and TOML have no tuples) and ints become
    floats. With ``from_text`` a string is read as the scalar it spells (``"false"``, ``"3"``,
    ``"1e-5"``), for values typed on a command line. Anything else raises XltError.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        for option in options:
            try:
                return conform(value, option, what, from_text, path)
            except XltError:
                continue
        raise _mismatch(value, hint, what, path)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise _mismatch(value, hint, what, path)
        return [conform(v, args[0], what, from_text, path) for v in value]
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise _mismatch(value, hint, what, path)
        item_hints = [args[0]] * len(value) if Ellipsis in args else list(args)
        if len(item_hints) != len(value):
            raise _mismatch(value, hint, what, path)
        return tuple(conform(v, h, what, from_text, path) for v, h in zip(value, item_hints))
    if origin is dict:
        if not isinstance(value, dict):
            raise _mismatch(value, hint, what, path)
        return {conform(k, args[0], what, from_text, path): conform(v, args[1], what, from_text, path)
                for k, v in value.items()}
    return _scalar(value, hint, what, from_text, path)


def _scalar(value: Any, hint: Any, what: str, from_text: bool, path: Optional[PathLike]) -> Any:
    if from_text and isinstance(value, str) and hint in (bool, int, float):
        text = value.strip().lower()
        if hint is bool and text in TRUE + FALSE:
            return text in TRUE
        if hint in (int, float):
            try:
                return hint(text)
            except ValueError:
                pass
    if hint is bool and isinstance(value, bool):
        return value
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is str and isinstance(value, str):
        return value
    raise _mismatch(value, hint, what, path)


def _mismatch(value: Any, hint: Any, what: str, path: Optional[PathLike]) -> XltError:
    name = getattr(hint, "__name__", None) if typing.get_origin(hint) is None else None
    return XltError(f"{what}: expected {name or str(hint).replace('typing.', '')}, got {value!r}", path)

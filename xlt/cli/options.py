"""Click options generated from typed dataclass configs, so help text is written once.

Each field becomes ``--field-name`` with the field's ``help`` metadata and default: ``bool`` is a
``--x/--no-x`` flag, ``tuple[a, b]`` takes two values, ``list[a]`` is a repeatable ``--x VALUE``, and
``dict[str, str]`` is a repeatable ``--x KEY VALUE`` pair (``--train en data/en.train --train fr
data/fr.train``). A field's ``metavar`` metadata names its value in the help (paths: FILE, DIR,
PREFIX, never click's TEXT).

Nothing here imports torch: every command module imports this one, and ``--help`` must stay fast.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, Iterable, Mapping, Optional

import click

from xlt.utils.checkpoint_names import CHECKPOINT_HELP, FINETUNED_HELP, check_checkpoint_name
from xlt.utils.errors import EXIT_USAGE, XltError

# Defined here, not beside resolve_device in xlt.utils.device: that module imports torch, which the
# help of a command with --device must not wait for, and the help texts are the CLI's.
DEVICE_HELP = "torch device: auto (CUDA when present, else CPU), cpu, cuda or cuda:N"

# The help of a setting that several commands' dataclasses share, for a field whose metadata has none
# (the library's settings then need nothing from the CLI).
SHARED_HELP = {"device": DEVICE_HELP}


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    args = typing.get_args(tp)
    if typing.get_origin(tp) is typing.Union and type(None) in args:
        return next(a for a in args if a is not type(None)), True
    return tp, False


def _option(field: dataclasses.Field, tp: Any, required: bool, metavar: Optional[str] = None) -> Callable:
    name = "--" + field.name.replace("_", "-")
    help_text = field.metadata.get("help", SHARED_HELP.get(field.name, ""))
    metavar = metavar or field.metadata.get("metavar")
    has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    default = field.default if field.default is not dataclasses.MISSING else None
    base, optional = _unwrap_optional(tp)
    origin = typing.get_origin(base)
    if base is bool:
        flag = f"{name}/--no-{name[2:]}"
        if optional:
            return click.option(flag, field.name, default=None, help=help_text + " [default: automatic]")
        return click.option(flag, field.name, default=default, show_default=True, help=help_text)
    if origin is dict:
        return click.option(name, field.name, type=(str, str), multiple=True, required=required and not has_default,
                            metavar=metavar or "KEY VALUE", help=help_text + " (repeatable)")
    if origin is list:
        return click.option(name, field.name, type=typing.get_args(base)[0], multiple=True, metavar=metavar,
                            help=help_text + " (repeatable)")
    if origin is tuple:
        inner = typing.get_args(base)
        return click.option(name, field.name, type=tuple(inner), default=default, show_default=default is not None,
                            metavar=metavar, help=help_text)
    if not has_default:
        # Passing default=None would count as a default in recent click and disable `required`.
        return click.option(name, field.name, type=base, required=required, metavar=metavar, help=help_text)
    return click.option(name, field.name, type=base, default=default, show_default=default is not None,
                        metavar=metavar, help=help_text)


def dataclass_options(cls: type, skip: Iterable[str] = (),
                      metavars: Optional[Mapping[str, str]] = None) -> Callable[[Callable], Callable]:
    """A decorator adding one click option per field of the dataclass ``cls``; ``metavars`` (field ->
    metavar) names the values of fields whose metadata does not, e.g. ``{"vocab": "FILE"}``."""
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.name not in set(skip)]
    metavars = metavars or {}

    def decorate(fn: Callable) -> Callable:
        for f in reversed(fields):
            fn = _option(f, hints[f.name], required=True, metavar=metavars.get(f.name))(fn)
        return fn

    return decorate


def given_on_command_line(*names: str) -> list[str]:
    """Those of the current command's parameters ``names`` that its command line set (a default, an
    environment variable or a config file did not): for refusing a setting the command would ignore."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    return [name for name in names if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]


def unused_setting(name: str, why: str) -> XltError:
    """The one error line for an option given that plays no part in this run."""
    return XltError(f"--{name.replace('_', '-')} {why}: leave it out")


def build_config(cls: type, values: dict[str, Any]):
    """Instantiate ``cls`` from click's values (pairs become dicts; unset optional values stay defaults)."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        v = values[f.name]
        base, _ = _unwrap_optional(hints[f.name])
        if typing.get_origin(base) is dict:
            keys = list(v) if isinstance(v, dict) else [key for key, _ in v or ()]
            if twice := sorted({key for key in keys if keys.count(key) > 1}):
                # `--train en A --train en B` would keep B alone without a word
                raise XltError(f"--{f.name.replace('_', '-')} {twice[0]} given twice")
            v = dict(v)
        elif typing.get_origin(base) is list:
            v = list(v or ())
        elif typing.get_origin(base) is tuple and v is not None:
            v = tuple(v)
        kwargs[f.name] = v
    return cls(**kwargs)


def _device(ctx: click.Context, param: click.Parameter, value: str):
    # Resolved (torch imported) when the command runs, never for --help.
    from xlt.utils.device import resolve_device

    try:
        return resolve_device(value)
    except XltError as e:
        raise click.BadParameter(str(e)) from None


class _BadOutput(click.ClickException):
    """An output refused while the command line is read; :func:`xlt.cli.main` prints it as the
    command's one error line (``ctx`` names the command) with the exit status of every bad input."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, ctx: Optional[click.Context]):
        super().__init__(message)
        self.ctx = ctx


class OutputPath(click.Path):
    """An output checked when the command line is read, before any input is read or model loaded:
    ``kind`` "file" (``-``: stdout), "prefix" (the beginning of several files' names) or "directory"
    (written, or created when absent). See :func:`xlt.utils.outputs.check_output_paths`."""

    def __init__(self, kind: str = "file", **kwargs: Any):
        if kind == "directory":
            kwargs.setdefault("file_okay", False)
        super().__init__(**kwargs)
        self.kind = kind

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        value = super().convert(value, param, ctx)
        if value == "-" and self.kind == "file":
            return value
        from xlt.utils.outputs import check_output_directory, check_output_paths

        try:
            if self.kind == "directory":
                check_output_directory(value)
            else:
                check_output_paths(value, prefix=self.kind == "prefix")
        except XltError as e:
            raise _BadOutput(str(e), ctx) from None
        return value


def device_option(fn: Callable) -> Callable:
    """``--device``, resolved to a torch.device (auto: CUDA when present) before the command runs."""
    return click.option("--device", default="auto", show_default=True, metavar="DEVICE", callback=_device,
                        help=DEVICE_HELP)(fn)


def _checkpoint(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        return check_checkpoint_name(value)
    except XltError as e:
        raise click.BadParameter(str(e)) from None


def checkpoint_option(fn: Callable) -> Callable:
    """``--checkpoint`` of every command that loads an xlt run: best, last or a snapshot step-N,
    checked when the command line is read (whether step-N exists, when the run is loaded; a
    transformers model, which has one set of weights, ignores it)."""
    return click.option("--checkpoint", default="best", show_default=True, metavar="[best|last|step-N]",
                        callback=_checkpoint, help=CHECKPOINT_HELP)(fn)


def finetuned_option(fn: Callable) -> Callable:
    """``--finetuned RUN_DIR``: the analyses read a fine-tuned encoder (:mod:`xlt.loader.finetuned`)."""
    return click.option("--finetuned", default=None, metavar="RUN_DIR", help=FINETUNED_HELP)(fn)

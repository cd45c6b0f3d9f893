"""The ``xlt`` command: a click group whose subcommands each parse options and call one function.

Subcommands are imported lazily: ``xlt --help`` lists them from :data:`SHORT_HELP` without importing
one, and ``xlt tokenize`` imports only its own module, so neither pays for torch. Every command
takes ``-q/--quiet`` as the group does, and runs through :func:`main`, which owns the one error
path: an :class:`~xlt.utils.errors.XltError` becomes ``xlt <cmd>: error: <file>:<line>: <what>`` on
stderr with exit status 2.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import signal
import sys
import threading
from typing import Optional

import click

from xlt import __version__
from xlt.utils import log
from xlt.utils.errors import EXIT_TERMINATED, EXIT_USAGE, XltError

# name -> "module:attribute", imported only when the subcommand runs (fast --help and start-up).
SUBCOMMANDS = {
    "tokenize": "xlt.cli.text:tokenize",
    "bpe": "xlt.cli.bpe:bpe",
    "codeswitch": "xlt.cli.text:codeswitch",
    "fake-english": "xlt.cli.text:fake_english",
    "permute-words": "xlt.cli.text:permute_words",
    "binarize": "xlt.cli.store:binarize",
    "data": "xlt.cli.data:data",
    "pretrain": "xlt.cli.pretrain:pretrain",
    "finetune": "xlt.cli.finetune:finetune",
    "baselines": "xlt.cli.baselines:baselines",
    "embed": "xlt.cli.embed:embed",
    "extract": "xlt.cli.analysis:extract",
    "align": "xlt.cli.align:align",
    "cka": "xlt.cli.analysis:cka",
    "shift-decode": "xlt.cli.analysis:shift_decode",
    "export": "xlt.cli.export:export",
    "report": "xlt.cli.report:report",
    "track": "xlt.cli.track:track",
}

# name -> the command's short help (its docstring's first sentence), so that `xlt --help` lists the
# commands without importing them (each module pulls in its library, which would cost ~2 s).
# tests/test_cli.py checks every entry against the command's real help; a command missing here is
# still listed, by importing it.
SHORT_HELP = {
    "tokenize": "Moses-normalize and tokenize text, one sentence per line (jieba segments Chinese).",
    "bpe": "Byte-pair encoding, byte-identical to fastBPE (codes and vocabularies in its formats).",
    "codeswitch": "Replace dictionary words by their translations (the paper's \"Extra anchors\").",
    "fake-english": "Fake-English: English text or task data with every character replaced by a twin of its own.",
    "permute-words": "K et al.'s word-order control: permute the words of each sentence, keep labels and arcs.",
    "binarize": "Encode BPE'd text (one sentence per line) into a memory-mapped token store.",
    "data": "Fetch and check the data sets that xlt's pipelines use (one recipe per data set).",
    "pretrain": "Pretrain a bilingual or multilingual masked language model.",
    "finetune": "Zero-shot cross-lingual transfer: fine-tune on a source language, test on every target.",
    "baselines": "Trivial baselines of a task (xnli, ner, parse), from its data files only: no model.",
    "embed": "Static word embeddings (Word2Vec, GloVe) trained jointly over several languages.",
    "extract": "Per-layer representations of INPUT (one sentence per line; word level: pre-tokenized words).",
    "align": "Procrustes alignment of two models' representations (Wu et al., 2020, §5.1).",
    "cka": "Linear CKA between layer representations of parallel sentences (Wu et al., 2020, Figure 7).",
    "shift-decode": "Mean of Language, mean difference shift, unsupervised token translation (Liu et al., 2020, §4).",
    "export": "Export an xlt run to Hugging Face transformers (`xlt export hf`).",
    "report": "Lay result files out as the papers' tables, with the papers' numbers and findings.",
    "track": "Evaluate each new pretraining snapshot (checkpoints/step-N.pt) into tracking records.",
}

QUIET_HELP = "No logs or progress bars on stderr."

# click >= 8.2 raises this usage error for a bare group; older click prints the help and exits 0 itself.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())

_state = {"command": "xlt", "debug": False, "fork_hook": False}


def _set_quiet(ctx: click.Context, param: click.Parameter, quiet: bool) -> None:
    # Only ever switches logs off: `xlt -q tokenize` stays quiet when tokenize's own -q is absent.
    if quiet:
        log.set_quiet(True)


def _quiet_option() -> click.Option:
    return click.Option(["--quiet", "-q"], is_flag=True, expose_value=False, callback=_set_quiet, help=QUIET_HELP)


def _track_name(cmd: click.Command) -> click.Command:
    """Make ``cmd`` (and a group's subcommands) record their full name when they run, and take
    ``-q/--quiet`` after their name as well as before it (``xlt bpe learn -q ...``)."""
    if not any(p.name == "quiet" for p in cmd.params):
        cmd.params.append(_quiet_option())
    original = cmd.invoke

    def invoke(ctx: click.Context):
        _state["command"] = ctx.command_path
        return original(ctx)

    cmd.invoke = invoke  # type: ignore[method-assign]
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _track_name(sub)
    return cmd


class XltGroup(click.Group):
    """Subcommands imported when first used (``lazy``: name -> "module:attribute"); every command
    records its full name (``xlt bpe learn``) when it runs, so the error line can name it."""

    def __init__(self, *args, lazy: Optional[dict] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        if name in self.lazy and name not in self.commands:
            module, attr = self.lazy[name].split(":")
            self.add_command(_track_name(getattr(importlib.import_module(module), attr)), name)
        return super().get_command(ctx, name)

    def resolve_command(self, ctx, args):
        # click suggests only among commands already imported, and only in the same case (PRETRAIN would
        # get nothing); here the lazy ones count too, compared in lower case.
        name = click.utils.make_str(args[0])
        if not ctx.resilient_parsing and not name.startswith("-") and name in self.list_commands(ctx):
            # named now, before its module (torch: seconds) is imported and its options parsed: a SIGTERM
            # or an error meanwhile is told as `xlt cka compare: ...`, not `xlt cka: ...`
            _state["command"] = f"{ctx.command_path} {name}"
        if not ctx.resilient_parsing and not name.startswith("-") and self.get_command(ctx, name) is None:
            names = {command.lower(): command for command in self.list_commands(ctx)}
            close = difflib.get_close_matches(name.lower(), names, n=1)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {names[close[0]]!r}?")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx, formatter):
        """click's command list, with the short help of a command not yet imported taken from
        :data:`SHORT_HELP` (rendered as click renders a docstring) instead of importing it."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy and name not in self.commands and name in SHORT_HELP:
                rows.append((name, click.Command(name, help=SHORT_HELP[name])))
            else:
                cmd = self.get_command(ctx, name)
                if cmd is not None and not cmd.hidden:
                    rows.append((name, cmd))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])

    def invoke(self, ctx: click.Context):
        _state["command"] = ctx.command_path
        return super().invoke(ctx)


XltGroup.group_class = XltGroup


@click.group(cls=XltGroup, lazy=SUBCOMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="xlt")
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
@click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
def cli(quiet: bool, debug: bool) -> None:
    """Cross-lingual representation research, one Unix-style stage at a time.

    \b
    Example (a bilingual BPE'd corpus, ready for pretraining):
      xlt tokenize --lang en en.txt -o en.tok
      xlt tokenize --lang fr fr.txt -o fr.tok
      xlt bpe learn --merges 80000 -o codes en.tok fr.tok
      xlt bpe apply --codes codes en.tok -o en.bpe
      xlt bpe vocab -o vocab en.bpe fr.bpe
      xlt binarize --vocab vocab --lang en en.bpe -o en.train
    """
    log.set_quiet(quiet)
    _state["debug"] = debug


def fail(message: str, status: int = EXIT_USAGE) -> None:
    """Print the one error line and exit with ``status`` (2: bad input)."""
    click.echo(f"{_state['command']}: error: {message}", err=True)
    sys.exit(status)


class _SigTerm(BaseException):
    """SIGTERM, raised where the program stands, so that every output being written removes its
    temporary file on the way out (the default action kills the process and leaves them). Pretraining
    installs its own handler while it trains: it stops at a step boundary after a checkpoint."""


def _on_sigterm(signum, frame) -> None:
    raise _SigTerm()


def _default_sigterm() -> None:
    # in a forked worker (tokenize's multiprocessing pool, which its parent stops by SIGTERM) the
    # default action: it writes no output of its own, and must die at once, not unwind
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stdout_refused(error: OSError) -> bool:
    """Whether ``error`` is stdout refusing output (`> /dev/full`, a full disk): the innermost frame
    was writing to it, or it still cannot take what it holds. stdout is then pointed at /dev/null,
    so that Python's own flush at exit reports nothing more."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    streams = {id(sys.stdout), id(getattr(sys.stdout, "buffer", None))}
    writing = tb is not None and any(id(value) in streams for value in tb.tb_frame.f_locals.values())
    try:
        sys.stdout.flush()
    except OSError:
        writing = True
    if writing:
        with contextlib.suppress(OSError, ValueError):   # a stream without a descriptor (a test's capture)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return writing


def main(argv: Optional[list[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if threading.current_thread() is not threading.main_thread():   # signals reach the main thread only
        return _run(argv)
    if not _state["fork_hook"]:
        os.register_at_fork(after_in_child=_default_sigterm)
        _state["fork_hook"] = True
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _run(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)   # a caller in-process (tests) keeps its own handler


def _run(argv: list[str]) -> None:
    _state["debug"] = "--debug" in argv
    try:
        cli.main(args=argv, prog_name="xlt", standalone_mode=False)
        sys.stdout.flush()   # a refusal (`> /dev/full`) is reported here, not by Python at exit
    except click.exceptions.Abort:
        click.echo(f"{_state['command']}: interrupted", err=True)
        sys.exit(130)
    except NO_ARGS_IS_HELP as e:
        # A group given no command: its help, shown (and exited with) as click itself shows it, not an error line.
        e.show()
        sys.exit(e.exit_code)
    except click.ClickException as e:
        # One line like every other bad input (click's own report spends three on usage and a hint).
        ctx = getattr(e, "ctx", None)
        command = ctx.command_path if ctx is not None else _state["command"]
        hint = f" (see {command} --help)" if isinstance(e, click.UsageError) else ""
        click.echo(f"{command}: error: {e.format_message()}{hint}", err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except XltError as e:
        if _state["debug"]:
            raise
        if getattr(e, "quiet", False):   # another process (torchrun's rank 0) prints the line
            sys.exit(getattr(e, "exit_status", EXIT_USAGE))
        fail(str(e), getattr(e, "exit_status", EXIT_USAGE))
    except BrokenPipeError:
        # `xlt ... | head` is normal use: stop quietly, and keep Python from complaining at exit.
        sys.stderr.close()
        sys.exit(0)
    except KeyboardInterrupt:
        click.echo(f"{_state['command']}: interrupted", err=True)
        sys.exit(130)
    except _SigTerm:
        click.echo(f"{_state['command']}: terminated", err=True)
        sys.exit(EXIT_TERMINATED)
    except OSError as e:
        if not _state["debug"] and isinstance(e, FileNotFoundError) and not _working_directory_exists():
            fail("the working directory was removed while in use (cd into one that exists)")
        if _state["debug"] or not _stdout_refused(e):
            raise
        fail(f"<stdout>: cannot write ({e.strerror or e})")


def _working_directory_exists() -> bool:
    # a relative path given to os.path.abspath asks for the working directory, which a shell may
    # still stand in after it was removed: every relative name is then "not found"
    try:
        os.getcwd()
        return True
    except FileNotFoundError:
        return False


if __name__ == "__main__":
    main()

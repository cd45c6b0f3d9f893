"""Every ``xlt`` command written out in README.md, docs/**/*.md and the commands' ``--help`` examples
parses against the CLI as it is:
an option renamed or dropped in the code, or a typo in a page, fails here instead of in a reader's
shell. Only parsing: nothing runs, so a command's files need not exist (their directories are made
in a scratch folder, since ``-o`` checks its directory while parsing). Commands with placeholders
(``...``, ``$VAR``, ``<file>``) are skipped: they are sketches, not commands."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from xlt.cli import cli

ROOT = Path(__file__).resolve().parents[1]
SHELL_BLOCK = re.compile(r"```(?:sh|bash|shell)\n(.*?)```", re.S)
PLACEHOLDER = re.compile(r"^\.\.\.$|\$|<")


def xlt_commands(markdown: str) -> list[list[str]]:
    """The argument lists of the ``xlt`` commands in ``markdown``'s shell blocks (continued lines
    joined, each stage of a pipe or ``&&`` chain apart, comments and redirections dropped)."""
    found = []
    for block in SHELL_BLOCK.findall(markdown):
        for line in re.sub(r"\\\n", " ", block).splitlines():
            for stage in re.split(r"\|\||&&|[|;]", line):
                stage = stage.strip()
                if stage.startswith("xlt "):
                    words = [w for w in shlex.split(stage, comments=True)[1:] if not w.startswith(">")]
                    if not any(PLACEHOLDER.search(w) for w in words):
                        found.append(words)
    return found


def unparsed(ctx: click.Context) -> list[str]:
    """What a group's context left for its subcommand: the subcommand's name is kept apart in click
    8.1 (``protected_args``) and 8.2+ (``_protected_args``; the public name warns), in ``args`` in 9."""
    protected = ctx._protected_args if hasattr(ctx, "_protected_args") else getattr(ctx, "protected_args", [])
    return [*protected, *ctx.args]


def parse(args: list[str]) -> None:
    """Parse ``xlt ARGS`` down to its leaf command as click would, without invoking anything."""
    ctx = cli.make_context("xlt", list(args))
    command: click.Command = cli
    while isinstance(command, click.Group):
        name, command, rest = command.resolve_command(ctx, unparsed(ctx))
        ctx = command.make_context(name, rest, parent=ctx)


def make_their_directories(args: list[str]) -> None:
    """Create (in the current folder) the directory of every path in ``args``, and the path itself
    where an option names a directory (``--results-dir D`` must exist)."""
    for option, word in zip([""] + args, args):
        if "/" in word and not word.startswith("-") and ":" not in word:
            path = Path(word.lstrip("/"))
            (path if option.endswith("-dir") else path.parent).mkdir(parents=True, exist_ok=True)


def help_examples() -> list[tuple[str, list[str]]]:
    """``("xlt bpe learn --help", args)`` for every example in every command's help text."""
    found, ctx = [], click.Context(cli)

    def visit(command: click.Command, path: str) -> None:
        # a docstring's example is indented and its continuations end in "\\"
        lines = "\n".join(line.strip() for line in (command.help or "").splitlines())
        found.extend((f"{path} --help", args) for args in xlt_commands(f"```sh\n{lines}\n```"))
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                visit(command.get_command(ctx, name), f"{path} {name}")

    visit(cli, "xlt")
    return found


PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
COMMANDS = [(page.relative_to(ROOT).as_posix(), args)
            for page in PAGES for args in xlt_commands(page.read_text(encoding="utf-8"))] + help_examples()


def test_the_pages_hold_commands_to_check():
    # The README's tour alone has nine; a change to the block syntax that finds none would pass vacuously.
    assert sum(page == "README.md" for page, _ in COMMANDS) >= 9
    assert len(COMMANDS) >= 60
    helps = {source for source, _ in COMMANDS if source.endswith("--help")}
    assert {"xlt --help", "xlt pretrain --help", "xlt bpe learn --help"} <= helps


@pytest.mark.parametrize("page,args", COMMANDS, ids=[f"{p}:{' '.join(a[:2])}" for p, a in COMMANDS])
def test_every_documented_command_parses(page, args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_their_directories(args)
    try:
        parse(args)
    except click.exceptions.Exit:  # --help, --version
        pass
    except click.ClickException as error:
        pytest.fail(f"{page}: xlt {shlex.join(args)}\n  -> {error.format_message()}")


def test_a_renamed_option_or_a_wrong_value_is_caught(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    page = """```sh
xz -dc a.xz | head -n 5 | xlt tokenize --lang en -o en.tok   # a pipe
xlt bpe learn --merge 8000 -o codes en.tok
xlt pretrain --max-steps many \\
    --run-dir r
xlt frobnicate
xlt extract --model runs/$RUN ...
```"""
    commands = xlt_commands(page)
    assert commands[0] == ["tokenize", "--lang", "en", "-o", "en.tok"]
    assert len(commands) == 4  # the sketch with $RUN and ... is skipped
    parse(commands[0])
    for args, message in zip(commands[1:], ["No such option", "many", "No such command"]):
        with pytest.raises(click.ClickException) as error:
            parse(args)
        assert message in error.value.format_message()

"""What a user sees before any work: `--help` imports nothing heavy, the command list is the commands'
own short help, and options read alike in every command (path metavars, single-letter flags)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import click
from click.testing import CliRunner

from xlt.cli import SHORT_HELP, SUBCOMMANDS, XltGroup, cli

HEAVY = ("torch", "numpy", "scipy", "transformers", "xlt.analysis")
# Of xlt.analysis, what a help may import: the package face and align's settings import neither numpy nor torch.
LIGHT = ("xlt.analysis", "xlt.analysis.align_settings")

# Modules other people are editing (issue 13/14): what they still import or spell differently. An
# entry that no longer applies fails its test, so this list only shrinks.
PENDING_IMPORTS: set[str] = set()
PENDING_METAVARS: set[tuple[str, str]] = set()

# A path's value is named PATH, FILE, DIR or PREFIX (or NAME_FILE, NAME_DIR: DEV_FILE TEST_FILE).
PATH_METAVAR = re.compile(r"^([A-Z]+_)?(PATH|FILE|DIR|PREFIX)$")
# Long option names (their last word, without a side's -a/-b) that take a path; --model is not one
# (hf:NAME names a model), and the data options are paths only as whole names (--train, not --max-train).
PATH_WORDS = {"output", "input", "vocab", "codes", "dict", "dir", "file", "path", "report", "json", "corpus",
              "text", "reps", "means", "src", "tgt", "retrieval", "reference", "parallel", "config", "numbers",
              "mirror", "shift"}
PATH_NAMES = {"--train", "--dev", "--test", "--eval"}


# Runs `xlt ARGS --help` for each argv given as JSON, reporting the heavy modules each one imported.
_HELP_IMPORTS = """
import json, sys
from xlt.cli import main
heavy, light = {heavy!r}, {light!r}
seen, report = set(), {{}}
for argv in json.loads(sys.argv[1]):
    try:
        main(argv + ["--help"])
    except SystemExit:
        pass
    now = {{h for h in heavy if any((m == h or m.startswith(h + ".")) and m not in light for m in sys.modules)}} - seen
    report[" ".join(argv) or "xlt"] = sorted(now)
    seen |= now
print(json.dumps({{"heavy": report, "cli": sorted(m for m in sys.modules if m.startswith("xlt.cli."))}}))
"""


def _help_imports(*argvs: list[str]) -> dict:
    """In a fresh interpreter: {"heavy": {command: heavy modules its --help imported}, "cli": xlt.cli modules
    imported, "help": what the commands printed}."""
    res = subprocess.run([sys.executable, "-c", _HELP_IMPORTS.format(heavy=HEAVY, light=LIGHT), json.dumps(list(argvs))],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    *help_text, last = res.stdout.splitlines()
    return {**json.loads(last), "help": "\n".join(help_text)}


WHO = "(`python -X importtime -m xlt CMD --help` shows who imports it)"


def test_xlt_help_imports_no_subcommand_module_and_no_heavy_library():
    out = _help_imports([])
    assert "Commands:" in out["help"] and "\n  tokenize  " in out["help"]
    assert out["cli"] == [], f"`xlt --help` imported {out['cli']}: add them to SHORT_HELP in xlt/cli/__init__.py"
    assert out["heavy"]["xlt"] == [], f"`xlt --help` imported {out['heavy']['xlt']} {WHO}"


def test_every_command_help_imports_no_heavy_library():
    names = [name for name in SUBCOMMANDS if name not in PENDING_IMPORTS]
    out = _help_imports(*([name] for name in names))
    offenders = {cmd: mods for cmd, mods in out["heavy"].items() if mods}
    assert not offenders, f"--help imported heavy modules (import them in the command body): {offenders} {WHO}"
    for name in PENDING_IMPORTS:
        fresh = _help_imports([name])
        assert fresh["heavy"][name], f"xlt {name} --help no longer imports {HEAVY}: remove it from PENDING_IMPORTS"


def test_a_settings_field_without_help_takes_the_clis_shared_text():
    """AlignSettings.device has no help of its own: the CLI's DEVICE_HELP is its option's."""
    from xlt.cli.options import DEVICE_HELP

    ctx = click.Context(cli, info_name="xlt")
    align = cli.get_command(ctx, "align")
    word = align.get_command(click.Context(align, parent=ctx, info_name="align"), "word")
    assert [p.help for p in word.params if p.name == "device"] == [DEVICE_HELP]


def test_short_help_table_is_each_commands_own_short_help():
    ctx = click.Context(cli, info_name="xlt")
    assert set(SHORT_HELP) <= set(SUBCOMMANDS), set(SHORT_HELP) - set(SUBCOMMANDS)
    for name, text in SHORT_HELP.items():
        real = cli.get_command(ctx, name).get_short_help_str(limit=10**6)
        assert text == real, f"SHORT_HELP[{name!r}] in xlt/cli/__init__.py should be {real!r}"


def _group(**kwargs) -> XltGroup:
    return XltGroup(name="xlt", params=cli.params, help=cli.help, context_settings=cli.context_settings, **kwargs)


def test_help_lists_commands_as_if_all_were_imported(monkeypatch):
    ctx = click.Context(cli, info_name="xlt")
    loaded = _group(commands={name: cli.get_command(ctx, name) for name in SUBCOMMANDS})
    expected = CliRunner().invoke(loaded, ["--help"], prog_name="xlt").output
    assert all(f"\n  {name} " in expected for name in SUBCOMMANDS)

    assert CliRunner().invoke(_group(lazy=dict(SUBCOMMANDS)), ["--help"], prog_name="xlt").output == expected
    # A command someone added to SUBCOMMANDS but not to the table is imported and listed all the same.
    monkeypatch.delitem(SHORT_HELP, "tokenize")
    assert CliRunner().invoke(_group(lazy=dict(SUBCOMMANDS)), ["--help"], prog_name="xlt").output == expected


def _walk(cmd: click.Command, ctx: click.Context):
    yield ctx.command_path, cmd, ctx
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            yield from _walk(sub, click.Context(sub, parent=ctx, info_name=name))


def _options():
    """(command path, option, metavar) of every option of every command, subcommands imported."""
    root = click.Context(cli, info_name="xlt", **cli.context_settings)  # -h/--help, as `xlt` has it
    for path, cmd, ctx in _walk(cli, root):
        for param in cmd.get_params(ctx):
            if isinstance(param, click.Option):
                yield path, param, None if param.is_flag else param.make_metavar(ctx)


def _long(param: click.Option) -> str:
    return max(param.opts + param.secondary_opts, key=len)


def _takes_path(param: click.Option) -> bool:
    types = param.type.types if isinstance(param.type, click.Tuple) else [param.type]
    if any(isinstance(t, click.Path) for t in types):
        return True
    words = _long(param).lstrip("-").split("-")
    if len(words) > 1 and len(words[-1]) == 1:  # --model-a, --text-b: one side of two
        words = words[:-1]
    return words[-1] in PATH_WORDS or _long(param) in PATH_NAMES


def test_path_options_name_their_value_path_file_dir_or_prefix():
    bad = set()
    for path, param, metavar in _options():
        if metavar is None or not _takes_path(param):
            continue
        words = [w.strip("[]<>.") for w in metavar.split()]
        if "TEXT" in words or "DIRECTORY" in words or not PATH_METAVAR.match(words[-1]):
            bad.add((path, _long(param), metavar))
    new = sorted(b for b in bad if b[:2] not in PENDING_METAVARS)
    assert not new, f"name path values PATH, FILE, DIR or PREFIX: {new}"
    fixed = PENDING_METAVARS - {(p, o) for p, o, _ in bad}
    assert not fixed, f"now named well, remove from PENDING_METAVARS: {sorted(fixed)}"


def test_single_letter_flags_mean_one_thing_everywhere():
    letters: dict[str, set[str]] = {}
    longs: dict[str, set] = {}
    for path, param, _ in _options():
        names = param.opts + param.secondary_opts
        short = sorted(n for n in names if re.fullmatch(r"-[A-Za-z]", n))
        for letter in short:
            letters.setdefault(letter, set()).add(_long(param))
        longs.setdefault(_long(param), set()).add((path, tuple(short)))
    clashes = {letter: names for letter, names in letters.items() if len(names) > 1}
    assert not clashes, f"one letter, several options: {clashes}"
    # The letters every command shares are on every such option (--codes is one file in bpe apply, pairs in
    # pretrain: a long name alone does not make one meaning).
    for letter in ("-o", "-l", "-q", "-h"):
        (name,) = letters[letter]
        without = sorted(path for path, short in longs[name] if letter not in short)
        assert not without, f"{name} is {letter} elsewhere but not in {without}"
    assert letters["-h"] == {"--help"} and letters["-q"] == {"--quiet"} and letters["-o"] == {"--output"}
    assert letters.get("-v", {"--verbose"}) == {"--verbose"}, "-v means --verbose (or nothing) by convention"

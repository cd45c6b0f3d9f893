"""A kill between the renames of a command that writes several files.

Each file of a set is renamed into place on its own, so a kill (SIGKILL just before a rename, SIGTERM
acted on just after one) can stop a command between two of them. The file that says the set is
complete (a store's or an extraction's header, a vocabulary beside its sidecar, a code-switched
text beside its report, a report's Markdown, which make targets) must then be absent, or stand in
the old set or the new one whole: never an old one beside new files, or a new one beside old. The
kill is put at each rename in turn by wrapping ``os.replace``; a rerun must give the uninterrupted
output.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest
import synthetic
from conftest import run_in_process

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Killed(BaseException):
    """What the kill looks like from inside: not an Exception, raised where the program stands."""


def snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def restore(out: Path, files: dict[str, bytes]) -> None:
    for p in out.iterdir():
        p.unlink()
    for name, data in files.items():
        (out / name).write_bytes(data)


def run_killed(capsys, monkeypatch, args: list, at: int, after: bool) -> None:
    real_replace, count = os.replace, [0]

    def replace(src, dst):
        count[0] += 1
        if count[0] == at and not after:
            raise Killed()
        real_replace(src, dst)
        if count[0] == at:
            raise Killed()

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", replace)
        with pytest.raises(Killed):
            run_in_process(capsys, "-q", *args)


def renames_of(capsys, monkeypatch, args: list) -> int:
    real_replace, count = os.replace, [0]

    def replace(src, dst):
        count[0] += 1
        real_replace(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", replace)
        assert run_in_process(capsys, "-q", *args).returncode == 0
    return count[0]


def commands(root: Path, tiny_run: Path, capsys, name: str) -> dict[str, tuple[str, Callable[[str], list]]]:
    """name -> (the file that says the set is complete, variant -> the command writing into root/out)."""
    inputs, out = root / "in", root / "out"
    inputs.mkdir()
    out.mkdir()
    texts = {}
    for variant, seed in (("old", 1), ("new", 2)):
        en, fr = synthetic.corpus(60 if variant == "old" else 80, seed=seed)
        texts[variant] = (inputs / f"en.{variant}", inputs / f"fr.{variant}")
        texts[variant][0].write_text("\n".join(en) + "\n")
        texts[variant][1].write_text("\n".join(fr) + "\n")
    vocab = inputs / "vocab"
    assert run_in_process(capsys, "-q", "bpe", "vocab", "--lang", "en", "-o", vocab, texts["new"][0]).returncode == 0
    dictionary = synthetic.write_dictionary(inputs / "dict.txt")
    (root / "results").mkdir()

    def cka(v, output):
        return ["cka", "compare", "--model-a", tiny_run, "--lang-a", "en", "--text-a", texts[v][0], "--lang-b", "fr",
                "--text-b", texts[v][1], "--label", "en-fr", "--column", v, "-o", output]

    for v in texts if name == "cka table" else ():
        assert run_in_process(capsys, "-q", *cka(v, inputs / f"column.{v}")).returncode == 0
    columns = {"old": [inputs / "column.old.json"], "new": [inputs / "column.old.json", inputs / "column.new.json"]}
    return {
        "binarize": ("store.json", lambda v: ["binarize", "--vocab", vocab, "--lang", "en", texts[v][0],
                                              "-o", out / "store"]),
        "bpe vocab": ("vocab", lambda v: ["bpe", "vocab", "--lang", "en", "--lang", "fr", "-o", out / "vocab",
                                          *texts[v]]),
        "codeswitch": ("cs.txt", lambda v: ["codeswitch", "--dict", dictionary, "--seed", "1" if v == "old" else "2",
                                            texts[v][0], "-o", out / "cs.txt", "--report", out / "cs.json"]),
        "extract": ("reps.json", lambda v: ["extract", "--model", tiny_run, "--lang", "en", "--level", "token",
                                            texts[v][0], "-o", out / "reps"]),
        "cka compare": ("cka.json", lambda v: cka(v, out / "cka")),
        "cka table": ("fig7.json", lambda v: ["cka", "table", *columns[v], "-o", out / "fig7"]),
        "report table1": ("table1.md", lambda v: ["report", "table1", "--results-dir", root / "results",
                                                  "--langs", "fr" if v == "old" else "fr,ru", "-o", out]),
    }


@pytest.mark.parametrize("name", ["binarize", "bpe vocab", "codeswitch", "extract", "cka compare", "cka table",
                                  "report table1"])
def test_a_kill_at_any_rename_never_shows_a_complete_set_that_is_not(name, tmp_path, tiny_run, capsys, monkeypatch):
    done, command = commands(tmp_path, tiny_run, capsys, name)[name]
    out = tmp_path / "out"
    assert run_in_process(capsys, "-q", *command("old")).returncode == 0
    old = snapshot(out)
    n = renames_of(capsys, monkeypatch, command("new"))
    new = snapshot(out)
    assert n >= 2 and old[done] != new[done] and set(old) == set(new), (n, sorted(old), sorted(new))
    for at in range(1, n + 1):
        for after in (False, True):
            restore(out, old)
            run_killed(capsys, monkeypatch, command("new"), at, after)
            left = snapshot(out)
            where = f"killed {'after' if after else 'before'} rename {at} of {n}: {sorted(left)}"
            assert not [f for f in left if f.endswith(".tmp")], where
            if done in left:   # complete: the old set or the new one, whole
                assert left in (old, new), where
            assert all(left[f] in (old[f], new[f]) for f in left), where
    restore(out, old)
    assert run_in_process(capsys, "-q", *command("new")).returncode == 0 and snapshot(out) == new

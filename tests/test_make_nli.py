"""``XNLI_TRAIN=nli/mnli_snli.tsv``: every English NLI pair of the mirror, whole, as XNLI's training
file (make/table1.mk). The file is made for real from a tiny mirror; the cells are planned (``make -n``)."""

from __future__ import annotations

import subprocess

import pytest

from conftest import REPO
from test_makefile import dry_run, make_env, touch_in_order, xlt_commands

FILES = {"mnli/mnli_20k": 3, "snli/snli_train_sample_9999": 2, "snli/snli_dev": 1, "snli/snli_test": 2}


def tiny_mirror(root) -> list[str]:
    """Each file of the union with its own numbered pairs; the lines in the order they should come out."""
    expected = []
    for name, count in FILES.items():
        path = root / "nli" / f"{name}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"{name} premise {i}\t{name} hypothesis {i}\tneutral" for i in range(count)]
        path.write_text("".join(line + "\n" for line in lines))
        expected += lines
    return expected


def test_the_union_holds_every_pair_of_mnli_and_snli_in_order_with_no_stride(tmp_path):
    expected = tiny_mirror(tmp_path / "data")
    work = tmp_path / "w"
    target = work / "tasks" / "nli" / "mnli_snli.tsv"
    env = make_env()
    # the demo keeps every 2nd MNLI pair of its own file; the union is whole at every scale
    subprocess.run(["make", "-s", f"W={work}", f"XLT_DATA={tmp_path / 'data'}", "SCALE=demo", str(target)],
                   cwd=REPO, check=True, capture_output=True, timeout=120, env=env)
    assert target.read_text().splitlines() == expected
    assert not list(target.parent.glob("*.tmp"))


def test_every_xnli_cell_and_its_baselines_train_on_the_union_when_asked(tmp_path):
    work = tmp_path / "w"
    union = f"{work}/tasks/nli/mnli_snli.tsv"
    lines = dry_run(work, "SCALE=demo", "XNLI_TRAIN=nli/mnli_snli.tsv", f"{work}/table1/default/en-fr/xnli/results.json",
                    f"{work}/table1/control/en-fr/xnli/results.json", f"{work}/table1/baselines/en-fr/xnli.json")
    finetunes = xlt_commands(lines, "finetune xnli")
    assert len(finetunes) == 2 and all(f"--train en {union} " in line for line in finetunes)
    assert f"--train en {union} " in xlt_commands(lines, "-q baselines xnli")[0]
    assert any(line.startswith(f"mkdir -p {work}/tasks/nli && cat ") for line in lines)
    # and without it, MNLI's sample as before
    default = xlt_commands(dry_run(work, "SCALE=demo", f"{work}/table1/default/en-fr/xnli/results.json"), "finetune xnli")
    assert f"--train en {work}/tasks/nli/mnli/mnli_20k.tsv " in default[0]


XNLI_FILES = [f"tasks/xnli/{split}-{lang}.tsv" for split in ("dev", "test") for lang in ("en", "fr")]
# Every XNLI fine-tuning the Makefile plans: (its results, what else it reads, make's arguments)
XNLI_CELLS = {
    "table1": (["table1/default/en-fr/xnli/results.json", "table1/baselines/en-fr/xnli.json"],
               ["models/default/en-fr/finished"], []),
    "steps": (["steps/step-5000/en-fr/xnli/results.json"], ["steps/models/en-fr/checkpoints/step-5000.pt"],
              ["CURVE_LANG=fr", "CURVE_STEPS=5000"]),
    "liu-table4": (["liu/en-fr/xnli-mds/results.json"], ["models/default/en-fr/finished", "liu/en-fr/fr-en.shift.npz"],
                   []),
    "liu-figures": (["liu-fig/n4000/xnli/bert/results.json"], ["liu-fig/n4000/models/bert/finished"], []),
}


@pytest.mark.parametrize("kind", sorted(XNLI_CELLS))
def test_a_cell_trained_on_another_nli_file_is_made_again_and_only_then(tmp_path, kind):
    work = tmp_path / "w"
    names, reads, args = XNLI_CELLS[kind]
    cells = [work / name for name in names]
    inputs = [*reads, "tasks/nli/mnli/mnli_20k.tsv", "tasks/nli/mnli_snli.tsv", *XNLI_FILES]
    old = [flag for name in inputs for flag in ("-o", str(work / name))]   # there, and older than any cell

    def planned(*more: str) -> list[str]:
        # a recipe's lines continued with a backslash make one command
        text = "\n".join(dry_run(work, "SCALE=demo", *args, *more, *map(str, cells), *old)).replace("\\\n", " ")
        lines = text.splitlines()
        return xlt_commands(lines, "finetune xnli") + xlt_commands(lines, "-q baselines xnli")

    assert len(planned("XNLI_TRAIN=nli/mnli_snli.tsv")) == len(cells)   # records the settings the cells are made with
    touch_in_order([*(work / "settings").iterdir(), *cells], seconds_ago=500)   # as a finished run leaves them
    assert planned("XNLI_TRAIN=nli/mnli_snli.tsv") == []
    # back to MNLI's sample, a file older than every cell: they are made again, on it
    again = planned()
    assert len(again) == len(cells) and all(f"--train en {work}/tasks/nli/mnli/mnli_20k.tsv " in line for line in again)

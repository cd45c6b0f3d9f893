"""``XNLI_TRAIN=nli/mnli_snli.tsv``: every English NLI pair of the mirror, whole, as XNLI's training
file (make/table1.mk). The file is made for real from a tiny mirror; the cells are planned (``make -n``)."""

from __future__ import annotations

import subprocess

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


def test_a_cell_trained_on_another_nli_file_is_made_again_and_only_then(tmp_path):
    work = tmp_path / "w"
    cells = [work / "table1" / "default" / "en-fr" / "xnli" / "results.json", work / "table1" / "baselines" / "en-fr" / "xnli.json"]
    inputs = ["models/default/en-fr/finished", "tasks/nli/mnli/mnli_20k.tsv", "tasks/nli/mnli_snli.tsv",
              *(f"tasks/xnli/{split}-{lang}.tsv" for split in ("dev", "test") for lang in ("en", "fr"))]
    old = [flag for name in inputs for flag in ("-o", str(work / name))]   # there, and older than any cell

    def planned(*args: str) -> list[str]:
        lines = dry_run(work, "SCALE=demo", *args, *map(str, cells), *old)
        return xlt_commands(lines, "finetune xnli") + xlt_commands(lines, "-q baselines xnli")

    assert len(planned("XNLI_TRAIN=nli/mnli_snli.tsv")) == 2   # records the settings the cells are made with
    touch_in_order([*(work / "settings").iterdir(), *cells], seconds_ago=500)   # as a finished run leaves them
    assert planned("XNLI_TRAIN=nli/mnli_snli.tsv") == []
    # back to MNLI's sample, a file older than both cells: they are made again, on it
    again = planned()
    assert len(again) == 2 and all(f"--train en {work}/tasks/nli/mnli/mnli_20k.tsv " in line for line in again)

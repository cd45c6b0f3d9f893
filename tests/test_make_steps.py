"""``make reproduce-steps``: Table 1's Default pretrained again for longer with snapshots, every snapshot
fine-tuned as a Table 1 cell, one ``xlt report steps`` (read with ``make -n``); and a longer curve
made from a shorter one (make run for real, with a stand-in for xlt that writes only what the next
rule reads)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_make_dynamics import commands
from test_makefile import REPO, english_corpus, make_env, make_words, xlt_commands

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def arguments(line: str, *dropped: str) -> list[str]:
    """A pretraining command's words after its run directory, without each option in ``dropped`` and its value."""
    words = line.split("--run-dir ", 1)[1].split()[1:]
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in dropped:
            skip = True
        else:
            kept.append(word)
    return kept


def test_the_curve_is_table1s_default_pretrained_longer_with_every_snapshot_fine_tuned(tmp_path):
    work = tmp_path / "w"
    english = english_corpus(tmp_path / "english.txt.xz", 1_100_000)   # past the demo's fake slices
    lines = commands(work, f"CORPUS_en={english}", "CURVE_STEPS=20000", "CURVE_EVERY=10000", "reproduce-steps")
    runs = {re.search(r"--run-dir (\S+)", line).group(1): line for line in xlt_commands(lines, "pretrain")}
    # the curve's run, and Table 1's Default where it is not made yet: No pretraining reads its run directory
    assert set(runs) == {f"{work}/steps/models/en-fake", f"{work}/models/default/en-fake"}
    pretrain = runs[f"{work}/steps/models/en-fake"]
    assert re.search(r"--max-steps 20000 --snapshot-every 10000$", pretrain.strip())
    # everything else is Table 1's Default en-fake (its first 15,000 steps are that model)
    [table1] = [line for line in xlt_commands(commands(work, f"CORPUS_en={english}", "LANGS=fake", "pretrain-table1"),
                                              "pretrain") if "/models/default/en-fake " in line]
    assert re.findall(r"--max-steps (\d+)", table1) == ["15000"]
    assert arguments(pretrain, "--max-steps", "--snapshot-every") == arguments(table1, "--max-steps")

    finetune = [line for line in xlt_commands(lines, "finetune") if f"{work}/steps/" in line]
    cells = {(re.search(r"--checkpoint (\S+)", line).group(1), line.split()[2]): line for line in finetune}
    assert set(cells) == {(f"step-{n}", task) for n in (10000, 20000) for task in ("xnli", "ner", "parse")}
    for (snapshot, task), line in cells.items():
        assert f"--model {work}/steps/models/en-fake " in line
        assert f"-o {work}/steps/{snapshot}/en-fake/{task} " in line
        assert "--eval fake " in line and "--seeds 12 " in line   # one seed per snapshot
    # fine-tuned as Table 1's cells are: the same arguments but the model, checkpoint, output and seeds
    table1_cells = xlt_commands(commands(work, f"CORPUS_en={english}", "LANGS=fake", "reproduce-table1"), "finetune")
    [table1_parse] = [line for line in table1_cells if f"-o {work}/table1/default/en-fake/parse " in line]
    tail = re.compile(r".* --seeds \S+ ")
    assert tail.sub("", cells["step-10000", "parse"]) == tail.sub("", table1_parse)

    [report] = xlt_commands(lines, "report")
    assert f"report steps --results-dir {work}/steps --table1-dir {work}/table1 --lang fake -o {work}/report" in report
    # No pretraining and the baselines are Table 1's own cells, made where missing, before the report
    references = [line for line in xlt_commands(lines, "finetune") if f"-o {work}/table1/control/en-fake/" in line]
    references += xlt_commands(lines, "-q baselines")
    assert len(references) == 6
    assert lines.index(report) > max(lines.index(line) for line in finetune + references)


FAKE_XLT = '''#!/usr/bin/env python3
"""xlt as make calls it, logged, doing only what the next rule reads: snapshots and results files."""
import pathlib, sys
args = sys.argv[1:]
with open(sys.argv[0] + ".log", "a") as log:
    log.write(" ".join(args) + "\\n")
value = lambda option: args[args.index(option) + 1]
if args[0] == "pretrain":   # the snapshots a run of --max-steps has, the older ones left as they were
    checkpoints = pathlib.Path(value("--run-dir"), "checkpoints")
    checkpoints.mkdir(parents=True, exist_ok=True)
    every = int(value("--snapshot-every"))
    last = int([args[i + 1] for i, arg in enumerate(args) if arg == "--max-steps"][-1])   # the later wins
    for step in range(every, last + 1, every):
        if not (checkpoints / f"step-{step}.pt").exists():
            (checkpoints / f"step-{step}.pt").touch()
elif args[0] == "finetune":
    pathlib.Path(value("-o")).mkdir(parents=True, exist_ok=True)
    pathlib.Path(value("-o"), "results.json").touch()
elif args[0] == "report":
    pathlib.Path(value("-o")).mkdir(parents=True, exist_ok=True)
    pathlib.Path(value("-o"), "steps-" + value("--lang") + ".md").touch()
'''


def test_a_longer_curve_resumes_the_run_and_fine_tunes_only_the_new_snapshots(tmp_path):
    work, fake = tmp_path / "w", tmp_path / "xlt"
    fake.write_text(FAKE_XLT)
    fake.chmod(0o755)
    env = make_env()
    # What the curve reads besides its own run: made here, and never remade (-o: "treat as very old").
    inputs = make_words(work, "$(call row_data,default/en-fake)/stores.stamp "
                              "$(foreach t,xnli ner parse,$(call $(t)_files,fake)) $(CURVE_REFERENCES)")
    for path in map(Path, inputs):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def curve(steps: int) -> list[tuple[str, str]]:
        """What ``make`` ran for the curve's report at ``steps``: (subcommand, --max-steps or --checkpoint)."""
        log = fake.with_suffix(".log")
        log.unlink(missing_ok=True)
        subprocess.run(["make", f"W={work}", f"XLT={fake}", f"CURVE_STEPS={steps}", "CURVE_EVERY=10000",
                        *(f"-o{path}" for path in inputs), f"{work}/report/steps-fake.md"],
                       cwd=REPO, env=env, check=True, capture_output=True, timeout=120)
        ran = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
        # the later --max-steps wins, as in click
        return [(words[0], ([value for option, value in zip(words, words[1:])
                             if option in ("--max-steps", "--checkpoint")] or [""])[-1]) for words in ran]

    def in_order(ran: list[tuple[str, str]], steps: int, *snapshots: int) -> bool:
        """The run first, then each snapshot's three cells (xnli, ner, parse: in any order), the report last."""
        cells = sorted(("finetune", f"step-{n}") for n in snapshots for _ in range(3))
        return ran[:1] == [("pretrain", str(steps))] and sorted(ran[1:-1]) == cells and ran[-1:] == [("report", "")]

    assert in_order(curve(20000), 20000, 10000, 20000)
    # the run goes on to 30,000; its old snapshots, and their cells, stay; the report is made again
    assert in_order(curve(30000), 30000, 30000)
    assert curve(30000) == []

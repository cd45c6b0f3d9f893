"""``make reproduce-steps``: Table 1's Default pretrained again for longer with snapshots, every snapshot
fine-tuned as a Table 1 cell, one ``xlt report steps`` (read with ``make -n``); and a longer curve
made from a shorter one (make run for real, with a stand-in for xlt that writes only what the next
rule reads)."""

import re
import sys
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
    assert f"report steps --results-dir {work}/steps --table1-dir {work}/table1 --lang fake --row default -o {work}/report" in report
    # No pretraining and the baselines are Table 1's own cells, made where missing, before the report
    references = [line for line in xlt_commands(lines, "finetune") if f"-o {work}/table1/control/en-fake/" in line]
    references += xlt_commands(lines, "-q baselines")
    assert len(references) == 6
    assert lines.index(report) > max(lines.index(line) for line in finetune + references)


def test_another_rows_curve_is_that_rows_table1_model_pretrained_longer_in_folders_of_its_own(tmp_path):
    work = tmp_path / "w"
    english = english_corpus(tmp_path / "english.txt.xz", 1_100_000)
    lines = commands(work, f"CORPUS_en={english}", "CURVE_ROW=sep-l1-3", "CURVE_STEPS=20000", "CURVE_EVERY=10000",
                     "CURVE_AT=20000", "TASKS=ner", "reproduce-steps")
    runs = {re.search(r"--run-dir (\S+)", line).group(1): line for line in xlt_commands(lines, "pretrain")}
    pretrain = runs[f"{work}/steps-sep-l1-3/models/en-fake"]
    [table1] = [line for line in xlt_commands(commands(work, f"CORPUS_en={english}", "LANGS=fake", "pretrain-table1"),
                                              "pretrain") if "/models/sep-l1-3/en-fake " in line]
    assert "--sharing sep-l1-3 " in pretrain and f"--vocab {work}/data/union/en-fake/vocab " in pretrain
    assert arguments(pretrain, "--max-steps", "--snapshot-every") == arguments(table1, "--max-steps")
    # CURVE_AT picks the snapshots fine-tuned (here the one a run resumed from Table 1's model has)
    [cell] = [line for line in xlt_commands(lines, "finetune") if f"{work}/steps-sep-l1-3/" in line]
    assert f"--checkpoint step-20000 -o {work}/steps-sep-l1-3/step-20000/en-fake/ner " in cell
    [report] = xlt_commands(lines, "report")
    assert f"report steps --results-dir {work}/steps-sep-l1-3 --table1-dir {work}/table1 --lang fake --row sep-l1-3 " in report
    # a row that is not Table 1's, or cannot exist for the pair, stops make before anything runs
    for row, message in (("sep-l1-4", "CURVE_ROW=sep-l1-4: not a Table 1 row"),
                         ("wiki-cc", "CURVE_ROW=wiki-cc on en-fake: not applicable to Fake-English")):
        proc = subprocess.run(["make", "-n", f"W={work}", f"CURVE_ROW={row}", "reproduce-steps"], cwd=REPO,
                              env=make_env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and message in proc.stderr and proc.stdout == ""


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

    def curve(steps: int, *more: str) -> list[tuple[str, str]]:
        """What ``make`` ran for the curve's report at ``steps``: (subcommand, --max-steps or --checkpoint)."""
        log = fake.with_suffix(".log")
        log.unlink(missing_ok=True)
        subprocess.run(["make", f"W={work}", f"XLT={fake}", f"CURVE_STEPS={steps}", "CURVE_EVERY=10000", *more,
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
    # a second pretraining seed: its run and its snapshots' cells (NER only at the demo scale, as Table
    # 1's later seeds), then the report again; the first seed's are left as they are
    ran = curve(30000, "CURVE_PRETRAIN_SEEDS=0 1")
    assert ran[:1] == [("pretrain", "30000")] and ran[-1:] == [("report", "")]
    assert sorted(ran[1:-1]) == [("finetune", f"step-{n}") for n in (10000, 20000, 30000)]
    assert (work / "steps" / "step-30000" / "en-fake-seed1" / "ner" / "results.json").exists()
    assert not (work / "steps" / "step-30000" / "en-fake-seed1" / "parse").exists()


def test_table1_at_a_snapshot_reads_each_curved_rows_seeds_beside_table1s_references(tmp_path):
    """make reproduce-table1-at-steps for real: Table 1's layout linked from the curves' folders, and
    `xlt report table1` deciding on them (NER only; Sep L1-3's two models above Sep L1-6's)."""
    from report_files import one_point, write_baselines, write_results
    work = tmp_path / "w"
    cells = {"steps/step-30000/en-fake": 40.0, "steps-sep-l1-3/step-30000/en-fake": 20.0,
             "steps-sep-l1-3/step-30000/en-fake-seed1": 22.0, "steps-sep-l1-6/step-30000/en-fake": 3.0,
             "steps-sep-l1-6/step-30000/en-fake-seed1": 4.0, "table1/control/en-fake": 5.0,
             "steps-sep-l1-6/step-25000/en-fake": 30.0, "table1/sep-l1-6/en-fake": 30.0}   # not read: another step, Table 1's
    for folder, zero_shot in cells.items():
        english = 30.0 if folder.startswith("table1/control") else 50.0
        write_results(work / folder / "ner" / "results.json", "ner", "fake",
                      one_point("ner", "fake", zero_shot, en=english, spread=1.0))
    write_baselines(work / "table1/baselines/en-fake/ner.json", "ner",
                    {"en": ("all O", 0.0), "fake": ("training entities", 0.0)})
    references = make_words(work, "$(CURVE_REFERENCES)", "TASKS=ner")
    run = [f"W={work}", f"XLT={sys.executable} -m xlt", "TASKS=ner", *(f"-o{path}" for path in references)]
    proc = subprocess.run(["make", *run, "reproduce-table1-at-steps"], cwd=REPO, env=make_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    at = work / "steps-table1" / "step-30000"
    assert sorted(p.name for p in (at / "sep-l1-3").iterdir()) == ["en-fake", "en-fake-seed1"]
    assert (at / "sep-l1-6" / "en-fake").resolve() == (work / "steps-sep-l1-6/step-30000/en-fake").resolve()
    assert (at / "wiki-cc" / "en-fake" / "missing.json").exists()   # not applicable, as in Table 1
    report = (work / "report" / "steps-table1-30000" / "table1.md").read_text()
    # the snapshot's cells (over both pretraining seeds), not Table 1's nor another step's
    assert "| Sep L1-6 | — [1] | — [1] | — [1] | 3.5 ± 0.7 (2 models, n=6)" in report
    assert ("**HOLDS**: Fake-English: More separation hurts more" in report
            and "sep-l1-3 21.0 > sep-l1-6 3.5 (sep-l1-3 - sep-l1-6: +17.5" in report)
    # a row without a curve at that step stops it, naming the folder and the command
    proc = subprocess.run(["make", *run, "STEPS_ROWS=default sep-emb", "reproduce-table1-at-steps"], cwd=REPO,
                          env=make_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert f"{work}/steps-sep-emb/step-30000: no cells of sep-emb at this step" in proc.stderr
    # a run that went on past the snapshot: its learned-English check would read another step
    (work / "steps-sep-l1-6" / "models" / "en-fake").mkdir(parents=True)
    (work / "steps-sep-l1-6" / "models" / "en-fake" / "finished-30000").touch()
    assert subprocess.run(["make", *run, "reproduce-table1-at-steps"], cwd=REPO, env=make_env(),
                          capture_output=True, timeout=300).returncode == 0
    (work / "steps-sep-l1-6" / "models" / "en-fake" / "finished-40000").touch()
    proc = subprocess.run(["make", *run, "reproduce-table1-at-steps"], cwd=REPO, env=make_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0
    assert f"{work}/steps-sep-l1-6/models/en-fake/finished-40000: that run went on past STEPS_AT=30000" in proc.stderr

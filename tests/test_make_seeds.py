"""Table 1's fine-tuning seeds per task, read from ``make -n`` (nothing is run): the demo and gpu scales
give their cheap tasks (NER, parsing) three seeds, so each cell the report decides from has a spread,
and XNLI one."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from test_makefile import touch_in_order, any_xlt_command, dry_run, make_words, xlt_commands

THREE = "12,156,78"


def joined(lines: list[str]) -> list[str]:
    """A recipe's continued lines joined: each command is one line."""
    return "\n".join(lines).replace("\\\n", " ").splitlines()


def seeds_by_task(lines: list[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in xlt_commands(lines, "finetune"):
        task = re.search(r"\bxlt finetune (\w+)", line).group(1)
        out.setdefault(task, set()).add(re.search(r"--seeds (\S+)", line).group(1))
    return out


def test_the_demo_fine_tunes_ner_and_parsing_with_three_seeds_and_xnli_with_one(tmp_path):
    lines = joined(dry_run(tmp_path / "w", "SCALE=demo", "reproduce-table1"))
    finetunes = xlt_commands(lines, "finetune")
    assert len(finetunes) == 10 * 3 + 3      # every row's cells and the control's, each with its task's seeds
    assert seeds_by_task(lines) == {"xnli": {"12"}, "ner": {THREE}, "parse": {THREE}}
    control = [line for line in finetunes if "--checkpoint untrained" in line]
    assert seeds_by_task(control) == {"xnli": {"12"}, "ner": {THREE}, "parse": {THREE}}


def test_every_other_scale_keeps_ft_seeds_for_every_task_unless_told(tmp_path):
    expected = {"smoke": "12", "cpu": THREE, "paper": "12,156,78,37,8"}
    for scale, seeds in expected.items():
        lines = joined(dry_run(tmp_path / scale, f"SCALE={scale}", "LANGS=fr", "reproduce-table1"))
        assert seeds_by_task(lines) == {"xnli": {seeds}, "ner": {seeds}, "parse": {seeds}}, scale
    # the gpu scale, as the demo: fine-tuning on a GPU made NER and parsing cheap enough for three seeds
    lines = joined(dry_run(tmp_path / "gpu", "SCALE=gpu", "LANGS=fr", "reproduce-table1"))
    assert seeds_by_task(lines) == {"xnli": {"12"}, "ner": {THREE}, "parse": {THREE}}
    lines = joined(dry_run(tmp_path / "o", "SCALE=demo", "XNLI_SEEDS=1,2", "PARSE_SEEDS=5", "reproduce-table1"))
    assert seeds_by_task(lines) == {"xnli": {"1,2"}, "ner": {THREE}, "parse": {"5"}}


def test_seeds_added_to_a_finished_run_re_run_that_task_only(tmp_path):
    work = tmp_path / "w"
    lines = dry_run(work, "SCALE=demo", "reproduce-table1")   # records each task's seeds under settings/
    assert (work / "settings" / "seeds-ner").read_text().strip() == THREE
    # a finished run: every input, then the settings, then the results and the table, in that order
    cells = [work / "table1" / row / "en-fr" / task / "results.json"
             for row in ("default", "control") for task in ("xnli", "ner", "parse")]
    inputs = [work / "models" / "default" / "en-fr" / "finished"]
    inputs += [work / "tasks" / line.split(" > ")[-1].split(".tmp")[0].split("/tasks/")[1]
               for line in lines if "/tasks/" in line and " > " in line and "awk" in line]
    settings = sorted((work / "settings").iterdir())
    touch_in_order([*inputs, *settings, *cells], seconds_ago=1000)
    default_only = ["TABLE1_ROWS=default", f"{work}/table1/default/en-fr/ner/results.json",
                    f"{work}/table1/default/en-fr/xnli/results.json", f"{work}/table1/control/en-fr/ner/results.json"]
    assert xlt_commands(dry_run(work, "SCALE=demo", *default_only), "finetune") == []
    time.sleep(0.01)
    again = joined(dry_run(work, "SCALE=demo", "NER_SEEDS=12,156,78,37", *default_only))
    rerun = xlt_commands(again, "finetune")
    assert len(rerun) == 2 and all(" ner " in line and "--seeds 12,156,78,37 " in line for line in rerun)
    assert os.path.getmtime(work / "settings" / "seeds-xnli") < os.path.getmtime(work / "settings" / "seeds-ner")


def test_a_pretraining_seed_added_to_a_finished_table_is_pretrained_and_fine_tuned(tmp_path):
    work = tmp_path / "w"
    dry_run(work, "SCALE=demo", "reproduce-table1")   # records the settings, as the finished run did
    results = make_words(work, "$(TABLE1_RESULTS)", "SCALE=demo")
    touch_in_order([*sorted((work / "settings").iterdir()), *map(Path, results), work / "report" / "table1.md"],
                    seconds_ago=1000)
    assert any_xlt_command(dry_run(work, "SCALE=demo", "reproduce-table1")) == []

    # with `.SECONDARY:` the new seed's models and cells would stay unbuilt behind the finished report
    lines = joined(dry_run(work, "SCALE=demo", "PRETRAIN_SEEDS_fr=0 1", "PRETRAIN_SEED_TASKS=ner", "reproduce-table1"))
    pretrained = [re.search(r"--run-dir \S+/models/(\S+) ", line).group(1) for line in xlt_commands(lines, "pretrain")]
    assert pretrained and all(model.endswith("/en-fr-seed1") for model in pretrained)
    tuned = [re.search(r"-o \S+/table1/(\S+)", line).group(1) for line in xlt_commands(lines, "finetune")]
    assert sorted(tuned) == sorted(model.replace("en-fr-seed1", "en-fr-seed1/ner") for model in pretrained)
    assert len(xlt_commands(lines, "report table1")) == 1

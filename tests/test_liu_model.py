"""Liu et al.'s Tables 2 and 4 of a given model (``make reproduce-liu-table2/4 MODEL=...``, docs/hf.md):
the make plan (``make -n``: nothing is run, no network), the reports' naming of the model they are about, the
one-model layout of Table 4, and the depth the layers are placed with.

A real run of both targets on a tiny random BERT with a WordPiece vocabulary learned on the mirror's text
(SCALE=smoke LANGS=fr) took 1 min 33 s on 2 busy cores; it is described in docs/reproduce.md, not repeated
here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, run_xlt
from report_files import run_record, write_translation
from xlt.finetune.selection import summarize
from xlt.model.spec import model_depth
from xlt.report import liu
from xlt.report.render import markdown
from xlt.utils.errors import XltError

MBERT = "hf:bert-base-multilingual-cased"
LEAKING = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "SCALE", "W", "LANGS", "XLT_DATA", "MODEL", "MODEL_TAG",
           "LIU_DEPTH", "TOKEN_SET_BYTES", "MODEL_XNLI_ARGS"}
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def plan(work: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in LEAKING}
    return subprocess.run(["make", "-n", f"W={work}", "SCALE=smoke", "LANGS=fr ru zh", *args,
                           "reproduce-liu-table2", "reproduce-liu-table4"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**clean, "HF_HUB_OFFLINE": "1", **(env or {})})


def commands(proc: subprocess.CompletedProcess, sub: str) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    joined = proc.stdout.replace("\\\n", " ")   # a recipe's continued lines as one command
    return [re.sub(r"\s+", " ", line) for line in joined.splitlines() if re.search(rf"\bxlt {sub}\b", line)]


# ---- the make plan -------------------------------------------------------------------------------------
@needs_make
def test_model_plans_both_tables_on_that_model_alone(tmp_path):
    proc = plan(tmp_path, f"MODEL={MBERT}", "LIU_DEPTH=12")
    out = f"{tmp_path}/model/hf-bert-base-multilingual-cased"
    assert not commands(proc, "pretrain") and not commands(proc, "bpe")   # nothing is pretrained
    means = commands(proc, "shift-decode means")
    assert len(means) == 4 and all(f"--model {MBERT} " in c for c in means)   # en once, then fr ru zh
    assert sorted(c.split("--lang ")[1].split()[0] for c in means) == ["en", "fr", "ru", "zh"]
    translate = commands(proc, "shift-decode translate")
    assert len(translate) == 6 and all(f"--model {MBERT} " in c and f"-o {out}/liu/en-" in c for c in translate)
    # the model records no vocabulary per language: its token sets come from text of each language
    assert all(f"--token-set en {tmp_path}/token-sets/en.txt" in c for c in translate)
    assert all(re.search(r"xlt shift-decode (shift|table)", c) is None or out in c
               for c in commands(proc, "shift-decode"))
    table = commands(proc, "shift-decode table")[0]
    assert "--layer 11 --alpha 3 --cr-layer 10" in table           # Liu et al.'s own layers of 12
    finetunes = commands(proc, "finetune")
    assert len(finetunes) == 2 and all(f"--model {MBERT} " in c for c in finetunes)
    assert all(c.count("--eval ") == 3 for c in finetunes)         # one fine-tuning with every target
    every, mds = sorted(finetunes, key=lambda c: "--shift " in c)
    assert f"-o {out}/liu/xnli-all " in every and "--freeze-bottom" not in every
    assert f"-o {out}/liu/xnli-mds " in mds and "--freeze-bottom 6 " in mds and "--shift-layer 6 " in mds
    assert mds.count("--shift ") == 3 and f"--shift {out}/liu/en-zh/zh-en.shift.npz" in mds
    reports = commands(proc, "report")
    assert [r.split("report ")[1].split()[0] for r in reports] == ["liu-table2", "liu-table4"]
    assert all(f"--results-dir {out}/liu " in r and f"-o {out}/report" in r for r in reports)
    assert "--table1-dir" not in reports[1]
    # a second model goes to its own directory; the pipeline's own outputs stay where they were
    other = commands(plan(tmp_path, "MODEL=hf:FacebookAI/xlm-roberta-base", "LIU_DEPTH=12"), "report")
    assert all(f"{tmp_path}/model/hf-FacebookAI_xlm-roberta-base/liu " in r for r in other)
    plain = commands(plan(tmp_path, env={"MODEL": MBERT}), "finetune")   # MODEL is make's argument, not the shell's
    assert all("/models/default/en-" in c and "/model/" not in c for c in plain)
    assert any("--freeze-bottom 4 " in c for c in plain)


@needs_make
def test_a_directory_model_gets_its_depth_from_its_config(tmp_path):
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "bert", "num_hidden_layers": 4}))
    proc = plan(tmp_path / "w", f"MODEL={bert}")
    out = f"{tmp_path}/w/model/dir{str(bert).replace('/', '_')}"
    assert "--layer 3 --alpha 3 --cr-layer 2" in commands(proc, "shift-decode table")[0]
    assert all("--freeze-bottom 2 " in c for c in commands(proc, "finetune") if "--shift " in c)
    assert all(f"{out}/liu" in c for c in commands(proc, "report"))
    # an xlt run as MODEL: its vocabulary knows each language's tokens (no --token-set)
    run = tmp_path / "run"
    run.mkdir()
    for name in ("text.json", "vocab"):
        (run / name).write_text("{}")
    (run / "config.json").write_text(json.dumps({"config": {"model": {"n_layers": 6}}}))
    proc = plan(tmp_path / "w", f"MODEL={run}")
    translate = commands(proc, "shift-decode translate")
    assert translate and not any("--token-set" in c for c in translate)
    assert "--layer 5 --alpha 3 --cr-layer 4" in commands(proc, "shift-decode table")[0]


@needs_make
def test_a_depth_make_cannot_read_stops_it_naming_liu_depth(tmp_path):
    proc = plan(tmp_path, "MODEL=hf:no-such-org/no-such-model")
    assert proc.returncode != 0
    assert "cannot read its number of layers" in proc.stderr and "set LIU_DEPTH=N" in proc.stderr


def test_model_depth_reads_the_config_alone(tmp_path):
    (tmp_path / "xlm").mkdir()
    (tmp_path / "xlm" / "config.json").write_text(json.dumps({"model_type": "xlm", "n_layers": 5}))
    assert model_depth(str(tmp_path / "xlm")) == 5           # XLM's n_layers is num_hidden_layers
    (tmp_path / "run").mkdir()
    for name in ("text.json", "vocab"):
        (tmp_path / "run" / name).write_text("{}")
    (tmp_path / "run" / "config.json").write_text(json.dumps({"config": {"model": {"n_layers": 8}}}))
    assert model_depth(str(tmp_path / "run")) == 8
    (tmp_path / "run" / "config.json").write_text("{}")
    with pytest.raises(XltError, match="no layer count"):
        model_depth(str(tmp_path / "run"))


# ---- the reports name their model --------------------------------------------------------------------
def _translation(path: Path, src: str, tgt: str, run: str) -> None:
    write_translation(path, src, tgt, {1.0: 0.2, 2.0: 0.5, 3.0: 0.9})
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "run": run}))


def test_table2_title_names_the_model_of_its_translations(tmp_path):
    for src, tgt in (("en", "fr"), ("fr", "en")):
        _translation(tmp_path / "one" / "en-fr" / f"{src}-{tgt}.translate.json", src, tgt, MBERT)
    text = markdown(liu.build_table2(str(tmp_path / "one"), languages=["fr"]))
    assert text.splitlines()[0] == f"# Liu et al. (2020) Table 2: unsupervised token translation by MDS (model: {MBERT})"
    for lang in ("fr", "ru"):   # the pipeline's own: one bilingual run per pair
        _translation(tmp_path / "two" / f"en-{lang}" / f"en-{lang}.translate.json", "en", lang, f"/w/models/en-{lang}")
    table = liu.build_table2(str(tmp_path / "two"), languages=["fr", "ru"])
    assert table.title.endswith("(2 models, listed below)")
    assert table.remarks[0] == "Models: /w/models/en-fr; /w/models/en-ru."


def _one_model_results(path: Path, model: str, targets: list[str], shift: bool) -> None:
    m, point = "accuracy", {"batch_size": 32, "encoder_lr": 2e-5, "head_lr": 1e-4}
    scores = {"en": {"dev": {m: 80.0}, "test": {m: 81.0}}}
    scores.update({lang: {"dev": {m: 70.0 + i}, "test": {m: 71.0 + i}} for i, lang in enumerate(targets)})
    run = run_record(point, 12, 80.0, scores, shift={lang: 0.5 for lang in targets} if shift else None)
    if shift:
        run["results"]["shift"] = {lang: {"dev": {m: 75.0}, "test": {m: 76.0 + i}} for i, lang in enumerate(targets)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "format": "xlt-finetune-results/1", "task": "xnli", "model": model, "source": "en", "targets": targets,
        "complete": True, "counts": {"done": 1, "busy": 0, "failed": 0},
        "config": {"freeze_bottom": 6, "shift_layer": 6} if shift else {},
        "summary": summarize([run], m, "en", targets), "runs": [run]}))


def test_table4_of_one_model_reads_its_two_runs_and_names_it(tmp_path):
    _one_model_results(tmp_path / "liu" / "xnli-mds" / "results.json", MBERT, ["fr", "ru"], shift=True)
    _one_model_results(tmp_path / "liu" / "xnli-all" / "results.json", MBERT, ["fr", "ru"], shift=False)
    res = run_xlt("report", "liu-table4", "--results-dir", tmp_path / "liu", "--langs", "fr,ru", "-o", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == f"# Liu et al. (2020) Table 4: XNLI with the mean difference shift (model: {MBERT})"
    rows = {line.split(" | ")[0].strip("| "): line for line in res.stdout.splitlines() if line.startswith("| ")}
    assert "| 81.0 (80.9) | 71.0 (70.4) | 72.0 (" in rows["fine-tune all layers"]   # English: no per-pair mean note
    assert "| — [2] | 76.0 (72.4) | 77.0 (" in rows["fine-tune above layer 6 (bottom frozen) + MDS after layer 6"]
    assert "here one model too" in res.stdout
    report = json.loads((tmp_path / "out" / "liu-table4.json").read_text())
    assert report["title"].endswith(f"(model: {MBERT})")


def test_table4_per_pair_without_table1_dir_shows_why_a_row_is_empty(tmp_path):
    _one_model_results(tmp_path / "en-fr" / "xnli-mds" / "results.json", "/w/models/en-fr", ["fr"], shift=True)
    table = liu.build_table4(str(tmp_path), None, ["fr"])
    every = dict(table.rows)["fine-tune all layers"]
    assert every[1].gap == liu.NO_TABLE1 and every[0].gap == "no English score yet"
    assert dict(table.rows)["fine-tune above layer 6 (bottom frozen)"][1].value == 71.0
    assert table.title.endswith("(model: /w/models/en-fr)")

"""``make reproduce-kept-alignment`` and ``xlt report kept-alignment``: sentence retrieval across a joint
model's languages before and after each task's fine-tuning (make/analysis.mk, xlt/report/kept_alignment.py)."""

from __future__ import annotations

import json

from conftest import run_in_process
from test_makefile import dry_run, xlt_commands


def align_result(p_at_1: list[float], map_kind: str = "none", test: str = "test-fake.tsv") -> dict:
    """What ``xlt align sentence`` writes, as much of it as the report reads."""
    return {"command": "align sentence", "map": map_kind, "layers": list(range(len(p_at_1))), "p_at_1": p_at_1,
            "source": {"run": "models/default/en-fake"}, "test": {"source": "test-en.tsv", "target": test},
            "test_columns": [2]}


def write(path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_the_report_lays_out_each_stage_per_layer_with_the_mean_above_the_embeddings(tmp_path, capsys):
    pair = tmp_path / "results" / "default" / "en-fake"
    write(pair / "pretrained.json", align_result([0.25, 0.30, 0.20]))
    write(pair / "xnli.json", align_result([0.20, 0.02, 0.01]))
    write(pair / "ner.json", align_result([0.22, 0.10, 0.05], map_kind="procrustes"))
    (pair / "parse.json").write_text("{not json")
    # another row, measured on other sentences after parsing (a stale file): shown only when asked for
    other = tmp_path / "results" / "sep-l1-3" / "en-fake"
    write(other / "pretrained.json", align_result([0.01, 0.02, 0.01]))
    write(other / "parse.json", align_result([0.01, 0.02, 0.01], test="dev-fake.tsv"))
    res = run_in_process(capsys, "report", "kept-alignment", "--results-dir", tmp_path / "results", "--langs", "fake",
                         "--rows", "default", "-o", tmp_path / "report")
    assert res.returncode == 0, res.stderr
    table = json.loads((tmp_path / "report" / "kept-alignment.json").read_text())
    values = {row["label"]: [cell.get("value") for cell in row["cells"]] for row in table["rows"]}
    # columns: pretrained, after XNLI, after NER, after parsing
    assert values["L1"][:2] == [30.0, 2.0] and values["L0"][:2] == [25.0, 20.0]
    assert values["mean 1-L"][:2] == [25.0, 1.5]
    assert values["L1"][2:] == [None, None]  # a mapped result and a broken file are gaps, with reasons
    gaps = " ".join(str(cell.get("gap")) for row in table["rows"] for cell in row["cells"])
    assert "--map none" in gaps and "unreadable" in gaps
    assert (tmp_path / "report" / "kept-alignment.png").stat().st_size > 0
    assert "| L1 |" in res.stdout and "sep-l1-3" not in res.stdout
    res = run_in_process(capsys, "report", "kept-alignment", "--results-dir", tmp_path / "results", "--langs", "fake",
                         "-o", tmp_path / "all")
    table = json.loads((tmp_path / "all" / "kept-alignment.json").read_text())
    cells = {(cell["group"], cell["column"]): cell for cell in table["rows"][1]["cells"]}   # layer 1
    assert cells["sep-l1-3 en-fake", "pretrained"]["value"] == 2.0
    assert "other test sentences" in cells["sep-l1-3 en-fake", "after parsing"]["gap"]


def test_a_missing_results_dir_is_one_error_line(tmp_path, capsys):
    res = run_in_process(capsys, "report", "kept-alignment", "--results-dir", tmp_path / "nowhere", "-o",
                         tmp_path / "report")
    assert res.returncode == 2 and "nowhere" in res.stderr and "Traceback" not in res.stderr
    assert len([line for line in res.stderr.splitlines() if line.strip()]) == 1


def test_make_measures_the_pretrained_model_and_each_cells_first_run(tmp_path):
    work = tmp_path / "w"
    lines = dry_run(work, "SCALE=demo", "LANGS=fake", "KEPT_TASKS=xnli ner", "reproduce-kept-alignment")
    aligns = xlt_commands(lines, "-q align sentence")
    assert len(aligns) == 3
    for line in aligns:
        assert f"--model {work}/models/default/en-fake " in line and "--map none --test-columns 2" in line
        assert f"--test {work}/tasks/xnli/test-en.tsv {work}/tasks/xnli/test-fake.tsv" in line
    outputs = {line.split(" -o ")[-1].strip(): line for line in aligns}
    assert "--finetuned" not in outputs[f"{work}/kept-alignment/default/en-fake/pretrained.json"]
    for task in ("xnli", "ner"):
        line = outputs[f"{work}/kept-alignment/default/en-fake/{task}.json"]
        assert f"--finetuned {work}/table1/default/en-fake/{task} " in line
    # the cells are made first, the report last
    assert xlt_commands(lines, "finetune xnli") and xlt_commands(lines, "finetune ner")
    report = " ".join(lines[-3:])
    assert "report kept-alignment" in report and "--langs fake" in report and "--rows default" in report


def test_the_control_row_is_refused_with_what_to_run_instead(tmp_path):
    import subprocess

    from conftest import REPO
    from test_makefile import make_env

    proc = subprocess.run(["make", "-n", f"W={tmp_path}", "LANGS=fake", "KEPT_ROWS=default control",
                           "reproduce-kept-alignment"], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=make_env())
    assert proc.returncode != 0 and "KEPT_ROWS: the control has no pretrained model" in proc.stderr
    assert "--finetuned" in proc.stderr

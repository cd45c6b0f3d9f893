"""bench/timed_shell.sh as make's SHELL logs every recipe line, and bench/stage_times.py adds the log
up by stage and row."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_stage_times():
    spec = importlib.util.spec_from_file_location("stage_times", BENCH / "stage_times.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


stage_times = load_stage_times()


@pytest.mark.parametrize("command, stage", [
    (".venv/bin/xlt finetune ner --model work/demo/models/default/en-fr -o x", "finetune ner"),
    ("mkdir -p work/x && .venv/bin/xlt -q bpe apply --codes c a -o b", "bpe apply"),
    ("OMP_NUM_THREADS=1 .venv/bin/xlt pretrain --run-dir work/demo/models/sep-emb/en-fr", "pretrain"),
    ("xz -dc a.xz | LC_ALL=C awk '{print}' > b", "xz"),
    ("mkdir -p work/demo/tasks && awk -v k=2 '(NR - 1) % k == 0' a > b", "mkdir"),
    ("xlt report table1 --results-dir w/table1 -o w/report > /dev/null", "report table1"),
])
def test_a_command_line_is_put_in_its_stage(command, stage):
    assert stage_times.stage(command) == stage


def test_a_line_names_its_row_by_its_paths():
    assert stage_times.row("xlt finetune ner --model work/demo/models/sep-l1-3/en-fr -o y") == "sep-l1-3"
    assert stage_times.row("xlt tokenize --lang en a -o b") is None


def test_make_with_the_timed_shell_logs_every_line_and_its_status(tmp_path):
    (tmp_path / "Makefile").write_text(
        "SHELL := /bin/bash\n"
        "all: a b\n"
        "a:\n\tpython3 -c 'sum(range(3_000_000))' && touch a\n"
        "b:\n\techo 'one\ttab' > b\n"
        "bad:\n\tfalse\n")
    log = tmp_path / "timed.log"
    run = lambda goal: subprocess.run(["make", "-s", "-C", str(tmp_path), goal, f"SHELL={BENCH / 'timed_shell.sh'}",
                                       f"TIMED_LOG={log}"], capture_output=True, text=True)
    assert run("all").returncode == 0
    assert run("bad").returncode != 0
    lines = stage_times.read_log(log.read_text().splitlines())
    by_stage = {stage_times.stage(line.command): line for line in lines}
    assert set(by_stage) == {"python3", "echo", "false"}
    assert (tmp_path / "a").exists() and (tmp_path / "b").read_text() == "one\ttab\n"
    assert by_stage["python3"].status == 0 and by_stage["false"].status == 1
    assert by_stage["python3"].cpu > 0 and by_stage["python3"].max_rss_kb > 0
    assert "\t" not in by_stage["echo"].command    # the tab folded, so the log keeps one per line
    sums = stage_times.totals(lines, lambda line: stage_times.stage(line.command))
    assert list(sums)[0] == "python3"              # most CPU first
    assert sums["echo"][0] == 1

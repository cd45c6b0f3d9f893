"""``make reproduce-dynamics`` read with ``make -n`` (nothing runs): two snapshotted en-fr runs, one
``xlt track`` over both, one ``xlt report dynamics`` over its records."""

import re
import shutil

import pytest
from test_makefile import dry_run, xlt_commands

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def commands(work, *args: str) -> list[str]:
    """The plan with each recipe's continued lines joined: one command per line."""
    return "\n".join(dry_run(work, *args)).replace("\\\n", " ").splitlines()


def test_dynamics_pretrains_two_rows_with_snapshots_tracks_and_reports_them(tmp_path):
    work = tmp_path / "w"
    lines = commands(work, "reproduce-dynamics")
    pretrain = xlt_commands(lines, "pretrain")
    assert len(pretrain) == 2
    runs = {re.search(r"--run-dir (\S+)", line).group(1): line for line in pretrain}
    default, separated = f"{work}/dynamics/models/default/en-fr", f"{work}/dynamics/models/sep-l1-6/en-fr"
    assert set(runs) == {default, separated}
    assert "--sharing default " in runs[default] and "--sharing sep-l1-6 " in runs[separated]
    assert "/data/joint/en-fr/vocab" in runs[default] and "/data/union/en-fr/vocab" in runs[separated]
    assert all(re.search(r"--snapshot-every 500\b", line) for line in pretrain)
    assert all("--preset mini " in line and "--max-steps 7500 " in line for line in pretrain)  # the demo recipe

    [track] = xlt_commands(lines, "track")
    assert f'--run {default} --label "Default"' in track
    assert f'--run {separated} --label "Sep L1-6"' in track
    assert f"-o {work}/dynamics/track" in track
    for option in ("--parallel", "--dictionary", "--tatoeba", "--ner-data-dir"):
        assert option in track
    assert re.search(rf"--word-corpus {work}/raw/en.train {work}/raw/fr.train +--word-sentences 2000\b", track)
    assert "xnli-dev.en.txt" in track and "en-fr.5000-6500.txt" in track and "tatoeba.fra-eng" in track
    [report] = xlt_commands(lines, "report")
    assert f"report dynamics --records {work}/dynamics/track/records.jsonl -o {work}/dynamics/report" in report
    # the order: both pretrainings, then tracking, then the report
    assert lines.index(report) > lines.index(track) > max(lines.index(line) for line in pretrain)


def test_snapshot_spacing_per_scale_and_from_the_command_line(tmp_path):
    smoke = xlt_commands(commands(tmp_path / "s", "SCALE=smoke", "reproduce-dynamics"), "pretrain")
    assert len(smoke) == 2 and all(re.search(r"--snapshot-every 100\b", line) for line in smoke)
    mine = xlt_commands(commands(tmp_path / "m", "SNAPSHOT_EVERY=250", "reproduce-dynamics"), "pretrain")
    assert all(re.search(r"--snapshot-every 250\b", line) for line in mine)


def test_finished_runs_are_not_pretrained_again(tmp_path):
    work = tmp_path / "w"
    for row in ("default", "sep-l1-6"):
        (work / "dynamics" / "models" / row / "en-fr").mkdir(parents=True)
        (work / "dynamics" / "models" / row / "en-fr" / "finished").write_text("")
    lines = commands(work, "reproduce-dynamics")
    assert xlt_commands(lines, "pretrain") == []  # finished runs are not pretrained again


def test_a_row_added_later_is_pretrained_and_tracked(tmp_path):
    # every file of a finished two-row run, each newer than what it was made from
    work = tmp_path / "w"
    for row in ("default", "sep-l1-6"):
        (work / "dynamics" / "models" / row / "en-fr").mkdir(parents=True)
        (work / "dynamics" / "models" / row / "en-fr" / "finished").write_text("")
    commands(work, "reproduce-dynamics")   # records the rows, as the finished run did
    for path in ("track/tracked.stamp", "report/dynamics.md"):
        (work / "dynamics" / path).parent.mkdir(parents=True, exist_ok=True)
        (work / "dynamics" / path).write_text("")
    assert [line for line in commands(work, "reproduce-dynamics") if "xlt " in line] == []

    # with `.SECONDARY:` the missing run would stay unbuilt behind the up-to-date stamp
    lines = commands(work, "DYNAMICS_ROWS=default sep-l1-6 sep-l1-3", "reproduce-dynamics")
    [pretrain] = xlt_commands(lines, "pretrain")
    assert f"--run-dir {work}/dynamics/models/sep-l1-3/en-fr " in pretrain
    [track] = xlt_commands(lines, "track")
    assert f'--run {work}/dynamics/models/sep-l1-3/en-fr --label "Sep L1-3"' in track
    assert len(xlt_commands(lines, "report")) == 1

"""Shared utilities: strict line reading, atomic outputs, locks, metrics log, dataclass options."""

from __future__ import annotations

import gzip
import json
import lzma
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Optional

import click
import pytest
import torch
from click.testing import CliRunner

from xlt.cli.options import build_config, dataclass_options
from xlt.utils.errors import XltError
from xlt.utils.outputs import atomic_output, directory_for_outputs, scratch_file
from xlt.utils.rundir import (MetricsLog, check_same_config, cpu_model, environment, exclusive_lock,
                              write_run_description)
from xlt.utils.textio import read_lines


@pytest.mark.parametrize("opener,suffix", [(open, ""), (gzip.open, ".gz"), (lzma.open, ".xz")])
def test_read_lines_plain_and_compressed(tmp_path, opener, suffix):
    path = tmp_path / f"a.txt{suffix}"
    with opener(path, "wb") as f:
        f.write("one\n\nthree\r\nfour é".encode("utf-8"))
    assert list(read_lines(path)) == ["one", "", "three", "four é"]


def test_read_lines_drops_a_byte_order_mark_at_the_start_only(tmp_path):
    path = tmp_path / "bom.conllu"
    path.write_bytes("\ufeff1\tA\n2\t\ufeffB\n".encode("utf-8"))
    assert list(read_lines(path)) == ["1\tA", "2\t\ufeffB"]


def test_a_task_file_saved_with_a_byte_order_mark_reads_as_without(tmp_path):
    from xlt.finetune.parse import read_conllu
    from xlt.finetune.xnli import XNLITask

    tree = "1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_\n\n"
    plain, marked = tmp_path / "plain.conllu", tmp_path / "marked.conllu"
    plain.write_text(tree, encoding="utf-8")
    marked.write_text("\ufeff" + tree, encoding="utf-8")   # was: ID '\ufeff1' is not a word number
    assert [s.words for s in read_conllu(str(marked))] == [s.words for s in read_conllu(str(plain))]
    nli = tmp_path / "marked.tsv"
    nli.write_text("\ufeffA man sleeps.\tSomeone rests.\tentailment\n", encoding="utf-8")
    assert XNLITask().read(str(nli))[0].premise == "A man sleeps."


def test_read_lines_reports_the_line_of_a_bad_byte(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nalso fine\nbad \xff here\n")
    with pytest.raises(XltError) as e:
        list(read_lines(path))
    assert e.value.line == 3 and str(e.value).startswith(f"{path}:3: not valid UTF-8")


def test_read_lines_missing_file(tmp_path):
    with pytest.raises(XltError, match="no such file"):
        list(read_lines(tmp_path / "nope"))


def test_atomic_output_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_output(target) as f:
            f.write("partial")
            raise RuntimeError("killed")
    assert os.listdir(tmp_path) == []
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as f:
            f.write("new")
            raise RuntimeError("killed")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]
    with atomic_output(target) as f:
        f.write("new")
    assert target.read_text() == "new"


class _Signal(BaseException):
    """What a SIGTERM handler raises: not an Exception, and possible between any two bytecodes."""


def test_a_signal_just_after_the_temporary_is_made_leaves_none_behind(tmp_path, monkeypatch):
    # CI once caught SIGTERM between mkstemp making the file and handing back its name; the signal
    # is put in exactly there: the moment the OS has made the file, before any Python sees its name
    made = []
    real_open = os.open

    def open_then_signal(name, flags, *args):
        fd = real_open(name, flags, *args)
        if flags & os.O_CREAT and os.fspath(name).endswith(".tmp"):
            made.append(name)
            os.close(fd)
            raise _Signal()
        return fd

    monkeypatch.setattr(os, "open", open_then_signal)
    with pytest.raises(_Signal):
        with atomic_output(tmp_path / "out.txt") as f:
            f.write("never")
    with pytest.raises(_Signal):
        with scratch_file(str(tmp_path), "joint"):
            pass
    assert len(made) == 2 and os.listdir(tmp_path) == []


def test_a_scratch_file_is_removed_whatever_the_exit_and_is_named_beside_its_prefix(tmp_path):
    with scratch_file(str(tmp_path), "joint") as name:
        assert os.path.dirname(name) == str(tmp_path) and f"-{os.getpid()}-" in os.path.basename(name)
        assert os.path.basename(name).startswith("joint.")
        assert os.path.getsize(name) == 0
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError):
        with scratch_file(str(tmp_path), "joint") as name:
            raise ValueError
    assert os.listdir(tmp_path) == []
    with pytest.raises(XltError, match=r"/missing/joint: cannot write \(No such file or directory\)"):
        with scratch_file(str(tmp_path / "missing"), "joint"):
            pass


def test_directories_made_for_failed_outputs_go_again_unless_they_hold_something(tmp_path):
    with pytest.raises(ValueError):
        with directory_for_outputs(tmp_path / "a" / "b" / "c"):
            raise ValueError
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError):
        with directory_for_outputs(tmp_path / "a" / "b") as made:
            (tmp_path / "a" / "landed.txt").write_text("an output that did land")
            raise ValueError
    assert made == str(tmp_path / "a" / "b") and sorted(os.listdir(tmp_path / "a")) == ["landed.txt"]
    with directory_for_outputs(tmp_path / "a" / "b"):
        pass
    assert (tmp_path / "a" / "b").is_dir()


def test_the_next_writer_removes_what_a_writer_killed_outright_left(tmp_path):
    # SIGKILL leaves a temporary; its pid, dead now, tells the next writer of the file that it is stale
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    with scratch_file(str(tmp_path), "out.txt") as mine:
        tag = os.path.basename(mine).split(".")[2].split("-")[0]
    left = {"dead": f"out.txt.{tag}-{dead}-0123abcd.tmp",   # this machine's, its writer gone: removed
            "alive": f"out.txt.{tag}-{os.getppid()}-0123abcd.tmp",   # a live writer's: kept
            "elsewhere": f"out.txt.ffffff-{dead}-0123abcd.tmp",   # another machine's (shared disk): kept
            "other file": f"other.txt.{tag}-{dead}-0123abcd.tmp"}   # another output's: its own writer's business
    for name in left.values():
        (tmp_path / name).write_text("torn")
    with atomic_output(tmp_path / "out.txt") as f:
        f.write("whole")
    assert sorted(os.listdir(tmp_path)) == sorted([left["alive"], left["elsewhere"], left["other file"], "out.txt"])


def test_exclusive_lock_keeps_a_second_holder_out(tmp_path):
    lock = tmp_path / ".lock"
    with exclusive_lock(lock):
        with pytest.raises(XltError, match="another process"):
            with exclusive_lock(lock):
                pass
    with exclusive_lock(lock):  # released
        pass


def test_metrics_log_appends_and_truncates(tmp_path):
    m = MetricsLog(tmp_path / "metrics.jsonl")
    for step in (1, 2, 3, 4):
        m.append({"step": step, "loss": 1.0 / step})
    m.truncate_after(2)
    assert [r["step"] for r in m.records()] == [1, 2]


def test_check_same_config(tmp_path):
    assert not check_same_config(tmp_path, {"lr": 1})
    write_run_description(tmp_path, {"lr": 1, "steps": 5}, {})
    assert check_same_config(tmp_path, {"lr": 1, "steps": 9}, mutable=("steps",))
    with pytest.raises(XltError, match="lr"):
        check_same_config(tmp_path, {"lr": 2, "steps": 5})


def test_run_description_names_the_cpu_kind_and_the_kernel_path_torch_took(tmp_path):
    """Runs are bit-reproducible on one CPU kind only, so a run says which it ran on: the processor
    and the vector code torch's kernels used, a forced one (ATEN_CPU_CAPABILITY) included."""
    code = ("import sys; from xlt.utils.rundir import write_run_description; "
            "write_run_description(sys.argv[1], {}, {})")
    for forced in (None, "default"):   # None: what this process runs (the suite may run under a forced one)
        env = {**os.environ, "ATEN_CPU_CAPABILITY": forced} if forced else None
        subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, check=True)
        recorded = json.loads((tmp_path / "config.json").read_text())["environment"]
        expected = "DEFAULT" if forced else torch.backends.cpu.get_cpu_capability()
        assert recorded["cpu_capability"] == expected and recorded["cpu"] == cpu_model()
    assert cpu_model()
    if os.path.exists("/proc/cpuinfo"):
        names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")]
        assert not names or cpu_model().startswith(names[0])


def test_run_description_names_the_device_the_run_took_and_the_gpus_beside_it(tmp_path, monkeypatch):
    # --device auto is recorded as given: the description says what it resolved to, and which GPUs
    # the machine had (a CPU run on a GPU machine is told apart from one on a machine without)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"NVIDIA H200 #{i}")
    write_run_description(tmp_path, {"lr": 1}, {}, device=torch.device("cuda", 0))
    recorded = json.loads((tmp_path / "config.json").read_text())["environment"]
    assert recorded["gpus"] == ["NVIDIA H200 #0", "NVIDIA H200 #1"] and recorded["device"] == "cuda:0"
    write_run_description(tmp_path, {"lr": 1}, {}, resumed_at={"step": 3}, device="cpu")
    description = json.loads((tmp_path / "config.json").read_text())
    assert description["environment"]["device"] == "cuda:0" and description["resumes"][0]["environment"]["device"] == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert environment()["gpus"] == [] and "device" not in environment()


@dataclass
class _Demo:
    name: str = field(metadata={"help": "a name"})
    pairs: dict[str, str] = field(metadata={"help": "pairs"}, default_factory=dict)
    span: Optional[tuple[int, int]] = field(metadata={"help": "a span"}, default=None)
    flag: bool = field(metadata={"help": "a flag"}, default=True)
    auto: Optional[bool] = field(metadata={"help": "automatic"}, default=None)
    rate: float = field(metadata={"help": "a rate"}, default=0.5)


def test_dataclass_options_round_trip():
    seen = {}

    @click.command()
    @dataclass_options(_Demo)
    def cmd(**values):
        seen["cfg"] = build_config(_Demo, values)

    res = CliRunner().invoke(cmd, ["--name", "x", "--pairs", "en", "a", "--pairs", "fr", "b", "--span", "1", "3",
                                   "--no-flag", "--rate", "0.25"])
    assert res.exit_code == 0, res.output
    assert seen["cfg"] == _Demo("x", {"en": "a", "fr": "b"}, (1, 3), False, None, 0.25)
    res = CliRunner().invoke(cmd, ["--pairs", "en", "a"])
    assert res.exit_code == 2 and "--name" in res.output


def test_atomic_outputs_get_the_usual_file_mode(tmp_path):
    from xlt.utils.outputs import atomic_path

    with atomic_output(tmp_path / "a") as f:
        f.write("x")
    with atomic_path(tmp_path / "b") as tmp:
        open(tmp, "w").write("y")
    umask = os.umask(0)
    os.umask(umask)
    for name in ("a", "b"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("content, line, what", [
    (b'{\n  "a": 1,\n  "b": "\xff"\n}\n', 3, "not valid UTF-8 (byte 9 of the line)"),   # as read_lines says it
    (b'{\n  "a": 1\n  "b": 2\n}\n', 3, "not a valid results file (Expecting ',' delimiter, column 3)"),
])
def test_a_damaged_json_file_is_named_with_its_line(tmp_path, content, line, what):
    from xlt.utils.textio import read_json

    path = tmp_path / "results.json"
    path.write_bytes(content)
    with pytest.raises(XltError) as err:
        read_json(path, "results file")
    assert str(err.value) == f"{path}:{line}: {what}"


def test_a_resume_records_its_changes_not_the_settings_added_since(tmp_path):
    from xlt.utils.rundir import record_resume

    write_run_description(tmp_path, {"max_steps": 10, "lr": 1e-3}, {"vocab_sha256": "a"})
    first = json.loads((tmp_path / "config.json").read_text())
    # a key the earlier description lacks is a setting added to xlt since (at its default): no change
    record_resume(tmp_path, {"step": 10}, {"max_steps": 20, "lr": 1e-3, "langs_per_step": 1})
    described = json.loads((tmp_path / "config.json").read_text())
    assert described["command"] == first["command"] and described["environment"] == first["environment"]
    assert described["config"]["max_steps"] == 20 and described["inputs"] == {"vocab_sha256": "a"}
    (resume,) = described["resumes"]
    assert resume["step"] == 10 and resume["changed"] == {"max_steps": [10, 20]}

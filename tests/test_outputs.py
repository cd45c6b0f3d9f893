"""Outputs the OS refuses, and what a killed process left half-written.

An output that cannot be written is one error line, ``PATH: cannot write (REASON)``, exit 2, before
any work (a disk that fills during a write: tests/test_outputs_full_disk.py); the next start of a
command removes the temporaries a killed process left of every file the command writes.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_in_process, run_xlt
from finetune_toy import build_toy_world
from pretrain_fixtures import build_inputs, tiny_args

from xlt.utils.errors import XltError
from xlt.text.fastbpe import find_fast_tool
from xlt.utils.outputs import atomic_path, make_directory, special_file

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def command_lines(bad: Path, missing: Path, existing: Path) -> dict[str, list]:
    """Commands whose output is under ``bad``. Their inputs are missing: the output, known from the
    command line, must be found out first, before any input is read or any model loaded."""
    return {
        "tokenize": ["tokenize", "--lang", "en", missing, "-o", bad / "out.tok"],
        "bpe learn": ["bpe", "learn", "--merges", "10", "-o", bad / "codes", missing],
        "binarize": ["binarize", "--vocab", missing, "--lang", "en", missing, "-o", bad / "en.train"],
        "pretrain": ["pretrain", "--run-dir", bad / "run", "--vocab", missing, "--train", "en", missing,
                     "--dev", "en", missing],
        "finetune": ["finetune", "xnli", "--model", missing, "-o", bad / "ft"],
        "extract": ["extract", "--model", missing, "--lang", "en", missing, "-o", bad / "reps"],
        "embed train": ["embed", "train", "--text", "en", missing, "-o", bad / "w2v.txt"],
        "export hf": ["export", "hf", missing, "-o", bad / "hf"],
        "report table1": ["report", "table1", "--results-dir", existing, "-o", bad / "report"],
    }


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory the OS refuses new files in: mode 555, and for root (whom modes do not stop) the
    immutable attribute; skipped where neither holds."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    immutable = False
    try:
        if os.access(ro, os.W_OK):
            immutable = shutil.which("chattr") is not None and subprocess.run(
                ["chattr", "+i", ro], capture_output=True).returncode == 0
            if not immutable:
                pytest.skip("this user can write in a mode-555 directory and cannot make one immutable")
        yield ro
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", ro], check=True)
        ro.chmod(0o755)  # so that pytest can remove tmp_path


@pytest.mark.parametrize("command", list(command_lines(Path(), Path(), Path())))
def test_an_output_under_a_regular_file_is_one_line_before_any_work(command, tmp_path, capsys):
    # A path below a regular file cannot be created, by root as by anyone.
    bad = tmp_path / "file.txt"
    bad.write_text("not a directory\n")
    args = command_lines(bad, tmp_path / "missing", tmp_path)[command]
    res = run_in_process(capsys, *args)
    assert_one_line_error(res, f"xlt {command}: error: {bad}/", ": cannot write (Not a directory)")


@pytest.mark.parametrize("command", ["binarize", "extract"])
def test_a_prefix_that_names_a_directory_is_one_line_before_any_work(command, tmp_path, capsys):
    # "out/" would begin the names out/.bin, out/.json: hidden files in an existing directory
    (tmp_path / "out").mkdir()
    args = command_lines(tmp_path / "out", tmp_path / "missing", tmp_path)[command]
    args[-1] = f"{tmp_path / 'out'}/"
    assert_one_line_error(run_in_process(capsys, *args), f"xlt {command}: error: {tmp_path / 'out'}/: a prefix must end with a name")
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("command", list(command_lines(Path(), Path(), Path())))
def test_an_output_in_a_read_only_directory_is_one_line_before_any_work(command, read_only_dir, tmp_path, capsys):
    args = command_lines(read_only_dir, tmp_path / "missing", tmp_path)[command]
    res = run_in_process(capsys, *args)
    assert_one_line_error(res, f"xlt {command}: error: {read_only_dir}/", ": cannot write (")
    assert list(read_only_dir.iterdir()) == []


def test_the_library_reports_a_refused_output_as_one_line_where_it_happens(read_only_dir, tmp_path):
    with pytest.raises(XltError, match=r"out\.txt: cannot write \("):
        with atomic_path(read_only_dir / "out.txt"):
            pass
    (tmp_path / "file.txt").write_text("")
    with pytest.raises(XltError, match=r"file\.txt/run: cannot write \(Not a directory\)"):
        make_directory(tmp_path / "file.txt" / "run")


def tmp_names(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.tmp"))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("outputs-inputs"))


def leave_temporaries(paths: list[Path]) -> None:
    """What SIGKILL inside atomic_path leaves: each path's real temporary, never renamed or removed."""
    code = ("import os, signal, sys\nfrom xlt.utils.outputs import atomic_path\n"
            "held = [atomic_path(p) for p in sys.argv[1:]]\nfor cm in held:\n    cm.__enter__()\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    killed = subprocess.run([sys.executable, "-c", code, *map(str, paths)])
    assert killed.returncode == -signal.SIGKILL
    assert len(tmp_names(Path(os.path.commonpath(paths)))) >= len(paths)


def written_files(root: Path) -> list[Path]:
    """Every file a command wrote under ``root`` (its lock files are not written, only held)."""
    return [p for p in root.rglob("*") if p.is_file() and p.name not in ("lock", ".lock")]


def test_pretrain_removes_what_a_killed_start_left_of_every_file_it_writes(inputs, tmp_path):
    run = tmp_path / "run"
    args = ["pretrain", "--run-dir", run, *inputs["args"], *tiny_args(3)]
    run_xlt(*args, check=True)
    leave_temporaries(written_files(run))
    run_xlt(*args, check=True)
    assert tmp_names(run) == []


def test_finetune_removes_what_a_killed_process_left_of_its_output_files(tmp_path_factory, tmp_path, capsys):
    world = build_toy_world(tmp_path_factory.getbasetemp() / "finetune-world")
    out = tmp_path / "out"
    args = ["finetune", "finetune_toy:ToyTask", "--model", world.run, "-o", out, *world.args("fr"),
            "--batch-size", "8", "--epochs", "1", "--seeds", "1", "--checkpoint", "last"]
    assert run_in_process(capsys, *args).returncode == 0
    leave_temporaries([p for p in written_files(out) if p.parent == out])  # the runs' own: test_finetune_runner
    assert run_in_process(capsys, *args).returncode == 0
    assert tmp_names(out) == []


def test_an_output_that_is_a_pipe_or_a_device_is_written_in_place_not_replaced(tmp_path):
    # renaming a temporary over `-o /dev/null` would replace the node itself (as root: for everyone)
    (tmp_path / "in.txt").write_text("Hello, world.\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    res = run_xlt("-q", "tokenize", "--lang", "en", tmp_path / "in.txt", "-o", fifo)
    assert res.returncode == 0, res.stderr
    assert reader.communicate(timeout=60)[0] == b"Hello , world .\n"
    assert fifo.is_fifo() and tmp_names(tmp_path) == []
    # (not tried on /dev/full itself: a regression would replace the machine's device, run as root)


def test_bpe_apply_through_fastbpe_writes_a_pipe_given_as_its_output(tmp_path):
    # `fast applybpe` truncates its output file, which a pipe or /dev/null refuses: it writes a temporary
    (tmp_path / "in.tok").write_text("hello world\nthe cat sat\n")
    run_xlt("bpe", "learn", "--merges", "5", "-o", tmp_path / "codes", tmp_path / "in.tok", check=True)
    expected = run_xlt("bpe", "apply", "--codes", tmp_path / "codes", tmp_path / "in.tok", check=True).stdout
    assert find_fast_tool() is not None     # the plain-file path under test (make install builds it)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    res = run_xlt("bpe", "apply", "--codes", tmp_path / "codes", tmp_path / "in.tok", "-o", fifo)
    assert res.returncode == 0, res.stderr
    assert reader.communicate(timeout=60)[0].decode() == expected and "@@" in expected
    assert fifo.is_fifo() and tmp_names(tmp_path) == []


def test_a_path_under_dev_is_written_in_place_even_when_it_links_to_a_regular_file():
    # pytest captures fd 1 into a regular file: /dev/stdout links to it, and a rename over the link
    # would replace the system's /dev/stdout (run as root)
    assert os.path.isfile("/dev/stdout") and special_file("/dev/stdout")
    assert not special_file("/dev/no-such-device")


@pytest.mark.parametrize("args", [["tokenize", "--lang", "en", "IN"], ["bpe", "learn", "--merges", "5", "IN"],
                                  ["--help"], ["tokenize", "--help"]])
def test_a_stdout_that_refuses_output_is_one_line(args, tmp_path):
    (tmp_path / "in.txt").write_text("Hello, world.\n" * 50)
    command = [str(tmp_path / "in.txt") if a == "IN" else a for a in args]
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "xlt", "-q", *command], stdout=full, stderr=subprocess.PIPE,
                              text=True)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].endswith("error: <stdout>: cannot write (No space left on device)"), lines[0]


def test_sigterm_leaves_no_temporary_behind(tmp_path):
    (tmp_path / "in.txt").write_text("Hello, world. This is one of many lines.\n" * 200_000)
    out = tmp_path / "out.tok"
    proc = subprocess.Popen([sys.executable, "-m", "xlt", "tokenize", "--lang", "en", str(tmp_path / "in.txt"),
                             "-o", str(out)], stderr=subprocess.PIPE, text=True)
    while not tmp_names(tmp_path):   # the temporary exists: the write has begun
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    stderr = proc.communicate(timeout=60)[1]
    assert proc.returncode == 143 and stderr.splitlines()[-1] == "xlt tokenize: terminated", stderr
    assert tmp_names(tmp_path) == [] and not out.exists()


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:   # gone meanwhile
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def test_tokenize_workers_die_with_a_parent_killed_outright(tmp_path):
    # SIGKILL gives the parent no chance to stop its pool: the workers must not live on, nor print
    # BrokenPipeError tracebacks into the terminal once they find the parent's pipe closed
    (tmp_path / "in.txt").write_text("Hello, world. This is one of many lines.\n" * 400_000)
    proc = subprocess.Popen([sys.executable, "-m", "xlt", "tokenize", "--workers", "2", "--lang", "en",
                             str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.tok")], stderr=subprocess.PIPE, text=True)
    while not tmp_names(tmp_path) or len(children_of(proc.pid)) < 2:   # writing, with its workers
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    time.sleep(0.5)   # results are flowing
    workers = children_of(proc.pid)
    proc.kill()
    stderr = proc.communicate(timeout=60)[1]   # its end: every process holding stderr, the workers too, is gone
    assert proc.returncode == -signal.SIGKILL and "Traceback" not in stderr, stderr

    def living(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 30   # a worker whose descriptors are closed may still be exiting
    while any(map(living, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if living(pid)]


def test_outputs_of_several_files_are_written_all_or_none(tmp_path, capsys):
    (tmp_path / "en.bpe").write_text("a b c\n")
    (tmp_path / "vocab.langs.json").mkdir()   # the sidecar cannot be written: the vocabulary is not either
    res = run_in_process(capsys, "-q", "bpe", "vocab", "--lang", "en", "-o", tmp_path / "vocab", tmp_path / "en.bpe")
    assert_one_line_error(res, "vocab.langs.json: is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["en.bpe", "vocab.langs.json"]
    (tmp_path / "results").mkdir()
    (tmp_path / "report" / "table1.tex").mkdir(parents=True)   # the third of the table's four files
    res = run_in_process(capsys, "-q", "report", "table1", "--results-dir", tmp_path / "results", "-o", tmp_path / "report")
    assert_one_line_error(res, "table1.tex: is a directory")
    assert [p.name for p in (tmp_path / "report").iterdir()] == ["table1.tex"]


def test_a_report_the_disk_fills_under_leaves_no_markdown_and_no_new_folder(tmp_path, capsys, monkeypatch):
    # make targets NAME.md: it must not land before the other files, nor stay when one of them fails
    (tmp_path / "results").mkdir()
    report = tmp_path / "new" / "report"
    real_fsync, real_replace, renamed = os.fsync, os.replace, []

    def full_for_the_json(fd):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(f"{report / 'table1.json'}."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    def replace(src, dst):
        renamed.append(os.path.basename(dst))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    command = ["-q", "report", "table1", "--results-dir", tmp_path / "results", "--langs", "fr", "-o", report]
    res = run_in_process(capsys, *command)
    assert res.returncode == 0 and renamed[-1] == "table1.md" and len(renamed) == 4, renamed
    shutil.rmtree(tmp_path / "new")
    monkeypatch.setattr(os, "fsync", full_for_the_json)
    res = run_in_process(capsys, *command)
    assert_one_line_error(res, f"{report / 'table1.json'}: cannot write (No space left on device)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]   # no report, and no empty new/report


def test_a_sigterm_while_the_command_loads_names_the_command():
    # the subcommand's module (and torch) loads for seconds before the command runs: a SIGTERM then
    # was told as `xlt: terminated`, the command unnamed
    code = ("import importlib, os, signal, sys\n"
            "real = importlib.import_module\n"
            "def loading(name, *args):\n"
            "    if name.startswith('xlt.cli.'):\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "    return real(name, *args)\n"
            "importlib.import_module = loading\n"
            "from xlt.cli import main\n"
            "main(sys.argv[1:])\n")
    proc = subprocess.run([sys.executable, "-c", code, "extract", "--help"], capture_output=True, text=True)
    assert proc.returncode == 143 and proc.stderr.splitlines() == ["xlt extract: terminated"], proc.stderr


def test_a_removed_working_directory_is_one_line(tmp_path):
    (tmp_path / "in.txt").write_text("Hello, world.\n")
    gone = tmp_path / "gone"
    gone.mkdir()

    def stand_in_a_removed_directory():
        os.chdir(gone)
        os.rmdir(gone)

    res = run_xlt("tokenize", "--lang", "en", tmp_path / "in.txt", "-o", "out.tok",
                  preexec_fn=stand_in_a_removed_directory)
    assert_one_line_error(res, "the working directory was removed while in use")


@pytest.mark.parametrize("args", [["bpe", "vocab", "--lang", "xx", "-o", "OUT", "IN"],
                                  ["baselines", "ner", "--train", "xx", "IN", "--eval", "en", "IN", "-o", "OUT"],
                                  ["bpe", "anchors", "--vocab", "xx", "IN", "--vocab", "en", "IN", "--json", "OUT"],
                                  ["embed", "train", "--text", "xx", "IN", "-o", "OUT"],
                                  ["align", "word", "--emb-a", "IN", "--source-lang", "en", "--target-lang", "xx",
                                   "--map", "none", "--test-dict", "IN", "-o", "OUT"]])
def test_an_unknown_language_is_one_line_and_writes_nothing(args, tmp_path, capsys):
    (tmp_path / "in").write_text("a O\nb B-PER\n\n")
    command = [{"IN": tmp_path / "in", "OUT": tmp_path / "out"}.get(a, a) for a in args]
    assert_one_line_error(run_in_process(capsys, "-q", *command), "unknown language 'xx'")
    assert not (tmp_path / "out").exists()

"""A disk that refuses or fills during a write: one error line ``PATH: cannot write (REASON)``, exit 2,
the old file as it was and no temporary left (the OS's file size limit stands in for a full disk)."""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys

import pytest
from conftest import assert_one_line_error, run_in_process, run_xlt
from pretrain_fixtures import build_inputs, tiny_args
from test_outputs import tmp_names

from xlt.utils.errors import XltError
from xlt.utils.outputs import written_together
from xlt.utils.rundir import exclusive_lock

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("full-disk-inputs"))


def limit_file_size(limit: int):
    """A child's preexec_fn: the OS refuses any write past ``limit`` bytes of a file (EFBIG, as a full
    disk refuses with ENOSPC; Python ignores SIGXFSZ, so the write fails, not the process)."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_files_written_together_land_none_when_the_disk_refuses_the_first(tmp_path):
    # the first text (make's target, renamed last) failed only at its flush on the way out, after the
    # others were renamed into place: a vocabulary refused left its new .langs.json beside nothing
    first, second = tmp_path / "vocab", tmp_path / "vocab.langs.json"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(XltError, match=r"vocab: cannot write \(File too large\)"):
            with written_together({str(first): "a " * 3000, str(second): "{}"}):
                pass
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_write_the_disk_refuses_is_one_line_and_the_old_file_stays(tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("Hello, world.\n" * 2000)
    out = tmp_path / "out.tok"
    out.write_text("the old output\n")
    res = run_xlt("-q", "tokenize", "--lang", "en", text, "-o", out, preexec_fn=limit_file_size(4096))
    assert_one_line_error(res, f"xlt tokenize: error: {out}: cannot write (File too large)")
    assert out.read_text() == "the old output\n"
    assert tmp_names(tmp_path) == []


def test_a_bpe_output_the_disk_refuses_is_one_line_not_the_tools_death(tmp_path):
    # fastBPE's `fast applybpe` (make install builds it) dies of a signal on a full output: SIGXFSZ
    # under the file size limit, SIGBUS on a full disk (its output is memory-mapped; measured on a
    # 16 KiB tmpfs). Its death was reported as "fastBPE failed (exit status -25)".
    text = tmp_path / "in.txt"
    text.write_text("the cat sees a small dog in the garden .\n" * 3000)
    run_xlt("-q", "bpe", "learn", "--merges", "20", "-o", tmp_path / "codes", text, check=True)
    out = tmp_path / "out.bpe"
    res = run_xlt("-q", "bpe", "apply", "--codes", tmp_path / "codes", text, "-o", out,
                  preexec_fn=limit_file_size(4096))
    assert_one_line_error(res, f"xlt bpe apply: error: {out}: cannot write (File too large)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["codes", "in.txt"]


def test_a_tools_bus_error_is_a_full_disk_only_when_the_disk_is_full(tmp_path, monkeypatch):
    from xlt.text.fastbpe import _output_refused

    out = str(tmp_path / "out.bpe")
    assert _output_refused(-signal.SIGBUS, out) is None   # this disk has room: a crash of the tool's own
    assert _output_refused(1, out) is None and _output_refused(-signal.SIGXFSZ, out).errno == errno.EFBIG
    full = os.statvfs_result((4096, 4096, 100, 0, 0, 10, 0, 0, 0, 255))
    monkeypatch.setattr(os, "statvfs", lambda path: full)
    assert _output_refused(-signal.SIGBUS, out).errno == errno.ENOSPC


def test_a_token_store_the_disk_refuses_is_one_line_and_leaves_no_part(inputs, tmp_path):
    # the store's arrays are written in chunks; a short write must read as the disk's, not a crash
    text = tmp_path / "en.txt"
    text.write_text((inputs["root"] / "en.train.txt").read_text() * 20)
    res = run_xlt("binarize", "--vocab", inputs["root"] / "vocab", "--lang", "en", text, "-o", tmp_path / "en",
                  preexec_fn=limit_file_size(4096))
    assert_one_line_error(res, f"xlt binarize: error: {tmp_path / 'en.bin'}: cannot write (File too large)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["en.txt"]


def test_a_lock_file_the_disk_refuses_is_one_line(tmp_path, monkeypatch):
    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(XltError, match=r"lock: cannot write \(No space left on device\)"):
        with exclusive_lock(tmp_path / "lock"):
            pass


def test_a_full_disk_at_the_flush_is_one_line_and_the_old_file_stays(tmp_path, capsys, monkeypatch):
    # Where the OS reports ENOSPC late (NFS, delayed allocation): at fsync, when everything was written.
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    (tmp_path / "in.txt").write_text("Hello, world.\n")
    out = tmp_path / "out.tok"
    out.write_text("the old output\n")
    res = run_in_process(capsys, "-q", "tokenize", "--lang", "en", tmp_path / "in.txt", "-o", out)
    assert_one_line_error(res, f"{out}: cannot write (No space left on device)")
    assert out.read_text() == "the old output\n"
    assert tmp_names(tmp_path) == []


def test_a_metrics_line_the_disk_cuts_is_one_line_and_taken_back(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 1}\n')
    code = "import sys\nfrom xlt.utils.rundir import MetricsLog\nMetricsLog(sys.argv[1]).append({'step': 2, 'x': 'y' * 99})"
    appended = subprocess.run([sys.executable, "-c", code, metrics], capture_output=True, text=True,
                              preexec_fn=limit_file_size(metrics.stat().st_size + 20))  # room for part of it
    assert appended.stderr.strip().endswith(f"XltError: {metrics}: cannot write (File too large)"), appended.stderr
    assert metrics.read_text() == '{"step": 1}\n'


def test_a_checkpoint_the_disk_refuses_is_one_line_and_the_last_one_stays(inputs, tmp_path):
    run = tmp_path / "run"
    run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(3), check=True)
    last = (run / "checkpoints" / "last.pt").read_bytes()
    # Room for the run's small files (config.json, metrics), none for a checkpoint.
    res = run_xlt("-q", "pretrain", "--run-dir", run, *inputs["args"], *tiny_args(6),
                  preexec_fn=limit_file_size(len(last) // 4))
    assert_one_line_error(res, f"xlt pretrain: error: {run / 'checkpoints'}/", ": cannot write (File too large)")
    assert (run / "checkpoints" / "last.pt").read_bytes() == last
    assert tmp_names(run) == []

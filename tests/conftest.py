"""Shared fixtures: run the real ``xlt`` command, and the synthetic bilingual corpus."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synthetic  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("XLT_DATA_MIRROR", REPO.parent / "shared" / "data"))


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_xlt(*args: str, input: str | bytes | None = None, cwd: Path | None = None, check: bool = False,
            preexec_fn=None) -> Result:
    """Run ``python -m xlt ARGS`` in a subprocess: real exit codes, real stdout/stderr (``preexec_fn``:
    run in the child before it starts, e.g. to set a resource limit)."""
    data = input.encode("utf-8") if isinstance(input, str) else input
    proc = subprocess.run([sys.executable, "-m", "xlt", *map(str, args)], input=data, cwd=cwd, preexec_fn=preexec_fn,
                          capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    res = Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))
    if check and res.returncode != 0:
        raise AssertionError(f"xlt {' '.join(map(str, args))} failed ({res.returncode}):\n{res.stderr}")
    return res


def run_in_process(capsys, *args) -> Result:
    """``xlt ARGS`` through the CLI's own entry point in this process: no interpreter or torch import per call."""
    from xlt.cli import main

    code = 0
    try:
        main([str(a) for a in args])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def assert_one_line_error(res: Result, *fragments: str) -> None:
    """The project's error contract: exit 2, one line on stderr naming the problem, no traceback."""
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert ": error: " in lines[0], lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture(autouse=True)
def loud_log():
    """Every test starts with log lines on: an in-process ``xlt -q ...`` (run_in_process) sets the
    log module's quiet flag for the whole process, which silenced later tests' expected lines on the
    same worker."""
    from xlt.utils import log

    log.set_quiet(False)
    yield
    log.set_quiet(False)


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a test module (``pytestmark = pytest.mark.usefixtures("one_torch_thread")``),
    its module fixtures included: tiny models gain nothing from more, and on a loaded 2-core machine
    two threads can run many times slower than one."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def xlt():
    return run_xlt


@pytest.fixture
def attention_backends(monkeypatch) -> list[tuple[bool, bool, bool]]:
    """What each call of ``F.scaled_dot_product_attention`` was allowed to choose, as (cuDNN, flash,
    memory-efficient) flags read at the call: xlt keeps cuDNN's kernel out (a plan per batch shape)."""
    import torch
    import torch.nn.functional as F

    seen: list[tuple[bool, bool, bool]] = []
    real = F.scaled_dot_product_attention

    def recording(*args, **kwargs):
        seen.append((torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled(),
                     torch.backends.cuda.mem_efficient_sdp_enabled()))
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", recording)
    return seen


@pytest.fixture
def bilingual(tmp_path: Path) -> tuple[Path, Path]:
    """A 200-sentence parallel en/fr corpus from the synthetic grammar."""
    return synthetic.write_corpus(tmp_path, n=200, seed=0)


@pytest.fixture
def mirror() -> Path:
    """The local data mirror; end-to-end tests need it (CI has it beside the clone)."""
    if not MIRROR.is_dir():
        pytest.fail(f"data mirror not found at {MIRROR}; set XLT_DATA_MIRROR")
    return MIRROR


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """One tiny pretrained run shared by every test that only reads it (extract, align, cka, shift ...)."""
    from pretrain_fixtures import pretrain_tiny_run

    return pretrain_tiny_run(tmp_path_factory.mktemp("tiny-run"))


@pytest.fixture
def http_root(tmp_path):
    """A directory served over HTTP on 127.0.0.1 (an ephemeral port) for the URL path."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()

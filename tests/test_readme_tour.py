"""The README's tour runs as written, from a shell with nothing set: its data commands read the
files its fetch lays out (the fetch's default is the user cache, so the tour sets XLT_DATA as make
does; without it the fetch filled ~/.cache/xlt and the next command read an empty pipe)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import mirror  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]
ACTIVATE = "make install && . .venv/bin/activate"

pytestmark = pytest.mark.slow


def tour_lines() -> list[str]:
    """The tour's shell block, line by line."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## A ten-minute tour"):]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1).splitlines()


def test_the_tours_text_stages_read_what_its_fetch_laid_out(mirror, tmp_path):  # noqa: F811
    lines = tour_lines()
    assert lines[0] == ACTIVATE          # replaced below by this test's own environment
    through = next(i for i, line in enumerate(lines) if "xlt tokenize --lang en" in line)
    script = "set -e\n" + "\n".join(lines[1:through + 1]) + "\n"
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XLT_DATA", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), XLT_DATA_MIRROR=str(mirror),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    res = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    tokens = (tmp_path / "en.tok").read_text(encoding="utf-8").splitlines()
    assert len(tokens) == 20_000 and sum(bool(line.strip()) for line in tokens) > 15_000
    assert not (home / ".cache" / "xlt").exists()    # nothing laid out where the next commands do not look

"""A wheel of xlt installs into an empty virtual environment and works there, far from the checkout.

The environment starts empty (no system site-packages, no pip of its own) and gets the wheel and
its dependencies from a local wheelhouse only (``--no-index``): pip resolves xlt's declared
requirements exactly as it would from PyPI, so a missing dependency or package-data file fails
here. The wheelhouse is made from the distributions already installed in the project's
environment, repacked as wheels from their RECORD (the same files pip had unpacked; no download,
no build); it is cached under build/ because torch alone is most of a gigabyte.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata as metadata
import io
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from conftest import REPO

from packaging import tags
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from xlt.text.fastbpe import fast_tool

pytestmark = pytest.mark.slow
WHEELHOUSE = REPO / "build" / "test-wheelhouse"  # git-ignored; reused across runs
SKIPPED_INFO = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}  # written by the installer, not in wheels


def build_xlt_wheel(tmp: Path) -> Path:
    """``pip wheel`` of a copy of the sources: an in-tree build would reuse build/lib, stale files included."""
    src = tmp / "src"
    shutil.copytree(REPO / "xlt", src / "xlt", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    out = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir",
                    "--disable-pip-version-check", "-q", "-w", str(out), str(src)], check=True, capture_output=True)
    (wheel,) = out.glob("xlt-*.whl")
    return wheel


def requirement_closure(requirements: list[str]) -> dict[str, metadata.Distribution]:
    """The installed distributions that ``requirements`` need, transitively (markers and extras applied)."""
    needed: dict[str, metadata.Distribution] = {}
    extras: dict[str, set[str]] = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = canonicalize_name(req.name)
        if key in needed and set(req.extras) <= extras[key]:
            continue
        try:
            dist = needed.get(key) or metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{req} is required but not installed in {sys.prefix}")
        needed[key] = dist
        extras[key] = extras.get(key, set()) | set(req.extras)
        for line in dist.requires or []:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in {""} | extras[key]):
                sub.marker = None  # true here; the extra it may name is the parent's, not the child's
                todo.append(sub)
    return needed


def repack(dist: metadata.Distribution, wheelhouse: Path) -> Path:
    """An installed distribution as a wheel again: its RECORD's files inside site-packages, stored."""
    info = Parser().parsestr(dist.read_text("WHEEL") or "")
    supported = {str(t) for t in tags.sys_tags()}
    tag = next(t for t in info.get_all("Tag") if t in supported)  # py2.py3 wheels list py2 first
    name = canonicalize_name(dist.metadata["Name"]).replace("-", "_")
    target = wheelhouse / f"{name}-{dist.version}-{tag}.whl"
    if target.is_file():
        return target
    if dist.files is None:
        pytest.fail(f"{dist.metadata['Name']} has no RECORD to repack")
    info_dir = next(f.parts[0] for f in dist.files if f.parts[0].endswith(".dist-info"))
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as whl:
        for file in dist.files:
            path = file.as_posix()
            if path.startswith("../") or "__pycache__" in file.parts or \
                    (file.parts[0] == info_dir and file.name in SKIPPED_INFO):
                continue  # scripts outside site-packages are regenerated from entry_points.txt
            data = Path(dist.locate_file(file)).read_bytes()
            whl.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            writer.writerow([path, f"sha256={digest}", len(data)])
        writer.writerow([f"{info_dir}/RECORD", "", ""])
        whl.writestr(f"{info_dir}/RECORD", record.getvalue())
    tmp.replace(target)
    return target


def run(command: list, cwd: Path, env: dict, input: bytes | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(map(str, command)), cwd=cwd, env=env, input=input, capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    return proc


def test_the_wheel_installs_into_an_empty_venv_and_runs_outside_the_checkout(tmp_path):
    wheel = build_xlt_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        requires = Parser().parsestr(whl.read("xlt-0.1.0.dist-info/METADATA").decode()).get_all("Requires-Dist")
    assert len([n for n in names if n.startswith("xlt/data/recipe_files/") and n.endswith(".json")]) >= 20
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    for dist in requirement_closure([r for r in requires if "extra ==" not in r]).values():
        repack(dist, WHEELHOUSE)

    venv = tmp_path / "venv"  # empty: no pip, no system site-packages
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--disable-pip-version-check",
         "--no-index", "--find-links", WHEELHOUSE, "--no-compile", wheel], tmp_path, dict(os.environ))

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path / "home"), "LANG": "C.UTF-8",
           "OMP_NUM_THREADS": "1"}
    assert shutil.which("fast", path=env["PATH"]) is None  # no compiled fastBPE tool: learn is in-process
    no_binding = subprocess.run([venv / "bin" / "python", "-c", "import fastBPE"], cwd=work, env=env, capture_output=True)
    assert no_binding.returncode != 0  # an optional extra: apply runs xlt's Python applier
    where = run([venv / "bin" / "python", "-c", "import xlt; print(xlt.__file__)"], work, env).stdout.decode()
    assert where.startswith(str(venv)), where

    listing = run([venv / "bin" / "xlt", "data", "list"], work, env).stdout.decode().splitlines()
    assert listing[0] == f"data directory: {tmp_path / 'home' / '.cache' / 'xlt'}    mirror: none"
    assert any(line.startswith("ud_en_ewt ") for line in listing) and len(listing) >= 22

    raw = "The cats sat on the mat, and the dog sat too.\nCats and dogs: the cat's mat!\n" * 40
    (work / "en.txt").write_text(raw, encoding="utf-8")
    run([venv / "bin" / "xlt", "-q", "tokenize", "--lang", "en", "en.txt", "-o", "en.tok"], work, env)
    tokens = (work / "en.tok").read_text(encoding="utf-8").splitlines()
    assert tokens[:2] == ["The cats sat on the mat , and the dog sat too .", "Cats and dogs : the cat 's mat !"]
    run([venv / "bin" / "xlt", "bpe", "learn", "-n", "30", "en.tok", "-o", "codes"], work, env)
    reference = subprocess.run([fast_tool(), "learnbpe", "30", work / "en.tok"], capture_output=True, check=True).stdout
    assert reference.endswith(b" 0\n")  # fastBPE pads with zero-count merges when the pairs run out; xlt stops
    assert (work / "codes").read_bytes() == b"".join(
        line for line in reference.splitlines(keepends=True) if not line.endswith(b" 0\n"))
    bpe = run([venv / "bin" / "xlt", "bpe", "apply", "--codes", "codes", "en.tok"], work, env).stdout
    assert bpe == subprocess.run([sys.executable, "-m", "xlt", "bpe", "apply", "--codes", work / "codes",
                                  work / "en.tok"], capture_output=True, check=True).stdout
    assert sorted(p.name for p in work.iterdir()) == ["codes", "en.tok", "en.txt"]  # nothing else written here

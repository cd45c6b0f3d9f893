"""Data recipes: where each data set comes from, its licence and checksums, and how to prepare it.

One declarative JSON file per data set lives in ``xlt/data/recipe_files/``, package data that
every install carries (``XLT_RECIPES`` overrides the folder)::

    {"name": "msra", "title": "...", "licence": "...", "official_url": "http://...",
     "in_all": true, "notes": "...",
     "files": [{"path": "ner/msra/msra_test_gold_wordtag.txt", "sha256": "dab2...", "size": 577540,
                "url": "https://..."}],
     "prepare": [{"function": "msra_wordtag_to_char_bio", "inputs": ["ner/msra/..."],
                  "output": "ner/msra/msra_test_gold_char_bio.txt", "sha256": "..."}]}

:func:`fetch` takes every file from the mirror (``XLT_DATA_MIRROR``, default ``../shared/data``
beside the checkout when xlt runs from one) or else from its ``url``, checks its sha256, and lays it
out under the data directory (``XLT_DATA``, default the user cache ``$XDG_CACHE_HOME/xlt`` or
``~/.cache/xlt``, so an installed xlt never writes into its own install) at the same relative path; then it
runs the recipe's preparation steps, which are the named functions in :data:`PREPARERS`. Files
already present with the right checksum are skipped. A file whose recipe records no checksum
(``"sha256": null``: official files that could not be pinned from here) is fetched and reported as
unverified.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Literal, Optional, Union

from xlt import __version__
from xlt.utils import log
from xlt.utils.errors import XltError
from xlt.utils.outputs import atomic_path, directory_for_outputs
from xlt.utils.textio import file_sha256, read_numbered_lines

RECIPE_FILES = Path(__file__).resolve().parent / "recipe_files"
DOWNLOAD_TIMEOUT_S = 60
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class RecipeFile:
    """One file of a data set, at ``path`` relative to the mirror and to the data directory."""

    path: str
    sha256: Optional[str]  # None: not pinned (fetched unverified)
    size: Optional[int] = None
    url: Optional[str] = None  # a byte-identical download; None where only the mirror has these bytes


@dataclass(frozen=True)
class PrepareStep:
    """``PREPARERS[function](inputs, output)``: derive ``output`` from already fetched files."""

    function: str
    inputs: tuple[str, ...]
    output: str
    sha256: Optional[str] = None  # known result of a deterministic conversion, checked after it


@dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    licence: str
    official_url: str
    in_all: bool
    files: tuple[RecipeFile, ...]
    prepare: tuple[PrepareStep, ...] = ()
    notes: str = ""
    source: str = field(default="", compare=False)  # the recipe file, for error messages

    def outputs(self) -> list[tuple[str, Optional[str], Optional[int]]]:
        """(path, sha256, size) of everything the recipe lays out, fetched files then prepared ones."""
        return [(f.path, f.sha256, f.size) for f in self.files] + [(p.output, p.sha256, None) for p in self.prepare]


# ---- locations -------------------------------------------------------------------------------
def recipes_dir() -> Path:
    return Path(os.environ.get("XLT_RECIPES") or RECIPE_FILES)


def data_dir() -> Path:
    """``XLT_DATA``, else the user cache (the repository's Makefile sets ``XLT_DATA=data``)."""
    if os.environ.get("XLT_DATA"):
        return Path(os.environ["XLT_DATA"])
    cache = os.environ.get("XDG_CACHE_HOME", "")
    # the XDG spec says to ignore a relative XDG_CACHE_HOME
    return (Path(cache) if os.path.isabs(cache) else Path.home() / ".cache") / "xlt"


def checkout_root() -> Optional[Path]:
    """The source checkout xlt runs from (an editable install), or None for an installed wheel."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def named_mirror(path: str) -> Path:
    """A mirror the user named (``XLT_DATA_MIRROR``, ``--mirror``): a typo is an error, not an empty
    mirror that sends every file to the official URLs."""
    if not os.path.isdir(path):
        raise XltError("no such mirror directory (XLT_DATA_MIRROR or --mirror; set it empty for none)", path)
    return Path(path)


def mirror_dir() -> Optional[Path]:
    """``XLT_DATA_MIRROR`` (empty: no mirror), else ``../shared/data`` beside the checkout if it exists."""
    if "XLT_DATA_MIRROR" in os.environ:
        value = os.environ["XLT_DATA_MIRROR"]
        return named_mirror(value) if value else None
    root = checkout_root()
    default = root.parent / "shared" / "data" if root is not None else None
    return default if default is not None and default.is_dir() else None


# ---- loading ---------------------------------------------------------------------------------
def load_recipes(directory: Optional[Path] = None) -> dict[str, Recipe]:
    """Every ``*.json`` recipe of ``directory``, validated, by name."""
    directory = Path(directory or recipes_dir())
    if not directory.is_dir():
        raise XltError("recipe directory not found", directory)
    recipes = {}
    for path in sorted(directory.glob("*.json")):
        recipe = _parse_recipe(path)
        if recipe.name in recipes:
            raise XltError(f"recipe name {recipe.name!r} is also used by {recipes[recipe.name].source}", path)
        recipes[recipe.name] = recipe
    return recipes


def _parse_recipe(path: Path) -> Recipe:
    def fail(what: str) -> XltError:
        return XltError(f"invalid recipe: {what}", path)

    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise fail(f"not JSON ({e})") from None
    if not isinstance(raw, dict):
        raise fail("not a JSON object")
    for key in ("name", "title", "licence", "official_url", "in_all", "files"):
        if key not in raw:
            raise fail(f"missing {key!r}")
    for key in ("files", "prepare"):
        entries = raw.get(key, [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise fail(f"{key!r} must be a list of objects")
    if not _NAME.fullmatch(str(raw["name"])) or raw["name"] == "all":
        raise fail(f"name {raw['name']!r} must be lower-case letters, digits and '_' (and not 'all')")

    def relative(p: object) -> str:
        if not isinstance(p, str) or not p or p.startswith("/") or ".." in p.split("/"):
            raise fail(f"path {p!r} must be relative, inside the data directory")
        return p

    def checksum(value: object) -> Optional[str]:
        if value is not None and not (isinstance(value, str) and _SHA256.fullmatch(value)):
            raise fail(f"sha256 {value!r} is not 64 lower-case hex digits or null")
        return value  # type: ignore[return-value]

    files = []
    for entry in raw["files"]:
        if "sha256" not in entry:
            raise fail(f"file {entry.get('path')!r} has no sha256 (write null if it is not known)")
        files.append(RecipeFile(relative(entry.get("path")), checksum(entry["sha256"]), entry.get("size"), entry.get("url")))
    steps = []
    available = {f.path for f in files}  # a step reads the recipe's files and earlier steps' outputs
    for entry in raw.get("prepare", []):
        if entry.get("function") not in PREPARERS:
            raise fail(f"unknown preparation function {entry.get('function')!r}; known: {', '.join(sorted(PREPARERS))}")
        step = PrepareStep(entry["function"], tuple(relative(p) for p in entry.get("inputs", [])),
                           relative(entry.get("output")), checksum(entry.get("sha256")))
        if unknown := [p for p in step.inputs if p not in available]:
            raise fail(f"{step.function} reads {', '.join(unknown)}, which the recipe does not fetch or prepare")
        available.add(step.output)
        steps.append(step)
    return Recipe(raw["name"], raw["title"], raw["licence"], raw["official_url"], bool(raw["in_all"]), tuple(files),
                  tuple(steps), raw.get("notes", ""), str(path))


def select(recipes: dict[str, Recipe], names: list[str]) -> list[Recipe]:
    """Recipes by name; ``all`` means every recipe marked ``in_all``; a path (``nli/snli/snli_dev.tsv``)
    the recipe that lays it out, so a Makefile asks for the file it needs, not for a recipe name."""
    laid_out = {path: r for r in recipes.values() for path, _, _ in r.outputs()}
    chosen: list[Recipe] = []
    for name in names:
        if name == "all":
            chosen += [r for r in recipes.values() if r.in_all]
        elif name in recipes:
            chosen.append(recipes[name])
        elif name in laid_out:
            chosen.append(laid_out[name])
        elif "/" in name:
            raise XltError(f"no recipe lays out {name!r}; `xlt data list` shows the {len(recipes)} recipes")
        else:
            raise XltError(f"unknown data set {name!r}; `xlt data list` shows the {len(recipes)} recipes")
    return list({r.name: r for r in chosen}.values())


# ---- fetching --------------------------------------------------------------------------------
@dataclass
class FetchReport:
    """What :func:`fetch` did, per outcome: lists of relative paths."""

    present: list[str] = field(default_factory=list)
    from_mirror: list[str] = field(default_factory=list)
    downloaded: list[str] = field(default_factory=list)
    prepared: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)


def fetch(names: list[str], data: Optional[Path] = None, mirror: Union[Path, None, Literal["env"]] = "env",
          recipes: Optional[dict[str, Recipe]] = None) -> FetchReport:
    """Lay out the named data sets (``all``: every ``in_all`` recipe) under ``data``; idempotent.

    ``data`` defaults to :func:`data_dir`, ``mirror`` (``None``: no mirror) to :func:`mirror_dir`
    and ``recipes`` to :func:`load_recipes`.

    Raises:
        XltError: unknown name; a file in neither source (naming it and where to get it); a copy
            whose sha256 differs from the recipe's; a preparation error.
    """
    data = Path(data or data_dir())
    mirror = mirror_dir() if mirror == "env" else mirror
    chosen = select(recipes if recipes is not None else load_recipes(), names)
    report = FetchReport()
    total = sum(len(r.files) + len(r.prepare) for r in chosen)
    with log.progress("fetch", total=total, unit="files") as bar:
        for recipe in chosen:
            for item in recipe.files:
                _fetch_file(recipe, item, data, mirror, report)
                bar.advance()
            for step in recipe.prepare:
                _prepare(recipe, step, data, report)
                bar.advance()
    return report


def _fetch_file(recipe: Recipe, item: RecipeFile, data: Path, mirror: Optional[Path], report: FetchReport) -> None:
    dest = data / item.path
    if dest.is_file() and (item.sha256 is None or file_sha256(dest) == item.sha256):
        report.present.append(item.path)
        return
    origin = mirror / item.path if mirror is not None and (mirror / item.path).is_file() else None
    # a file that cannot be had leaves no empty recipe folder behind (it would look half-fetched)
    with directory_for_outputs(dest.parent), atomic_path(dest) as tmp:
        if origin is not None:
            with open(origin, "rb") as src:
                got = _copy_hashing(src, tmp)
            where = str(origin)
        elif item.url:
            try:
                request = urllib.request.Request(item.url, headers={"User-Agent": f"xlt/{__version__}"})
                with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as response:
                    got = _copy_hashing(response, tmp)
                    expected = response.headers.get("Content-Length")
                # a connection closed early is a short read, not an error, to urllib: a file without a
                # checksum would be kept, cut, and counted as present ever after
                if expected is not None and expected.isdigit() and os.path.getsize(tmp) != int(expected):
                    raise XltError(f"download cut short: {os.path.getsize(tmp):,} of {int(expected):,} bytes; "
                                   "run the command again", item.url)
            except (OSError, ValueError) as e:  # URLError, HTTPError, timeouts and bad URLs are OSError/ValueError
                reason = f"HTTP {e.code} {e.reason}" if isinstance(e, urllib.error.HTTPError) else getattr(e, "reason", e)
                raise XltError(f"missing: not in the mirror ({_mirror_text(mirror)}) and {item.url} failed "
                               f"({reason}); get it from {recipe.official_url} "
                               f"(recipe {recipe.name})", item.path) from None
            where = item.url
        else:
            raise XltError(f"missing: not in the mirror ({_mirror_text(mirror)}) and no byte-identical download "
                           f"exists; get it from {recipe.official_url} (recipe {recipe.name}, see docs/data.md)",
                           item.path)
        if item.sha256 is not None and got != item.sha256:
            raise XltError(f"sha256 mismatch: got {got}, recipe {recipe.name} expects {item.sha256}", where)
    (report.from_mirror if origin is not None else report.downloaded).append(item.path)
    if item.sha256 is None:
        report.unverified.append(item.path)
        log.info(f"{item.path}: no checksum in recipe {recipe.name}; fetched unverified, sha256 {got}")


def _prepare(recipe: Recipe, step: PrepareStep, data: Path, report: FetchReport) -> None:
    inputs = [data / p for p in step.inputs]
    output = data / step.output
    newest_input = max((p.stat().st_mtime for p in inputs), default=0.0)
    if output.is_file() and output.stat().st_mtime >= newest_input and \
            (step.sha256 is None or file_sha256(output) == step.sha256):
        report.present.append(step.output)
        return
    with directory_for_outputs(output.parent), atomic_path(output) as tmp:
        PREPARERS[step.function](inputs, Path(tmp))
        if step.sha256 is not None and (got := file_sha256(Path(tmp))) != step.sha256:
            raise XltError(f"prepared file has sha256 {got}, recipe {recipe.name} expects {step.sha256} "
                           f"({step.function} or its input changed)", step.output)
    report.prepared.append(step.output)


def _copy_hashing(src: BinaryIO, dest: str) -> str:
    digest = hashlib.sha256()
    with open(dest, "wb") as out:
        for block in iter(lambda: src.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def _mirror_text(mirror: Optional[Path]) -> str:
    return str(mirror) if mirror is not None else "none: set XLT_DATA_MIRROR"


# ---- status ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecipeStatus:
    recipe: Recipe
    present: int  # outputs that exist with the recorded size (fetch verifies checksums)
    total: int
    size: Optional[int]  # bytes of the fetched files, None if some size is unknown


def status(recipes: dict[str, Recipe], data: Optional[Path] = None) -> list[RecipeStatus]:
    """A quick presence check per recipe (existence and size; no hashing)."""
    data = Path(data or data_dir())
    rows = []
    for recipe in recipes.values():
        outputs = recipe.outputs()
        present = sum((data / p).is_file() and (size is None or (data / p).stat().st_size == size)
                      for p, _, size in outputs)
        sizes = [f.size for f in recipe.files]
        rows.append(RecipeStatus(recipe, present, len(outputs), None if None in sizes else sum(sizes)))  # type: ignore[arg-type]
    return rows


# ---- preparation functions -------------------------------------------------------------------
MSRA_TAGS = {"o": None, "nr": "PER", "ns": "LOC", "nt": "ORG"}


def msra_wordtag_to_char_bio(inputs: list[Path], output: Path) -> None:
    """MSRA gold ``word/tag word/tag ...`` lines -> CoNLL two columns ``char<TAB>BIO``, blank line after each sentence.

    Each input line is one sentence; ``nr``/``ns``/``nt`` chunks become ``B-``/``I-`` PER/LOC/ORG
    over their characters, ``o`` chunks ``O``. Chunks are separated by single spaces.
    """
    (source,) = inputs
    with open(output, "w", encoding="utf-8", newline="\n") as out:
        for lineno, line in read_numbered_lines(source):
            chunks = [c for c in line.split(" ") if c]
            if not chunks:
                continue
            for chunk in chunks:
                text, slash, tag = chunk.rpartition("/")
                if not slash or not text or tag not in MSRA_TAGS:
                    raise XltError(f"expected word/tag with tag in {', '.join(MSRA_TAGS)}, got {chunk!r}", source, lineno)
                kind = MSRA_TAGS[tag]
                for i, char in enumerate(text):
                    out.write(f"{char}\t{'O' if kind is None else ('B-' if i == 0 else 'I-') + kind}\n")
            out.write("\n")


MNLI_TRAIN_MEMBER = "multinli_1.0/multinli_1.0_train.txt"


def mnli_train_tsv(inputs: list[Path], output: Path) -> None:
    """The official ``multinli_1.0.zip`` -> ``premise<TAB>hypothesis<TAB>label`` (the mnli_20k.tsv layout).

    Pairs without a gold label (``-``) are dropped; whitespace inside a sentence is collapsed.
    """
    (archive,) = inputs
    try:
        with zipfile.ZipFile(archive) as z, z.open(MNLI_TRAIN_MEMBER) as member, \
                open(output, "w", encoding="utf-8", newline="\n") as out:
            lines = enumerate(io.TextIOWrapper(member, encoding="utf-8", newline="\n"), start=1)
            _, header = next(lines, (1, ""))
            columns = header.rstrip("\r\n").split("\t")
            try:
                label, premise, hypothesis = (columns.index(c) for c in ("gold_label", "sentence1", "sentence2"))
            except ValueError:
                raise XltError(f"{MNLI_TRAIN_MEMBER} has no gold_label/sentence1/sentence2 header", archive, 1) from None
            for lineno, line in lines:
                fields = line.rstrip("\r\n").split("\t")
                if len(fields) != len(columns):
                    raise XltError(f"{MNLI_TRAIN_MEMBER}: expected {len(columns)} columns, got {len(fields)}", archive, lineno)
                if fields[label] != "-":
                    out.write(f"{' '.join(fields[premise].split())}\t{' '.join(fields[hypothesis].split())}\t{fields[label]}\n")
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError) as e:
        raise XltError(f"cannot read the MNLI archive ({e})", archive) from None


PREPARERS: dict[str, Callable[[list[Path], Path], None]] = {
    "msra_wordtag_to_char_bio": msra_wordtag_to_char_bio,
    "mnli_train_tsv": mnli_train_tsv,
}

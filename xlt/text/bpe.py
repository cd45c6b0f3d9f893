"""Byte-pair encoding with fastBPE's formats: learn codes, apply them, count vocabularies, compare languages.

Every output is byte-identical to fastBPE's (docs/bpe.md gives the full reasoning):

* ``learn`` and the vocabularies run in-process (:mod:`xlt.text.bpe_learn`), which reproduces
  ``fast learnbpe``'s tie-breaking, so any install works without the compiled tool and codes
  learned by XLM users work here and ours there.
* ``apply`` on a plain file runs ``fast applybpe`` (multi-threaded C++) when that tool is installed
  (``make install`` compiles it); otherwise, and for stdin or compressed input, it streams through
  fastBPE's Python binding, with the same output.

What xlt adds: inputs are checked first (strict UTF-8 with line numbers, the codes and vocabulary
formats), because fastBPE aborts or silently misbehaves on bad files; several, compressed or stdin
inputs are accepted; outputs are atomic; fastBPE's log stays hidden unless it fails. Two deliberate
differences, both where fastBPE's own output is broken:

* a file without a final newline: fastBPE drops its last word (learn, getvocab, applybpe); xlt keeps it,
  i.e. xlt's output is fastBPE's on the file with the newline added (for apply: without adding one).
* more merges than the corpus allows: fastBPE then repeats a zero-count merge, which its own applybpe
  refuses to read; xlt stops after the last real merge and says so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from typing import BinaryIO, Iterator, Optional, Sequence

from xlt.text.bpe_apply import PythonApplier
from xlt.text.bpe_learn import count_words, learn_merges, sorted_vocabulary, vocabulary_lines
from xlt.text.fastbpe import check_inputs, copy_to, corpus_feed, find_fast_tool, run_fast, text_blocks
from xlt.text.tokenize import check_language
from xlt.text.vocab import SIDECAR_SUFFIX, Vocabulary
from xlt.utils import log
from xlt.utils.errors import PathLike, XltError, require_file
from xlt.utils.outputs import atomic_output, atomic_path, special_file
from xlt.utils.textio import read_lines, with_data

WORD_CACHE_LIMIT = 200_000     # distinct words remembered by BPE.apply (bounded memory)


# ---- learn -----------------------------------------------------------------------------------
def learn(corpora: Sequence[PathLike], merges: int, output: Optional[PathLike] = None) -> int:
    """Learn BPE codes jointly over ``corpora``, byte-identical to ``fast learnbpe MERGES a b ...``.

    Args:
        corpora: text files (plain, .gz, .xz, ``-``); several are learned on jointly.
        merges: number of merges (the paper: 80000 joint, 40000 per language).
        output: the codes file (``a b count`` per line); ``None``/``-`` for stdout.

    Returns:
        The number of merges written (fewer than ``merges`` only if the corpus runs out of pairs).
    """
    if not 1 <= merges < 2 ** 31:  # fastBPE reads the count with std::stoi (a C int)
        raise XltError(f"the number of merges must be between 1 and 2^31 - 1, not {merges}")
    corpora = check_inputs(corpora, "corpus")
    counts = count_words(corpus_feed(corpora))
    written = 0
    with tempfile.TemporaryFile() as codes, log.progress("learning BPE merges", total=merges) as bar:
        for left, right, count in learn_merges(counts, merges):
            codes.write(f"{left} {right} {count}\n".encode("utf-8"))
            written += 1
            if written % 500 == 0:
                bar.update(completed=written)
        if written == 0:
            raise XltError("nothing to merge: every word of the corpus is a single character",
                           corpora[0] if len(corpora) == 1 else None)
        copy_to(output, codes)
        bar.update(completed=merges)
    if written < merges:
        log.info(f"the corpus allows only {written} merges of the {merges} asked for; wrote {written}")
    return written


# ---- vocabularies ----------------------------------------------------------------------------
def _getvocab(paths: Sequence[str], out: BinaryIO) -> None:
    out.writelines(vocabulary_lines(count_words(corpus_feed(paths))))


def count_vocabulary(paths: Sequence[PathLike]) -> Vocabulary:
    """Token counts of BPE'd text, as ``fast getvocab`` counts and sorts them."""
    ranked = sorted_vocabulary(count_words(corpus_feed(check_inputs(paths, "input"))))
    tokens, counts = [t.decode("utf-8") for t, _ in ranked], [c for _, c in ranked]
    return Vocabulary(tokens, counts)


def build_vocabulary(inputs: Sequence[PathLike], output: Optional[PathLike] = None,
                     languages: Sequence[str] = ()) -> None:
    """Write the vocabulary (``token count``) of BPE'd text, byte-identical to ``fast getvocab``.

    Args:
        inputs: BPE'd text files; any number (``fast getvocab`` takes at most two).
        output: the vocabulary file, ``None``/``-`` for stdout.
        languages: one language per input, in order (optional). Then the vocabulary also gets its
            ownership sidecar: a token belongs to every language whose inputs contain it.
    """
    inputs = check_inputs(inputs, "input")
    if not languages:
        with tempfile.TemporaryFile() as raw:
            _getvocab(inputs, raw)
            copy_to(output, raw)
        if output is not None and os.fspath(output) != "-":  # a stale sidecar would no longer match
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.fspath(output) + SIDECAR_SUFFIX)
        return
    if len(languages) != len(inputs):
        raise XltError(f"{len(languages)} --lang for {len(inputs)} inputs; give one language per input, in order")
    for lang in languages:
        check_language(lang)
    if output is None or os.fspath(output) == "-":
        raise XltError("a vocabulary with languages needs -o FILE (its ownership sidecar goes beside it)")
    order = list(dict.fromkeys(languages))
    per_language = [(lang, count_vocabulary([p for p, l in zip(inputs, languages) if l == lang])) for lang in order]
    Vocabulary.union(per_language).save(output)


# ---- apply -----------------------------------------------------------------------------------
def check_codes(path: PathLike) -> str:
    """Check a fastBPE codes file (``left right count`` per line) as fastBPE's asserts would."""
    path = require_file(path, "codes file")
    pairs: set[tuple[str, str]] = set()
    merged: set[str] = set()
    lineno = 0
    for lineno, line in enumerate(read_lines(path), start=1):
        parts = line.split(" ")
        if len(parts) != 3 or not all(parts) or not (parts[2].isascii() and parts[2].isdigit()):
            hint = " (a subword-nmt '#version' header? fastBPE codes have none)" if line.startswith("#version") else ""
            raise XltError(f"malformed codes line, expected 'left right count'{hint}", path, lineno)
        pair, token = (parts[0], parts[1]), parts[0] + parts[1]
        if pair in pairs or token in merged:
            raise XltError(f"the merge {parts[0]} {parts[1]} -> {token} repeats an earlier line", path, lineno)
        pairs.add(pair)
        merged.add(token)
    if lineno == 0:
        raise XltError("empty codes file", path)
    return path


@contextlib.contextmanager
def vocabulary_limit(vocab: Optional[PathLike], threshold: Optional[int] = None) -> Iterator[str]:
    """The checked vocabulary file fastBPE should limit its output to ('' for none).

    With ``threshold``, only entries whose count is at least ``threshold`` are kept (a temporary file).
    """
    if vocab is None:
        if threshold is not None:
            raise XltError("--vocab-threshold needs --vocab")
        yield ""
        return
    loaded = Vocabulary.load(vocab)
    if loaded.prefix_lang:
        raise XltError("is a language-prefixed (No anchors) vocabulary; limit apply with the language's own "
                       "vocabulary", vocab)
    if threshold is None or threshold <= min(loaded.counts):
        yield os.fspath(vocab)
        return
    kept = [f"{t} {c}\n" for t, c in zip(loaded.tokens, loaded.counts) if c >= threshold]
    if not kept:
        raise XltError(f"no vocabulary entry has a count of at least {threshold}", vocab)
    with tempfile.TemporaryDirectory() as tmp:
        limited = os.path.join(tmp, "vocab")
        with open(limited, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(kept)
        yield limited


@contextlib.contextmanager
def _native_stderr_hidden() -> Iterator[None]:
    """Send what C++ code prints on file descriptor 2 to a temporary file for the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class BPE:
    """Apply BPE codes in-process, exactly as ``xlt bpe apply`` (and ``fast applybpe``) would.

    Example::

        bpe = BPE("codes", "vocab")
        bpe.apply(["the cats sat ."])   # -> ["the c@@ ats sat ."]

    Lines are split on single spaces like fastBPE's file mode, so runs of spaces and leading or
    trailing spaces are kept as they are; a line must not contain ``\\n``. Words are cached (at most
    :data:`WORD_CACHE_LIMIT`), since running text repeats them. The words go through fastBPE's
    Python binding when it is installed (``make install``), else through
    :class:`~xlt.text.bpe_apply.PythonApplier`, with the same output.
    """

    def __init__(self, codes_path: PathLike, vocab_path: Optional[PathLike] = None,
                 vocab_threshold: Optional[int] = None, native: Optional[bool] = None):
        """``native``: True requires fastBPE's binding, False avoids it, None uses it when installed."""
        codes = check_codes(codes_path)
        with vocabulary_limit(vocab_path, vocab_threshold) as vocab:
            if native is not False and _binding_available(required=bool(native)):
                import fastBPE

                with _native_stderr_hidden():
                    self._applier = fastBPE.fastBPE(codes, vocab)
            else:
                self._applier = PythonApplier(codes, vocab or None)
        self._cache: dict[str, str] = {"": ""}

    def apply(self, lines: Sequence[str]) -> list[str]:
        """BPE every line: ``["the cats"] -> ["the c@@ ats"]``."""
        split = [line.split(" ") for line in lines]
        cache = self._cache
        new = {w for words in split for w in words if w not in cache}
        if len(cache) + len(new) > WORD_CACHE_LIMIT:
            cache.clear()
            cache[""] = ""
            new = {w for words in split for w in words if w}
        if new:
            words = list(new)
            cache.update(zip(words, self._applier.apply(words)))
        return [" ".join([cache[w] for w in words]) for words in split]


def _binding_available(required: bool) -> bool:
    try:
        import fastBPE  # noqa: F401  (compiled; a plain `pip install` of xlt may lack it)
    except ImportError:
        if required:
            raise XltError("fastBPE's Python binding is not installed (make install builds it)") from None
        return False
    return True


def _is_plain_file(path: str) -> bool:
    """A regular uncompressed file, which fastBPE can map into memory (not a pipe like ``<(zcat ...)``)."""
    return path != "-" and not path.endswith((".gz", ".xz")) and os.path.isfile(path)


@contextlib.contextmanager
def _output_path(output: Optional[PathLike]) -> Iterator[str]:
    """A path for a tool to write: renamed to ``output`` on success, or copied to stdout or to a
    device or pipe given as ``output`` (fastBPE truncates its output file, which /dev/null refuses)."""
    to_stdout = output is None or os.fspath(output) == "-"
    if not to_stdout and not special_file(os.fspath(output)):
        with atomic_path(output) as tmp:
            yield tmp
        return
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = os.path.join(tmp_dir, "bpe")
        yield tmp
        with open(tmp, "rb") as f, atomic_output(output, "wb") as out:
            shutil.copyfileobj(f, out)


def apply(codes: PathLike, input: PathLike = "-", output: Optional[PathLike] = None,
          vocab: Optional[PathLike] = None, vocab_threshold: Optional[int] = None) -> None:
    """Write ``input`` with BPE applied (``@@ `` between the pieces of a word), like ``fast applybpe``.

    A plain file goes through ``fast applybpe`` itself (multi-threaded, fastBPE's speed) when the
    tool is installed; otherwise, and for stdin and .gz/.xz inputs, the text streams through the Python binding in blocks (constant memory). Both give the same
    bytes, whitespace included.

    Args:
        codes: fastBPE codes file.
        input: text file, or ``-`` for stdin.
        output: output file, or ``None``/``-`` for stdout.
        vocab: limit the output to subwords of this vocabulary (pieces not in it are split further).
        vocab_threshold: keep only vocabulary entries with a count of at least this.
    """
    codes = check_codes(codes)
    input = require_file(input, "input")
    with vocabulary_limit(vocab, vocab_threshold) as vocab_file:
        if _is_plain_file(input) and (tool := find_fast_tool()) is not None:
            _apply_file(tool, codes, input, output, vocab_file)
            return
        bpe = BPE(codes, vocab_file or None)
        with atomic_output(output, "wb") as out:
            for block in with_data(text_blocks(input), input):
                out.write("\n".join(bpe.apply(block.decode("utf-8").split("\n"))).encode("utf-8"))


def _apply_file(tool: str, codes: str, input: str, output: Optional[PathLike], vocab_file: str) -> None:
    """``fast applybpe`` on a plain file, plus the last word that it drops when there is no final newline."""
    last = b""
    for block in with_data(text_blocks(input), input):  # checks the whole file is UTF-8 before fastBPE sees it
        last = block
    tail = last[max(last.rfind(b" "), last.rfind(b"\n")) + 1:]
    with _output_path(output) as tmp:
        if os.path.getsize(input) > len(tail):  # fastBPE fails on an output of zero bytes
            args = ["applybpe", tmp, input, codes] + ([vocab_file] if vocab_file else [])
            named = output if output is not None and os.fspath(output) != "-" else tmp
            run_fast(args, subprocess.DEVNULL, tool=tool, output=(tmp, named))
        with open(tmp, "ab") as out:
            if tail:
                out.write(BPE(codes, vocab_file or None).apply([tail.decode("utf-8")])[0].encode("utf-8"))

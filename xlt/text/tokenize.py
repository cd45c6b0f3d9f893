"""Word tokenization as XLM prepared its data: Moses normalization and tokenization, jieba for Chinese.

For every language but Chinese, one line goes through the same steps as XLM's ``tools/tokenize.sh``
(``replace-unicode-punctuation.perl | normalize-punctuation.perl -l L | remove-non-printing-char.perl
| tokenizer.perl -no-escape -l L``), using the sacremoses ports of those scripts:

1. :class:`sacremoses.MosesPunctNormalizer` with ``pre_replace_unicode_punct=True`` (the first
   script) and ``perl_parity=True`` (the Perl normalizer's exact substitutions);
2. every ``\\p{C}`` character (control, format, private-use, unassigned) becomes a space, as the
   Perl script does. sacremoses' own ``post_remove_control_chars`` *deletes* them instead, which
   would glue ``word<TAB>word`` into one word, so it is not used;
3. :class:`sacremoses.MosesTokenizer` with ``escape=False``.

Chinese (``zh``) is segmented by jieba, which stands in for the Stanford segmenter XLM ran on raw
text: only step 2 applies before it (full-width punctuation stays full-width, as with XLM), and
jieba's whitespace tokens are dropped. Optional lowercasing and accent removal come last, as XLM's
``lowercase_and_remove_accent.py`` ran after tokenization.

A tokenized line never contains a line break: Moses collapses every ``\\s`` run (U+2028, U+0085,
``\\x0b`` ...) into one space and deletes ``\\r``; the jieba path splits on all Unicode whitespace.
So the output always has exactly as many lines as the input.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import time
import unicodedata
from collections import deque
from dataclasses import asdict, dataclass, field, fields
from importlib.metadata import version
from itertools import chain, islice
from multiprocessing.pool import AsyncResult
from typing import Iterable, Iterator, Optional

import regex

from xlt.text.fake import FAKE, PERMUTED
from xlt.text.fake import to_english as _to_english
from xlt.text.fake import to_fake as _to_fake
from xlt.utils import log
from xlt.utils.errors import PathLike, XltError
from xlt.utils.outputs import atomic_output, write_json
from xlt.utils.processes import die_with
from xlt.utils.textio import read_json, read_lines, with_data

#: Languages segmented by jieba instead of the Moses tokenizer.
JIEBA_LANGUAGES = frozenset({"zh"})
#: Fake-English (xlt.text.fake): tokenized by English's rules on its English original.
FAKE_LANGUAGES = frozenset({FAKE, PERMUTED})


@functools.lru_cache(maxsize=None)
def supported_languages() -> tuple[str, ...]:
    """Language codes sacremoses has non-breaking prefixes for (``zh`` among them, served by jieba).

    Any other code would silently fall back to English prefixes inside sacremoses, so it is refused.
    """
    from sacremoses.corpus import NonbreakingPrefixes

    return tuple(sorted(set(NonbreakingPrefixes().available_langs.values()) | JIEBA_LANGUAGES | FAKE_LANGUAGES))


def check_language(lang: str) -> None:
    """A one-line error unless ``lang`` is a code xlt tokenizes (every later stage takes the same codes)."""
    accepted = supported_languages()
    if lang not in accepted:
        raise XltError(f"unknown language {lang!r} (accepted: {' '.join(accepted)})")


@dataclass(frozen=True)
class TokenizerConfig:
    """How one language's text is tokenized (a run directory records these fields per language in text.json,
    so later stages process new text alike)."""

    lang: str = field(metadata={"help": "ISO code of the text's language (see supported_languages())."})
    lowercase: bool = field(default=False, metadata={"help": "Lowercase after tokenization."})
    remove_accents: bool = field(default=False, metadata={
        "help": "After tokenization: NFD, then drop combining marks (Unicode category Mn), as XLM does."})

    def __post_init__(self) -> None:
        check_language(self.lang)

    @property
    def backend(self) -> str:
        return "jieba" if self.lang in JIEBA_LANGUAGES else "moses"

    def to_dict(self) -> dict:
        """The settings plus the library versions that produced the text (informational)."""
        library = "jieba" if self.backend == "jieba" else "sacremoses"
        return {**asdict(self), "backend": self.backend, "library_versions": {library: version(library)}}

    @classmethod
    def from_dict(cls, data: dict, path: Optional[PathLike] = None) -> "TokenizerConfig":
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or "lang" not in data:
            raise XltError("tokenizer config must be a JSON object with a 'lang' key", path)
        unknown = set(data) - names - {"backend", "library_versions"}
        if unknown:
            raise XltError(f"unknown tokenizer setting(s): {', '.join(sorted(unknown))}", path)
        if not isinstance(data.get("library_versions") or {}, dict):
            raise XltError("tokenizer config: 'library_versions' must be an object (library -> version)", path)
        config = cls(**{k: v for k, v in data.items() if k in names})
        for library, saved in (data.get("library_versions") or {}).items():
            if saved != version(library):
                log.info(f"note: text was tokenized with {library} {saved}, this is {version(library)}")
        return config

    def save(self, path: PathLike) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: PathLike) -> "TokenizerConfig":
        return cls.from_dict(read_json(path, "tokenizer config"), path)


# Perl's \p{C}: Cc, Cf, Co, Cs and Cn. remove-non-printing-char.perl turns each into a space.
_NON_PRINTING = regex.compile(r"\p{C}")


def replace_non_printing(text: str) -> str:
    return _NON_PRINTING.sub(" ", text)


def strip_accents(text: str) -> str:
    """XLM's ``run_strip_accents``: NFD, then drop nonspacing marks (no recomposition, as in XLM)."""
    return "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")


class Tokenizer:
    """Tokenizes one line at a time, in-process.

    Example::

        >>> Tokenizer("en").tokenize("Hello, world!")
        'Hello , world !'
    """

    def __init__(self, lang: str, lowercase: bool = False, remove_accents: bool = False):
        self.config = TokenizerConfig(lang, lowercase, remove_accents)
        # Fake-English goes back to English, through English's rules, and forth again: its private-use
        # characters would otherwise be non-printing to Moses (and blanked).
        self._fake = lang in FAKE_LANGUAGES
        rules = "en" if self._fake else lang
        if self.config.backend == "jieba":
            self._segmenter = _jieba_segmenter()
        else:
            from sacremoses import MosesPunctNormalizer, MosesTokenizer

            self._normalizer = MosesPunctNormalizer(rules, pre_replace_unicode_punct=True, perl_parity=True)
            self._moses = MosesTokenizer(rules)

    @classmethod
    def from_config(cls, config: TokenizerConfig) -> "Tokenizer":
        return cls(config.lang, config.lowercase, config.remove_accents)

    def tokenize(self, line: str) -> str:
        """One line of raw text -> its tokens joined by single spaces (never a line break)."""
        if self._fake:
            return _to_fake(self._tokenize(_to_english(line)))
        return self._tokenize(line)

    def _tokenize(self, line: str) -> str:
        if self.config.backend == "jieba":
            text = replace_non_printing(line)
            text = " ".join(word for piece in self._segmenter.cut(text, HMM=True) for word in piece.split())
        else:
            text = replace_non_printing(self._normalizer.normalize(line))
            text = self._moses.tokenize(text, escape=False, return_str=True)
        if self.config.lowercase:
            text = text.lower()
        if self.config.remove_accents:
            text = strip_accents(text)
        return text


@functools.lru_cache(maxsize=None)
def _jieba_segmenter():
    """A private, eagerly initialized jieba tokenizer, shared by this process's Tokenizers (it is read-only).

    A private instance (not ``jieba.dt``) so that words another module adds to jieba's global
    dictionary cannot change our segmentation; jieba's exact-mode cut with its HMM is otherwise
    deterministic. Its loading messages go to its own stderr logger, which is raised to WARNING.
    """
    import jieba

    jieba.setLogLevel(logging.WARNING)
    segmenter = jieba.Tokenizer()
    segmenter.initialize()
    return segmenter


# --- streaming, optionally over worker processes -------------------------------------------------

_worker_tokenizer: Optional[Tokenizer] = None


def _init_worker(config: TokenizerConfig, parent: int) -> None:
    global _worker_tokenizer
    die_with(parent)  # a parent killed outright would leave its pool working on
    _worker_tokenizer = Tokenizer.from_config(config)


def _tokenize_chunk(lines: list[str]) -> list[str]:
    assert _worker_tokenizer is not None, "worker used before its initializer ran"
    return [_worker_tokenizer.tokenize(line) for line in lines]


def chunked(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    iterator = iter(lines)
    while chunk := list(islice(iterator, size)):
        yield chunk


def tokenize_chunks(chunks: Iterable[list[str]], config: TokenizerConfig, workers: int = 1) -> Iterator[list[str]]:
    """Tokenize chunks of lines, in order, with ``workers`` processes (1: in this process).

    At most ``4 * workers`` chunks are in flight, so memory stays constant however long the input:
    ``Pool.imap`` would not do, since its feeder thread reads the whole input as fast as it can.
    The pool is forked before the caller starts any progress-bar thread, and the main process only
    reads and writes, so the workers are the bottleneck.
    """
    if workers < 1:
        raise XltError(f"--workers must be at least 1, got {workers}")
    if workers == 1:
        tokenizer = Tokenizer.from_config(config)
        for chunk in chunks:
            yield [tokenizer.tokenize(line) for line in chunk]
        return
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = multiprocessing.get_context(method).Pool(workers, _init_worker, (config, os.getpid()))
    try:
        pending: deque[AsyncResult] = deque()
        for chunk in chunks:
            pending.append(pool.apply_async(_tokenize_chunk, (chunk,)))
            if len(pending) >= 4 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
    except BaseException as stopped:
        # An error in the input (a line that is not UTF-8) or a caller that stops reading: the few
        # chunks in flight finish and the workers leave by close/join below. Pool.terminate (what
        # `with Pool` does) once left a worker waiting forever for the task queue's lock, which
        # terminate takes first, and the command hung (2026-12-04, a test's --workers 2 run). SIGTERM
        # and Ctrl-C do not wait for the chunks in flight.
        if not isinstance(stopped, (Exception, GeneratorExit)):
            pool.terminate()
        raise
    finally:
        pool.close()
        pool.join()


def tokenize_lines(lines: Iterable[str], config: TokenizerConfig, workers: int = 1,
                   chunk_lines: int = 256) -> Iterator[str]:
    """Tokenize a stream of lines (without line endings), yielding one output line per input line."""
    for chunk in tokenize_chunks(chunked(lines, chunk_lines), config, workers):
        yield from chunk


def tokenize_file(input_path: PathLike, output_path: Optional[PathLike], config: TokenizerConfig,
                  workers: int = 1, chunk_lines: int = 256) -> int:
    """Tokenize ``input_path`` (plain/.gz/.xz, ``-`` = stdin) into ``output_path`` atomically.

    Returns:
        the number of lines written (always the number of lines read).
    """
    count = 0
    text_lines = 0   # lines with something on them that should keep a token

    def counted(lines: Iterable[str]) -> Iterator[str]:
        nonlocal text_lines
        for line in lines:
            # not whitespace, nor a format character alone (a BOM, a zero-width space): those lines are blank
            text_lines += any(not c.isspace() and unicodedata.category(c) != "Cf" for c in line)
            yield line

    chunks = tokenize_chunks(chunked(counted(with_data(read_lines(input_path), input_path)), chunk_lines), config,
                             workers)
    with atomic_output(output_path) as out:
        # Fork the worker pool (first chunk) before the progress bar starts its refresh thread.
        first = next(chunks, None)
        kept = 0
        with log.progress(f"tokenize {config.lang}", unit="lines") as bar:
            start = time.monotonic()
            for chunk in chain([] if first is None else [first], chunks):
                out.write("\n".join(chunk) + "\n")
                count += len(chunk)
                kept += sum(bool(line) for line in chunk)
                bar.advance(len(chunk))
                bar.update(status=f"{count / max(time.monotonic() - start, 1e-9):,.0f} lines/s")
        # Moses' step blanks Unicode's category C (XLM's remove-non-printing-char): a file in a script
        # made of such characters (Fake-English's private-use plane) would become blank lines, silently.
        # (On stdout the lines have gone out by now; a file is not written.)
        blanked = text_lines - kept
        if blanked and not kept:
            raise XltError(f"every line tokenizes to nothing as {config.lang} (its characters are control, "
                           "private-use or unassigned ones, which the tokenizer blanks; give Fake-English as "
                           "--lang fake)", input_path)
        if blanked:
            log.info(f"note: {blanked:,} of {text_lines:,} lines tokenize to nothing as {config.lang} "
                     "(control, private-use or unassigned characters only): blank lines out")
    return count

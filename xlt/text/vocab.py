"""Vocabularies: fastBPE's ``token count`` file plus which languages own each token.

The vocabulary file itself stays byte-compatible with fastBPE (``fast getvocab`` writes it and
``fast applybpe`` reads it). Language ownership, which the anchor-point ablations and same-language
random replacement need, lives in a JSON sidecar ``<vocab>.langs.json``::

    {"format": "xlt-vocab-langs/1", "languages": ["en", "fr"], "prefix_lang": false,
     "vocab_sha256": "...", "owners": [3, 1, 2, ...]}

``owners[i]`` is a bit mask over ``languages`` for the i-th line of the vocabulary file. A
vocabulary without a sidecar is language-agnostic (every token owned by every language).

Model ids put the special tokens first, in :data:`SPECIALS` order, then the vocabulary lines in
file order; :attr:`Vocabulary.sha256` identifies the file so a token store or model trained on
another vocabulary is refused rather than silently remapped.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from xlt.utils.errors import PathLike, XltError, require_file
from xlt.utils.outputs import check_output_paths, json_text, written_together
from xlt.utils.textio import file_sha256, read_json, read_lines

BOS, EOS, PAD, UNK, MASK = "<s>", "</s>", "<pad>", "<unk>", "<mask>"
SPECIALS = (BOS, EOS, PAD, UNK, MASK)
BOS_ID, EOS_ID, PAD_ID, UNK_ID, MASK_ID = range(len(SPECIALS))  # ids 0-4, first in every embedding table
SIDECAR_SUFFIX = ".langs.json"
SIDECAR_FORMAT = "xlt-vocab-langs/1"


@dataclass
class Vocabulary:
    """Tokens (file order), their counts, and per-token language ownership masks.

    Attributes:
        tokens: vocabulary entries in file order (specials not included).
        counts: the count column of the file.
        languages: language codes that the ownership masks refer to (empty: language-agnostic).
        owners: one bit mask per token over ``languages``.
        prefix_lang: every token carries its language (``en:cat``), so no token is shared.
        sha256: checksum of the vocabulary file this was read from (or would be written as).
    """

    tokens: list[str]
    counts: list[int]
    languages: list[str] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)
    prefix_lang: bool = False
    sha256: str = ""

    def __post_init__(self) -> None:
        for lang in self.languages:
            # Codes become file names, prefixes (fr:chat) and comma lists downstream.
            if not lang or any(c.isspace() or c in ":,/" for c in lang):
                raise XltError(f"{lang!r} is not a language code (no spaces, ':', ',' or '/')")
        self._index = {t: i + len(SPECIALS) for i, t in enumerate(self.tokens)}
        if not self.sha256:
            self.sha256 = hashlib.sha256(self.file_text().encode("utf-8")).hexdigest()

    # ---- ids ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Size of the model's embedding table: specials plus entries."""
        return len(SPECIALS) + len(self.tokens)

    def index(self, token: str) -> int:
        return self._index.get(token, UNK_ID)

    def encode(self, tokens: Sequence[str], lang: str) -> list[int]:
        """Model ids of a sentence's subword tokens; unknown tokens map to ``<unk>``."""
        if self.prefix_lang:
            return [self._index.get(f"{lang}:{t}", UNK_ID) for t in tokens]
        return [self._index.get(t, UNK_ID) for t in tokens]

    def token(self, idx: int) -> str:
        return SPECIALS[idx] if idx < len(SPECIALS) else self.tokens[idx - len(SPECIALS)]

    # ---- ownership ---------------------------------------------------------------------------
    def language_ids(self, lang: str) -> list[int]:
        """Model ids of the tokens owned by ``lang`` (all tokens for a language-agnostic vocabulary)."""
        if not self.languages:
            return list(range(len(SPECIALS), len(self)))
        if lang not in self.languages:
            raise XltError(f"unknown language {lang!r}; the vocabulary has {', '.join(self.languages)}")
        bit = 1 << self.languages.index(lang)
        return [i + len(SPECIALS) for i, m in enumerate(self.owners) if m & bit]

    def shared_tokens(self, a: str, b: str) -> list[str]:
        both = (1 << self.languages.index(a)) | (1 << self.languages.index(b))
        return [t for t, m in zip(self.tokens, self.owners) if m & both == both]

    # ---- files -------------------------------------------------------------------------------
    def file_text(self) -> str:
        return "".join(f"{t} {c}\n" for t, c in zip(self.tokens, self.counts))

    @classmethod
    def load(cls, path: PathLike) -> "Vocabulary":
        """Read a fastBPE vocabulary and its ownership sidecar if there is one."""
        path = require_file(path, "vocabulary")
        tokens, counts, seen = [], [], set()
        for lineno, line in enumerate(read_lines(path), start=1):
            parts = line.split(" ")
            # ASCII digits only: fastBPE parses the count with std::stoi, which aborts on others.
            if len(parts) != 2 or not parts[0] or not (parts[1].isascii() and parts[1].isdigit()):
                raise XltError("malformed vocabulary line, expected 'token count'", path, lineno)
            if parts[0] in seen:  # fastBPE asserts on this; ids would silently collide
                raise XltError(f"duplicate vocabulary entry {parts[0]!r}", path, lineno)
            seen.add(parts[0])
            tokens.append(parts[0])
            counts.append(int(parts[1]))
        if not tokens:
            raise XltError("empty vocabulary", path)
        vocab = cls(tokens, counts, sha256=file_sha256(path))
        sidecar = os.fspath(path) + SIDECAR_SUFFIX
        if os.path.exists(sidecar):
            vocab._read_sidecar(sidecar)
        return vocab

    def _read_sidecar(self, sidecar: str) -> None:
        meta = read_json(sidecar, "vocabulary ownership sidecar", format=SIDECAR_FORMAT)
        languages, owners = meta.get("languages"), meta.get("owners")
        if not isinstance(languages, list) or not isinstance(owners, list):
            raise XltError("ownership sidecar without its 'languages' and 'owners' lists", sidecar)
        if meta.get("vocab_sha256") != self.sha256 or len(owners) != len(self.tokens):
            raise XltError("ownership sidecar does not match its vocabulary file (was the vocabulary edited?)", sidecar)
        # a hand-edited sidecar: "prefix_lang": "yes" would read every token as <unk>
        prefix_lang = meta.get("prefix_lang", False)
        if not all(isinstance(l, str) and l for l in languages) or len(set(languages)) != len(languages):
            raise XltError(f"ownership sidecar: 'languages' must be distinct language codes, got {languages!r}", sidecar)
        bad = [o for o in owners if isinstance(o, bool) or not isinstance(o, int) or not 0 <= o < 1 << len(languages)]
        if bad or not isinstance(prefix_lang, bool):
            what = f"owner {bad[0]!r} is not a set of its {len(languages)} languages" if bad else \
                f"'prefix_lang' {prefix_lang!r} is not true or false"
            raise XltError(f"ownership sidecar: {what}", sidecar)
        self.languages, self.owners, self.prefix_lang = languages, owners, prefix_lang

    def save(self, path: PathLike) -> None:
        """Write the fastBPE file (atomically) and, if ownership is known, its sidecar."""
        text = self.file_text()
        sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
        texts = {os.fspath(path): text}   # the vocabulary renamed last: its old sidecar never passes as the new one's
        if self.languages:
            texts[os.fspath(path) + SIDECAR_SUFFIX] = json_text({
                "format": SIDECAR_FORMAT, "languages": self.languages, "prefix_lang": self.prefix_lang,
                "vocab_sha256": sha256, "owners": self.owners})
            check_output_paths(*texts)   # both or neither: a sidecar in the way is found before the vocabulary
        with written_together(texts):
            pass
        self.sha256 = sha256

    @classmethod
    def from_counts(cls, counts: dict[str, int], languages: Sequence[str] = (),
                    owners: Optional[dict[str, int]] = None, prefix_lang: bool = False) -> "Vocabulary":
        """Build a vocabulary sorted as ``fast getvocab`` sorts: count descending, then bytewise token.

        Python compares ``str`` by code point, which for UTF-8 is the same order as bytes.
        """
        order = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        tokens = [t for t, _ in order]
        return cls(tokens, [c for _, c in order], list(languages),
                   [owners[t] for t in tokens] if owners is not None else [], prefix_lang)

    @classmethod
    def union(cls, per_language: Sequence[tuple[str, "Vocabulary"]], prefix_lang: bool = False) -> "Vocabulary":
        """One vocabulary over several languages' vocabularies, sorted as ``fast getvocab`` sorts.

        A token in several languages gets the sum of its counts and all of their ownership bits
        (the paper's *Default anchors*). With ``prefix_lang`` each entry becomes ``lang:token``,
        owned by its language alone, so no entry is shared (*No anchors*).
        """
        languages = [lang for lang, _ in per_language]
        if len(set(languages)) != len(languages):
            raise XltError(f"a language is given more than once: {', '.join(languages)}")
        counts: dict[str, int] = {}
        owners: dict[str, int] = {}
        for bit, (lang, vocab) in enumerate(per_language):
            for token, count in zip(vocab.tokens, vocab.counts):
                entry = f"{lang}:{token}" if prefix_lang else token
                counts[entry] = counts.get(entry, 0) + count
                owners[entry] = owners.get(entry, 0) | (1 << bit)
        return cls.from_counts(counts, languages, owners, prefix_lang)


def ownership_masks(per_language: Iterable[tuple[str, Iterable[str]]], languages: Sequence[str]) -> dict[str, int]:
    """Bit masks from (language, tokens-of-that-language) pairs."""
    masks: dict[str, int] = {}
    for lang, tokens in per_language:
        bit = 1 << list(languages).index(lang)
        for t in tokens:
            masks[t] = masks.get(t, 0) | bit
    return masks

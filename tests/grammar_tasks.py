"""Task files whose answers are known, generated from a small English grammar (tests/test_learning.py).

The grammar extends the lexicon of ``synthetic`` with optional adjectives and an optional
prepositional phrase, so that neither a tag nor a head is a function of the word's position::

    S   -> NP(subject) verb NP(object) .
    NP  -> det adj{0,2} noun [PP]                 (a PP at most once per sentence)
    PP  -> prep det adj{0,1} noun

Every sentence comes with its gold annotation, written in the formats the real task readers take:

* **parse** (CoNLL-U): det -> noun (``det``), adj -> noun (``amod``), subject noun -> verb (``nsubj``),
  verb -> ROOT (``root``), object noun -> verb (``obj``), prep -> its noun (``case``), PP noun -> the
  noun it modifies (``nmod``), ``.`` -> verb (``punct``, UPOS PUNCT, so LAS skips it).
* **ner** (``word tag`` columns): every ``adj* noun`` run is one entity, typed by its role in the
  sentence: AGT (the subject's), PAT (the object's), LOC (a prepositional phrase's). The same words
  are an AGT entity before the verb and a PAT one after it, so a gazetteer of the training entities
  gets about half of the types wrong: the tagger has to read the context.
* **xnli** (``premise<TAB>hypothesis<TAB>label``): the hypothesis is the premise's bare clause
  ``det noun verb det noun .`` (adjectives and PP dropped) with its verb possibly replaced; the label
  is decided by the two verbs: the same verb -> entailment, its antonym (likes/hates, finds/loses,
  follows/leads, takes/gives) -> contradiction, any other verb -> neutral. Neither segment alone
  tells the label: the classifier has to read both.

The lexicon is a parameter (:class:`Lexicon`): ``SMALL`` is synthetic's 30 words, which a model
learns within a few hundred steps; ``Lexicon.pseudo`` makes open classes of any size from made-up
words, for the Fake-English parsing test, where a lexicon a model cannot learn word by word is what
makes it share its layers between two languages (tests/test_learning_parsing_transfer.py); with
``objects_by_verb`` each verb takes objects of its own (bench/probe_nli_transfer.py asks whether
contexts of its own pair a verb with its Fake-English twin).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable, Optional

import synthetic

from xlt.text.fake import FAKE


def _antonyms(pairs: dict[str, str]) -> dict[str, str]:
    return {**pairs, **{b: a for a, b in pairs.items()}}


@dataclass(frozen=True)
class Lexicon:
    """The words each slot of the grammar draws from (determiners and prepositions stay English's
    closed classes in every lexicon); verbs come in antonym pairs, the NLI rule's lexical knowledge."""

    adjectives: tuple[str, ...]
    nouns: tuple[str, ...]
    antonym: dict[str, str] = field(hash=False)
    dets: tuple[str, ...] = tuple(en for en, _ in synthetic.LEXICON["det"])
    preps: tuple[str, ...] = ("in", "near", "with")
    # verb -> the nouns it takes as objects (None: any noun): gives each verb contexts of its own
    objects: Optional[dict[str, tuple[str, ...]]] = field(default=None, hash=False)

    @cached_property   # drawn from once per sentence
    def verbs(self) -> list[str]:
        return sorted(self.antonym)

    @classmethod
    def pseudo(cls, nouns: int, adjectives: int, verb_pairs: int, seed: int = 7,
               objects_by_verb: bool = False) -> "Lexicon":
        """Open classes of made-up words (``kotavi``: two or three consonant-vowel syllables, no two
        alike): a lexicon as large as wanted, none of whose words is a determiner or a preposition
        (those are not consonant-vowel syllables). ``objects_by_verb``: each verb takes its objects
        from nouns of its own (``nouns // verbs`` each; any left over are never objects), so that no two
        verbs share their contexts."""
        rng, words = random.Random(seed), set()
        while len(words) < nouns + adjectives + 2 * verb_pairs:
            words.add("".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 3))))
        drawn = sorted(words)
        rng.shuffle(drawn)
        verbs, objects = drawn[nouns + adjectives:], None
        if objects_by_verb:
            share = nouns // len(verbs)
            if share < 1:
                raise ValueError(f"objects_by_verb needs a noun per verb: {nouns} nouns, {len(verbs)} verbs")
            objects = {v: tuple(drawn[i * share:(i + 1) * share]) for i, v in enumerate(verbs)}
        return cls(adjectives=tuple(drawn[nouns:nouns + adjectives]), nouns=tuple(drawn[:nouns]),
                   antonym=_antonyms(dict(zip(verbs[::2], verbs[1::2]))), objects=objects)


# synthetic's lexicon, with verbs in antonym pairs (four of them are synthetic's).
SMALL = Lexicon(adjectives=tuple(en for en, _ in synthetic.LEXICON["adj"]),
                nouns=tuple(en for en, _ in synthetic.LEXICON["noun"]),
                antonym=_antonyms({"likes": "hates", "finds": "loses", "follows": "leads", "takes": "gives"}))


@dataclass
class Sentence:
    """Words with their gold UPOS, heads (1-based, 0 = root), relations and BIO entity tags, plus the
    three content slots the NLI rule compares."""

    words: list[str]
    upos: list[str]
    heads: list[int]
    relations: list[str]
    tags: list[str]
    core: tuple[str, str, str, str, str]   # subject det, subject noun, verb, object det, object noun

    @property
    def text(self) -> str:
        return " ".join(self.words)


class _Builder:
    def __init__(self, lexicon: Lexicon) -> None:
        self.lexicon = lexicon
        self.words: list[str] = []
        self.upos: list[str] = []
        self.heads: list[int] = []
        self.relations: list[str] = []
        self.tags: list[str] = []

    def add(self, word: str, upos: str, relation: str, tag: str = "O") -> int:
        """Append a word whose head is filled in later; returns its 1-based index."""
        self.words.append(word)
        self.upos.append(upos)
        self.heads.append(-1)
        self.relations.append(relation)
        self.tags.append(tag)
        return len(self.words)

    def noun_phrase(self, rng: random.Random, max_adjectives: int, kind: str,
                    nouns: Optional[tuple[str, ...]] = None) -> tuple[int, str, str]:
        """det adj* noun with its internal heads and its entity (type ``kind``); returns (noun index, det, noun)."""
        det, noun = rng.choice(self.lexicon.dets), rng.choice(nouns or self.lexicon.nouns)
        d = self.add(det, "DET", "det")
        adjectives = [self.add(rng.choice(self.lexicon.adjectives), "ADJ", "amod") for _ in range(rng.randint(0, max_adjectives))]
        n = self.add(noun, "NOUN", "")
        for position, index in enumerate(adjectives + [n]):
            self.tags[index - 1] = ("B-" if position == 0 else "I-") + kind
        for index in [d, *adjectives]:
            self.heads[index - 1] = n
        return n, det, noun

    def maybe_pp(self, rng: random.Random, head_noun: int, allowed: bool) -> bool:
        if not allowed or rng.random() < 0.5:
            return False
        p = self.add(rng.choice(self.lexicon.preps), "ADP", "case")
        n, _, _ = self.noun_phrase(rng, max_adjectives=1, kind="LOC")
        self.heads[p - 1] = n
        self.heads[n - 1] = head_noun
        self.relations[n - 1] = "nmod"
        return True


def sentence(rng: random.Random, lexicon: Lexicon = SMALL) -> Sentence:
    """One random sentence of the grammar with its annotation."""
    b = _Builder(lexicon)
    subject, sdet, snoun = b.noun_phrase(rng, max_adjectives=2, kind="AGT")
    pp_on_subject = rng.random() < 0.5
    used = b.maybe_pp(rng, subject, allowed=pp_on_subject)
    verb_word = rng.choice(lexicon.verbs)
    verb = b.add(verb_word, "VERB", "root")
    b.heads[verb - 1] = 0
    b.heads[subject - 1], b.relations[subject - 1] = verb, "nsubj"
    objects = lexicon.objects[verb_word] if lexicon.objects else None
    obj, odet, onoun = b.noun_phrase(rng, max_adjectives=2, kind="PAT", nouns=objects)
    b.heads[obj - 1], b.relations[obj - 1] = verb, "obj"
    b.maybe_pp(rng, obj, allowed=not used)
    stop = b.add(".", "PUNCT", "punct")
    b.heads[stop - 1] = verb
    assert all(h >= 0 for h in b.heads) and all(b.relations)
    return Sentence(b.words, b.upos, b.heads, b.relations, b.tags, (sdet, snoun, verb_word, odet, onoun))


def sentences(n: int, seed: int, lexicon: Lexicon = SMALL) -> list[Sentence]:
    rng = random.Random(seed)
    return [sentence(rng, lexicon) for _ in range(n)]


# ---- files in the real readers' formats --------------------------------------------------------
def write_conllu(path: Path, items: list[Sentence]) -> Path:
    blocks = []
    for i, s in enumerate(items, 1):
        lines = [f"# sent_id = {i}", f"# text = {s.text}"]
        for k, (w, u, h, r) in enumerate(zip(s.words, s.upos, s.heads, s.relations), 1):
            lines.append("\t".join([str(k), w, w, u, "_", "_", str(h), r, "_", "_"]))
        blocks.append("\n".join(lines) + "\n")
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


def write_ner(path: Path, items: list[Sentence]) -> Path:
    blocks = ["\n".join(f"{w}\t{t}" for w, t in zip(s.words, s.tags)) + "\n" for s in items]
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


NLI_LABELS = ("entailment", "contradiction", "neutral")


def nli_pair(rng: random.Random, premise: Sentence, label: str, lexicon: Lexicon = SMALL) -> tuple[str, str, str]:
    """A hypothesis for ``premise`` that the verb rule labels ``label``."""
    sdet, snoun, verb, odet, onoun = premise.core
    if label == "entailment":
        other = verb
    elif label == "contradiction":
        other = lexicon.antonym[verb]
    else:
        other = rng.choice([v for v in lexicon.verbs if v not in (verb, lexicon.antonym[verb])])
    if lexicon.objects and other != verb:   # the other verb's own object: neither side alone tells the label
        onoun = rng.choice(lexicon.objects[other])
    return premise.text, " ".join([sdet, snoun, other, odet, onoun, "."]), label


def write_nli(path: Path, items: list[Sentence], seed: int, lexicon: Lexicon = SMALL) -> Path:
    rng = random.Random(seed)
    lines = ["\t".join(nli_pair(rng, s, NLI_LABELS[i % 3], lexicon)) for i, s in enumerate(items)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_corpus(path: Path, items: list[Sentence]) -> Path:
    """Plain text, one sentence a line (the pretraining corpus)."""
    path.write_text("\n".join(s.text for s in items) + "\n", encoding="utf-8")
    return path


def fake_english_pair(root: Path, lexicon: Lexicon, xlt: Callable[..., None],
                      fake_text: Callable[[str], str] = lambda text: text) -> None:
    """The pretraining stores of English and Fake-English under ``root`` (``{en,fake}.{train,dev}``
    and ``vocab``, whole words as the vocabulary): 20,000 different sentences per language, the same
    200 dev sentences in both; Fake-English by ``xlt fake-english``, then ``fake_text`` (a probe's
    change to it). ``xlt`` runs a command line of xlt."""
    write_corpus(root / "en.train.txt", sentences(20_000, seed=100, lexicon=lexicon))
    write_corpus(root / "english-of-fake.txt", sentences(20_000, seed=102, lexicon=lexicon))
    write_corpus(root / "en.dev.txt", sentences(200, seed=101, lexicon=lexicon))
    for original, split in (("english-of-fake.txt", "train"), ("en.dev.txt", "dev")):
        fake = root / f"{FAKE}.{split}.txt"
        xlt("fake-english", root / original, "-o", fake)
        fake.write_text(fake_text(fake.read_text(encoding="utf-8")), encoding="utf-8")
    # counted as the Makefile's joint vocabulary
    xlt("bpe", "vocab", "--lang", "en", "--lang", FAKE, "-o", root / "vocab", root / "en.train.txt",
        root / f"{FAKE}.train.txt")
    for lang in ("en", FAKE):
        for split in ("train", "dev"):
            xlt("binarize", "--vocab", root / "vocab", "--lang", lang, root / f"{lang}.{split}.txt",
                "-o", root / f"{lang}.{split}")

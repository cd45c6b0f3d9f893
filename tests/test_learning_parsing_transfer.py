"""Evidence that a Default model transfers to Fake-English on parsing, not only on a word-list tagger.

Section 4 of tests/test_learning.py (its MARGINS apply: one torch thread, thresholds below the
worst score measured over seeds and kernel paths). The pair is the grammar of ``grammar_tasks``
(a parse whose answers are known) in English and in Fake-English (``xlt fake-english``: every
character moved to a private-use plane, the pair shares no token). The two pretraining corpora are
different sentences of the grammar (no sentence in both); the parser is fine-tuned on English trees
only and tested on held-out trees in English and in Fake-English (the same trees, every word
mapped, heads and relations kept).

Why a lexicon of made-up words (``Lexicon.pseudo``: 300 nouns, 100 adjectives, 20 verb pairs) rather
than the grammar's own 30 words: a model that can learn each language's words one by one does, and
keeps the two apart. Measured with the 30-word lexicon (tiny; 11 runs over pretraining seeds 0-3,
400-1,600 steps, with and without dropout and language embeddings; one fine-tuning seed): zero-shot
LAS at the untrained control's level in 7 (1.4-9.1 against 6.6-11.9), 19.2-42.7 in the other 4, with
no trend in the steps (seed 0: 42.7 at 800 steps, 7.6 at 1,600); with the parser's encoder frozen,
9.1 and 1.3. With 440 open-class words per language, a model that reads a word's category from its
context with layers both languages share costs less than one that learns each word apart (Dufter &
Schuetze 2020 find the same from the other side: an overparameterized model does not become
multilingual).

Measured (AMD EPYC, one thread; test LAS / UAS, zero-shot into Fake-English): the next-word rule
36.8 / 36.8 (its relations come from the gold UPOS: an oracle for LAS that the UAS lacks). With
1,600 steps (dev perplexity 39-49 against the unigram's 147), one fine-tuning seed, pretraining
seeds 0-7: LAS 71.0, 38.8, 73.0, 62.6, 27.3, 62.8, 62.3, 69.0 (UAS 78.4, 61.7, 77.6, 72.4, 50.1,
73.0, 73.5, 72.7); with 2,400 steps
79.3, 45.7, 79.4, 78.9 for seeds 0-3 (with lr 5e-3 instead of 3e-3, seed 1 transferred nothing:
LAS 11.2, UAS 20.6). So whether a model comes to share its layers is a draw of its pretraining, and
another CPU kind draws again: the test averages two pretraining seeds (0, 1) and three fine-tuning
seeds each. Its run: Default 73.1 / 78.7 (seed 0), 45.1 / 64.0 (seed 1), English LAS 99.9-100; the
untrained control 10.7 / 25.1; Sep Emb + L1 0.9 / 19.9 (English 98.0) with dev perplexities like
Default's (en 45 / fake 41 against 40 / 39). Asserted: Default's mean UAS >= the rule's + 10 (the
worst two seeds above, 1 and 4, would give ~56), its mean LAS >= 2 x the control's (the same two: ~33
against 21), the separate model's UAS below the rule and its LAS <= 0.3 x Default's. Not asserted:
each seed on its own (one in eight measured gives UAS 50, and lr 5e-3's seed 1 none). With AVX2
kernels forced (``ATEN_CPU_CAPABILITY=avx2``) every figure of the run is the same. ~3.5 min.

Controls as in section 3: the same architecture untrained, and Sep Emb + L1 (every part below the
top layer language-specific), which models both languages about as well and transfers nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import grammar_tasks
import numpy as np
import pytest

from test_learning import last_metrics, xlt
from xlt.text.fake import FAKE
from xlt.text.vocab import Vocabulary

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LEXICON = grammar_tasks.Lexicon.pseudo(nouns=300, adjectives=100, verb_pairs=20)
# Table 1's Default for the pair at the demo scale has no language embeddings (scales/demo.mk).
PRETRAINING = ("--preset", "tiny", "--stream-len", 32, "--batch-size", 64, "--dropout", 0, "--no-lang-embeddings",
               "--lr", 3e-3, "--warmup-steps", 30, "--max-steps", 1600, "--eval-every", 1600,
               "--save-every", 1600, "--log-every", 400)
# Whether a model comes to share its layers between the two languages is a draw of its pretraining
# seed (LAS 27-73 over seeds 0-7, module docstring), and another CPU kind draws again: two seeds.
PRETRAINING_SEEDS = (0, 1)
PARSER = ("--batch-size", 16, "--encoder-lr", 2e-3, "--epochs", 12, "--task-option", "arc_dim", 64,
          "--task-option", "label_dim", 32)


@pytest.fixture(scope="module")
def grammar_pair(tmp_path_factory) -> Path:
    """The pair's token stores and vocabulary, English parse files, their Fake-English twins, the
    trivial baselines, and the Default model pretrained on both languages."""
    root = tmp_path_factory.mktemp("grammar-fake")
    grammar_tasks.fake_english_pair(root, LEXICON, xlt)   # whole words are the vocabulary (as in section 2)

    train = grammar_tasks.sentences(800, seed=1, lexicon=LEXICON)
    seen = {s.text for s in train}
    held_out = [s for s in grammar_tasks.sentences(1000, seed=2, lexicon=LEXICON) if s.text not in seen]
    for split, items in (("train", train), ("dev", held_out[:150]), ("test", held_out[150:450])):
        grammar_tasks.write_conllu(root / f"parse.en.{split}", items)
    for split in ("dev", "test"):
        xlt("fake-english", "--format", "conllu", root / f"parse.en.{split}", "-o", root / f"parse.{FAKE}.{split}")
    xlt("baselines", "parse", "--train", "en", root / "parse.en.train", "--eval", "en", root / "parse.en.test",
        "--eval", FAKE, root / f"parse.{FAKE}.test", "-o", root / "baselines.json")
    for seed in PRETRAINING_SEEDS:
        pretrain(root, f"default-{seed}", seed)
    return root


def pretrain(root: Path, name: str, seed: int, *sharing) -> Path:
    xlt("pretrain", "--run-dir", root / name, "--vocab", root / "vocab",
        "--train", "en", root / "en.train", "--train", FAKE, root / f"{FAKE}.train",
        "--dev", "en", root / "en.dev", "--dev", FAKE, root / f"{FAKE}.dev", *PRETRAINING, "--seed", seed, *sharing)
    return root / name


def parsing_transfer(root: Path, run: str, checkpoint: str = "last") -> dict[str, dict[str, float]]:
    """Test LAS and UAS per language of a parser fine-tuned on English trees only, mean of three
    fine-tuning seeds (the English dev set alone selects each seed's epoch)."""
    out = root / f"parse-{run}-{checkpoint}"
    xlt("finetune", "parse", "--model", root / run, "-o", out, "--checkpoint", checkpoint, "--seeds", "1,2,3",
        "--train", "en", root / "parse.en.train", "--dev", "en", root / "parse.en.dev",
        *(arg for lang in ("en", FAKE) for arg in ("--eval", lang, root / f"parse.{lang}.dev", root / f"parse.{lang}.test")),
        *PARSER)
    records = json.loads((out / "results.json").read_text())["runs"]
    assert len(records) == 3 and all(r["status"] == "done" for r in records)
    return {lang: {metric: float(np.mean([r["results"]["plain"][lang]["test"][metric] for r in records]))
                   for metric in ("las", "uas")} for lang in ("en", FAKE)}


def next_word_rule(root: Path, lang: str) -> dict[str, float]:
    """The best trivial baseline's scores: every word's head is the next word; its relations come from
    the test file's gold UPOS, which a parser never sees, so its LAS carries an oracle its UAS lacks."""
    baselines = json.loads((root / "baselines.json").read_text())
    assert baselines["best"][lang]["name"] == "next word is the head"
    return baselines["scores"][lang]["next word is the head"]


@pytest.fixture(scope="module")
def default_by_seed(grammar_pair) -> dict[int, dict[str, dict[str, float]]]:
    """Each pretraining seed's scores (they go into the failure messages: which seed fell short)."""
    return {seed: parsing_transfer(grammar_pair, f"default-{seed}") for seed in PRETRAINING_SEEDS}


def over_seeds(by_seed: dict[int, dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each language's LAS and UAS averaged over the pretraining seeds."""
    return {lang: {metric: float(np.mean([scores[lang][metric] for scores in by_seed.values()]))
                   for metric in ("las", "uas")} for lang in ("en", FAKE)}


def test_zero_shot_parsing_transfer_to_fake_english_needs_pretraining(grammar_pair, default_by_seed):
    vocab = Vocabulary.load(grammar_pair / "vocab")
    assert vocab.shared_tokens("en", FAKE) == []   # nothing but the specials is shared
    rule = next_word_rule(grammar_pair, FAKE)
    # the Fake-English test set is the English one's trees: the rule scores the same on both
    assert rule == next_word_rule(grammar_pair, "en") and rule["uas"] < 50
    untrained = parsing_transfer(grammar_pair, f"default-{PRETRAINING_SEEDS[0]}", checkpoint="untrained")
    default = over_seeds(default_by_seed)
    assert default["en"]["las"] >= 95 and untrained["en"]["las"] >= 95, (default_by_seed, untrained)
    # attachments beyond the rule (UAS: the rule's LAS has gold labels), labels beyond the control
    assert default[FAKE]["uas"] >= rule["uas"] + 10, (default_by_seed, rule)
    assert default[FAKE]["las"] >= 2 * untrained[FAKE]["las"], (default_by_seed, untrained)


def test_zero_shot_parsing_transfer_to_fake_english_needs_shared_layers(grammar_pair, default_by_seed):
    seed = PRETRAINING_SEEDS[0]
    separate = pretrain(grammar_pair, "separate", seed, "--sharing", "sep-emb", "--separate-layers", 1, 1)
    # Both models learned their languages about as well: a lower transfer is the sharing's doing.
    for lang in ("en", FAKE):
        key = f"valid_{lang}_mlm_ppl"
        default_ppl, separate_ppl = (last_metrics(run, key)[key] for run in (grammar_pair / f"default-{seed}", separate))
        assert separate_ppl < 1.5 * default_ppl, (lang, default_ppl, separate_ppl)
    scores = parsing_transfer(grammar_pair, "separate")
    assert scores["en"]["las"] >= 90, scores
    assert scores[FAKE]["uas"] < next_word_rule(grammar_pair, FAKE)["uas"], scores
    assert scores[FAKE]["las"] <= 0.3 * over_seeds(default_by_seed)[FAKE]["las"], (scores, default_by_seed)

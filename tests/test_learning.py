"""Evidence that xlt learns: pretraining, fine-tuning and cross-lingual transfer, with numbers.

Every other test checks plumbing (shapes, resume, file formats); none would notice a pipeline that
runs end to end and learns nothing. These tests train for real, on a 2-core CPU with one torch
thread, and assert scores against baselines that need no learning.

MARGINS

Another kind of CPU takes other floating-point paths (AVX2 or AVX-512 code, oneDNN's and MKL's own
choices), and training carries the last-digit differences on as another seed would: each threshold
sits below the worst score measured over seeds and over forced kernel paths (``ATEN_CPU_CAPABILITY=
default|avx2``, ``ONEDNN_MAX_CPU_ISA=AVX2``, ``MKL_CBWR=COMPATIBLE``, on AMD EPYC). A fixture whose
scores straddled its threshold was strengthened, not the threshold lowered.

1. ``test_pretraining_beats_a_unigram_model_on_wikipedia_text`` -- ``xlt tokenize``, ``bpe learn``
   (500 merges), ``bpe apply``, ``bpe vocab``, ``binarize`` and ``pretrain`` (the ``tiny`` preset)
   on English Wikipedia text from the data mirror. Guards the whole pretraining path: if the loop,
   the masking, the schedule or the model stopped learning from context, dev perplexity would stay
   at the unigram plateau. Measured (seed 0): dev perplexity 121 against the unigram model's 334
   (754 entries; 296 at step 500); 120.9 with AVX2 kernels forced, 150 with seed 1: 0.36-0.45 x
   unigram; asserted: below 0.75 x unigram. ~40 s.

2. ``test_finetuned_*_on_held_out_sentences`` -- ``xlt finetune ner|parse|xnli`` (the real runner,
   in-process through the CLI's entry point) on a model pretrained by ``xlt pretrain`` on a small
   grammar (``grammar_tasks``) whose answers are known, scored on held-out sentences (none of them a
   training sentence). Guards each task's batching, head, loss, decoding and metric together: a
   misaligned first-subword position, a swapped head index or a broken pair encoding would cap the
   score far below the threshold. Each score is also compared with ``xlt baselines`` (a gazetteer,
   next-word heads, chance). Measured over pretraining seeds 0-3, fine-tuning seeds 1-4 and the
   forced kernel paths: pretraining dev perplexity 7.5-9.2 (30 words); NER F1 99.8-100 (best
   baseline 35) and LAS 99.96-100 (next-word heads 36) over 9 runs; XNLI accuracy 99.3-100 (chance
   33) over 7; asserted: >= 90. Without dropout the grammar's model leaves the plateau within 400
   steps; with the preset's dropout it did not (perplexity 23, NER F1 82). Its windows are 32
   tokens, as long as an XNLI pair (16-token windows leave the hypothesis on untrained positions).

   XNLI is the fragile one: a run sits at chance until it learns to compare the two verbs, and when
   varies by seed and kernel path. With the first state, batches of 16, 30 epochs and 16-token
   windows (the settings before) its accuracy was 31-99.7 over 12 runs (99.7 for seed 0 on AMD,
   83.3 on an Intel Xeon). With the mean state (``pooling mean``) and batches of 32 the latest run
   seen left chance at epoch 17 and reached 99 at epoch 33: 45 epochs leave it 12 to spare.

3. ``test_zero_shot_transfer_to_fake_english_*`` -- Fake-English (``fake_english``): English
   Wikipedia under a language-prefixed vocabulary, no token shared. A word-list tagger
   (articles, pronouns, prepositions as ``B-`` tags) is fine-tuned on English and tested on the same
   held-out sentences in English and in Fake-English; the tag is a function of the word, so English
   is ~100 F1 for every encoder and the Fake-English score measures only how alike the encoder
   makes a word and its twin. Measured (mean F1 of 3 fine-tuning seeds, English / Fake-English):
   Default 99.8 / 25.7 (seeds 26.6, 29.0, 21.5); the no-pretraining control (the same run's
   architecture, fresh weights) 99.8 / 6.4 (18.3, 0.0, 1.0); Sep Emb + L1, every part but the top
   layer language-specific, 96.4 / 3.4 (4.2, 1.9, 4.0), with dev perplexities like Default's
   (en 243 / nl 176 against 199 / 211). With pretraining seed 1 instead of 0: Default 26.4, the
   control 6.4, the separate model 14.2 (perplexities en 176 / nl 262 against 123 / 151): the
   separate model's small transfer varies most (0.13 and 0.54 x Default). With seed 0 and AVX2
   kernels forced (``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2``) every figure above is the
   same to the first decimal. Asserted: Default >= 20, the control <= 0.5 x Default, the separate
   model <= 0.7 x Default (0.6 left seed 1 a margin of 0.06).

   Two controls, because neither alone is honest. The untrained one fine-tunes the same
   architecture on the same files, but it also lacks any English knowledge, and its random
   Fake-English embeddings make spurious entities whose F1 swings by seed (hence three seeds). The
   separate model has seen the same text for the same steps and models it as well; it differs from
   Default only in what is shared (the top layer always is in xlt), so its lower transfer is the
   sharing's doing. Both are pretrained on different stretches of Wikipedia per language, so no
   parallel text can align them.

   The models are ``tiny`` (2 layers), so Sep Emb + L1 stands for the paper's Sep Emb + L1-6 (both
   separate all but the top layers of the shared stack): the 8-layer ``mini`` that the Table 1 row
   needs stays on the unigram plateau within a test's budget (dev perplexity 310 after 1M tokens,
   76 s, where ``tiny`` reaches 199 after 2M tokens in 40 s; after 0.6M tokens mini's Fake-English
   F1 was 5.1 against its untrained control's 3.5).

4. ``test_zero_shot_parsing_transfer_to_fake_english_*`` (tests/test_learning_parsing_transfer.py):
   the same question on parsing, where the tag is not a function of the word: a Default model
   pretrained on the grammar of section 2 in English and in Fake-English (``xlt fake-english``),
   with a lexicon too large to learn word by word, parses Fake-English trees it was never
   fine-tuned on far above the next-word rule; the untrained control and Sep Emb + L1 do not.
"""

from __future__ import annotations

import json
import lzma
import math
from pathlib import Path

import fake_english as fake_english_data
import grammar_tasks
import numpy as np
import pytest
import torch

from conftest import MIRROR
from fake_english import FAKE
from xlt.cli import main
from xlt.data.masking import MaskingConfig, MaskTransform
from xlt.data.store import TokenStore
from xlt.data.streams import iterate_eval
from xlt.pretrain.trainer import EVAL_MASK_SEED
from xlt.text.vocab import SPECIALS, Vocabulary

WIKIPEDIA = fake_english_data.WIKIPEDIA


# one torch thread, module fixtures included (conftest): also the setting the margins were measured with
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def xlt(*args) -> None:
    """``xlt ARGS`` through the CLI's own entry point, in this process (no torch import per command)."""
    try:
        main(["-q", *map(str, args)])
    except SystemExit as stop:
        assert not stop.code, f"xlt {' '.join(map(str, args))} exited with {stop.code}"


def last_metrics(run: Path, key: str) -> dict:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if key in r][-1]


# ---- 1. pretraining --------------------------------------------------------------------------------
def wikipedia_slices(mirror: Path, dev_bytes: int, train_bytes: int) -> tuple[list[str], list[str]]:
    """Non-blank lines cut by size as the Makefile's raw slices: the first ``dev_bytes`` held out, the
    next ``train_bytes`` for training."""
    dev, train, seen = [], [], 0
    with lzma.open(mirror / WIKIPEDIA, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            seen += len(line.encode("utf-8"))
            if seen <= dev_bytes:
                dev.append(line.rstrip("\n"))
            elif seen <= dev_bytes + train_bytes:
                train.append(line.rstrip("\n"))
            else:
                break
    return dev, train


def dev_targets(vocab: Vocabulary, dev_prefix: Path, stream_len: int, batch_size: int) -> np.ndarray:
    """The token ids ``Pretrainer.evaluate`` scores: the same windows, masking rules and mask seed."""
    masking = MaskingConfig().resolved(separate_embeddings=False, prefix_lang=vocab.prefix_lang)
    transform = MaskTransform.from_vocabulary(masking, vocab, ["en"])
    generator = torch.Generator().manual_seed(EVAL_MASK_SEED)
    store = TokenStore.open(str(dev_prefix), vocab=vocab)
    return torch.cat([transform(windows, "en", generator, eval_mode=True).target_ids
                      for windows in iterate_eval(store, stream_len, batch_size)]).numpy()


def unigram_perplexity(train_ids: np.ndarray, targets: np.ndarray, vocab_size: int, k: float = 1.0) -> float:
    """Perplexity of ``targets`` under add-k unigram frequencies of the training tokens (specials are
    never targets, so they get no mass)."""
    counts = np.bincount(train_ids.astype(np.int64), minlength=vocab_size).astype(np.float64)
    counts[:len(SPECIALS)] = 0
    ordinary = vocab_size - len(SPECIALS)
    probability = (counts + k) / (counts.sum() + k * ordinary)
    return float(math.exp(-np.log(probability[targets]).mean()))


def test_pretraining_beats_a_unigram_model_on_wikipedia_text(mirror, tmp_path):
    dev, train = wikipedia_slices(mirror, dev_bytes=60_000, train_bytes=540_000)
    for split, lines in (("dev", dev), ("train", train)):
        (tmp_path / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        xlt("tokenize", "--lang", "en", tmp_path / f"{split}.txt", "-o", tmp_path / f"{split}.tok")
    # Few merges: frequent words stay whole, the rest split into pieces whose neighbours predict them.
    xlt("bpe", "learn", "--merges", 500, "-o", tmp_path / "codes", tmp_path / "train.tok")
    for split in ("dev", "train"):
        xlt("bpe", "apply", "--codes", tmp_path / "codes", tmp_path / f"{split}.tok", "-o", tmp_path / f"{split}.bpe")
    xlt("bpe", "vocab", "-o", tmp_path / "vocab", tmp_path / "train.bpe")
    for split in ("dev", "train"):
        xlt("binarize", "--vocab", tmp_path / "vocab", "--lang", "en", tmp_path / f"{split}.bpe",
            "-o", tmp_path / f"en.{split}")
    run = tmp_path / "run"
    # Windows of 8 tokens: a 2-layer model learns to read its neighbours within a few hundred steps
    # (at 32 or 64 tokens it sat on the unigram plateau for 1,500 steps). lr 5e-3 with a short
    # warm-up leaves it even with the preset's dropout (0.1), kept here so that path is trained too.
    stream_len, batch_size = 8, 256
    xlt("pretrain", "--run-dir", run, "--vocab", tmp_path / "vocab", "--codes", "en", tmp_path / "codes",
        "--train", "en", tmp_path / "en.train", "--dev", "en", tmp_path / "en.dev",
        "--preset", "tiny", "--stream-len", stream_len, "--batch-size", batch_size, "--max-steps", 1000,
        "--warmup-steps", 50, "--lr", 5e-3, "--eval-every", 500, "--save-every", 1000, "--log-every", 100)

    vocab = Vocabulary.load(tmp_path / "vocab")
    train_ids = np.asarray(TokenStore.open(str(tmp_path / "en.train"), vocab=vocab).tokens)
    targets = dev_targets(vocab, tmp_path / "en.dev", stream_len, batch_size)
    unigram = unigram_perplexity(train_ids, targets, len(vocab))
    model = last_metrics(run, "valid_en_mlm_ppl")
    assert model["step"] == 1000 and len(targets) > 3000
    # The baseline is a real one: frequencies alone are far better than a uniform guess.
    assert unigram < 0.6 * (len(vocab) - len(SPECIALS))
    assert model["valid_en_mlm_ppl"] < 0.75 * unigram, (model, unigram)
    # The run records the same floor itself, counted its own way (a prefix of the memory-mapped store).
    assert model["valid_en_unigram_ppl"] == pytest.approx(unigram, rel=1e-6)


# ---- 2. fine-tuning on a grammar with known answers ------------------------------------------------
@pytest.fixture(scope="module")
def grammar_run(tmp_path_factory) -> Path:
    """A tiny model pretrained by ``xlt pretrain`` on 3,000 sentences of the grammar (the whole words
    are the vocabulary, as the synthetic fixtures' runs)."""
    root = tmp_path_factory.mktemp("grammar")
    grammar_tasks.write_corpus(root / "train.txt", grammar_tasks.sentences(3000, seed=100))
    grammar_tasks.write_corpus(root / "dev.txt", grammar_tasks.sentences(200, seed=101))
    xlt("bpe", "vocab", "-o", root / "vocab", root / "train.txt")
    for split in ("train", "dev"):
        xlt("binarize", "--vocab", root / "vocab", "--lang", "en", root / f"{split}.txt", "-o", root / f"en.{split}")
    xlt("pretrain", "--run-dir", root / "run", "--vocab", root / "vocab", "--train", "en", root / "en.train",
        "--dev", "en", root / "en.dev", "--preset", "tiny", "--stream-len", 32, "--batch-size", 64,
        "--dropout", 0, "--max-steps", 400, "--warmup-steps", 30, "--lr", 3e-3, "--eval-every", 400,
        "--save-every", 400, "--log-every", 100)
    return root / "run"


def task_splits(n_train: int) -> dict[str, list[grammar_tasks.Sentence]]:
    """Train, dev and test sentences; dev and test hold no sentence of the training split."""
    train = grammar_tasks.sentences(n_train, seed=1)
    seen = {s.text for s in train}
    held_out = [s for s in grammar_tasks.sentences(1000, seed=2) if s.text not in seen]
    return {"train": train, "dev": held_out[:150], "test": held_out[150:450]}


def finetune_and_baselines(task: str, run: Path, root: Path, files: dict[str, Path], *options) -> tuple[dict, dict]:
    """The test-split metrics of the selected fine-tuning run, and the trivial baselines' best."""
    out = root / f"finetune-{task}"
    xlt("finetune", task, "--model", run, "-o", out, "--checkpoint", "last", "--seeds", 1,
        "--train", "en", files["train"], "--dev", "en", files["dev"], "--eval", "en", files["dev"], files["test"],
        *options)
    results = json.loads((out / "results.json").read_text())
    (record,) = results["runs"]
    assert record["status"] == "done"
    xlt("baselines", task, "--train", "en", files["train"], "--eval", "en", files["test"], "-o", root / "baselines.json")
    baselines = json.loads((root / "baselines.json").read_text())
    return record["results"]["plain"]["en"]["test"], baselines


def test_finetuned_ner_tagger_on_held_out_sentences(grammar_run, tmp_path):
    splits = task_splits(800)
    files = {name: grammar_tasks.write_ner(tmp_path / f"ner.{name}", items) for name, items in splits.items()}
    scores, baselines = finetune_and_baselines("ner", grammar_run, tmp_path, files, "--batch-size", 16,
                                               "--encoder-lr", 2e-3, "--epochs", 12)
    best = baselines["best"]["en"]
    # Entity types follow the role (AGT before the verb, PAT after it, LOC after a preposition), so
    # the training-entity gazetteer types the same words differently from the gold.
    assert best["name"] == "training entities" and best["score"] < 70
    assert scores["f1"] >= 90, scores


def test_finetuned_parser_on_held_out_sentences(grammar_run, tmp_path):
    splits = task_splits(800)
    files = {name: grammar_tasks.write_conllu(tmp_path / f"parse.{name}", items) for name, items in splits.items()}
    # The biaffine MLPs scaled down with the 64-wide encoder (as the demo scale does).
    scores, baselines = finetune_and_baselines("parse", grammar_run, tmp_path, files, "--batch-size", 16,
                                               "--encoder-lr", 2e-3, "--epochs", 12, "--task-option", "arc_dim", 64,
                                               "--task-option", "label_dim", 32)
    # Heads are not a function of position: optional adjectives and PPs move them.
    assert baselines["best"]["en"]["score"] < 50
    assert scores["las"] >= 90 and scores["uas"] >= scores["las"], scores


def test_finetuned_nli_classifier_on_held_out_sentences(grammar_run, tmp_path):
    splits = task_splits(1200)
    files = {name: grammar_tasks.write_nli(tmp_path / f"nli.{name}", items, seed=10 + i)
             for i, (name, items) in enumerate(splits.items())}
    # XNLI's defaults (an epoch of 20,000 pairs, lr 1e-6..1e-4) are the paper's, for a 768-wide model;
    # the mean state, batches of 32, 45 epochs: see the module docstring (the first state's runs straddled 90).
    scores, baselines = finetune_and_baselines("xnli", grammar_run, tmp_path, files, "--batch-size", 32,
                                               "--encoder-lr", 2e-3, "--head-lr", 2e-3, "--epochs", 45,
                                               "--epoch-size", 1200, "--task-option", "pooling", '"mean"')
    assert baselines["best"]["en"]["score"] < 40  # chance: the labels are balanced
    assert scores["accuracy"] >= 90, scores


# ---- 3. zero-shot transfer to Fake-English -----------------------------------------------------
# tiny, not mini: see the module docstring (mini stays on the unigram plateau within this budget).
FAKE_PRETRAINING = ("--preset", "tiny", "--stream-len", 8, "--batch-size", 256, "--dropout", 0, "--lr", 5e-3,
                    "--warmup-steps", 50, "--max-steps", 1000, "--eval-every", 1000, "--save-every", 1000,
                    "--log-every", 200)


@pytest.fixture(scope="module")
def fake_english(tmp_path_factory) -> Path:
    """English and Fake-English token stores under a prefixed vocabulary, the tagging files, and the
    Default model pretrained on both languages."""
    if not MIRROR.is_dir():
        pytest.fail(f"data mirror not found at {MIRROR}; set XLT_DATA_MIRROR")
    root = tmp_path_factory.mktemp("fake-english")
    names = ("dev", "en.train", f"{FAKE}.train", "tagging")
    for name, lines in zip(names, fake_english_data.wikipedia_cuts(MIRROR, (60_000, 400_000, 400_000, 180_000))):
        (root / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        xlt("tokenize", "--lang", "en", "--lowercase", root / f"{name}.txt", "-o", root / f"{name}.tok")
    xlt("bpe", "learn", "--merges", 500, "-o", root / "codes", root / "en.train.tok")
    for name in names:
        xlt("bpe", "apply", "--codes", root / "codes", root / f"{name}.tok", "-o", root / f"{name}.bpe")
    for lang in ("en", FAKE):
        xlt("bpe", "vocab", "-o", root / f"{lang}.vocab", root / f"{lang}.train.bpe")
    xlt("bpe", "union", "--vocab", "en", root / "en.vocab", "--vocab", FAKE, root / f"{FAKE}.vocab",
        "--prefix-lang", "-o", root / "vocab")
    for lang in ("en", FAKE):
        xlt("binarize", "--vocab", root / "vocab", "--lang", lang, root / f"{lang}.train.bpe", "-o", root / f"{lang}.train")
        xlt("binarize", "--vocab", root / "vocab", "--lang", lang, root / "dev.bpe", "-o", root / f"{lang}.dev")
    runs = fake_english_data.tagging_sentences(root / "tagging.tok")
    assert len(runs) >= 1000
    for split, part in (("train", runs[:600]), ("dev", runs[-400:-200]), ("test", runs[-200:])):
        fake_english_data.write_tagged(root / f"tagging.{split}", part)
    pretrain_fake_english(root, "default")
    return root


def pretrain_fake_english(root: Path, name: str, *sharing) -> Path:
    xlt("pretrain", "--run-dir", root / name, "--vocab", root / "vocab", "--lowercase",
        "--codes", "en", root / "codes", "--codes", FAKE, root / "codes",
        "--train", "en", root / "en.train", "--train", FAKE, root / f"{FAKE}.train",
        "--dev", "en", root / "en.dev", "--dev", FAKE, root / f"{FAKE}.dev", *FAKE_PRETRAINING, *sharing)
    return root / name


def tagging_transfer(root: Path, run: str, checkpoint: str = "last") -> dict[str, float]:
    """Test F1 per language of a tagger fine-tuned on English only, mean of three fine-tuning seeds
    (the English dev set alone selects each seed's epoch). One seed is not enough: on inputs it has
    never been trained for, a tagger's spurious entities swing its F1 by 20 points from seed to seed."""
    out = root / f"tagging-{run}-{checkpoint}"
    xlt("finetune", "ner", "--model", root / run, "-o", out, "--checkpoint", checkpoint, "--seeds", "1,2,3",
        "--train", "en", root / "tagging.train", "--dev", "en", root / "tagging.dev",
        "--eval", "en", root / "tagging.dev", root / "tagging.test",
        "--eval", FAKE, root / "tagging.dev", root / "tagging.test",
        "--batch-size", 16, "--encoder-lr", 2e-3, "--epochs", 5)
    records = json.loads((out / "results.json").read_text())["runs"]
    assert len(records) == 3 and all(r["status"] == "done" for r in records)
    return {lang: float(np.mean([r["results"]["plain"][lang]["test"]["f1"] for r in records])) for lang in ("en", FAKE)}


@pytest.fixture(scope="module")
def default_transfer(fake_english) -> dict[str, float]:
    return tagging_transfer(fake_english, "default")


def test_zero_shot_transfer_to_fake_english_needs_pretraining(fake_english, default_transfer):
    vocab = Vocabulary.load(fake_english / "vocab")
    assert vocab.shared_tokens("en", FAKE) == []   # nothing but the specials is shared
    untrained = tagging_transfer(fake_english, "default", checkpoint="untrained")
    # English is easy for both (a word-to-tag lookup), so the gap on Fake-English is transfer alone.
    assert default_transfer["en"] >= 95 and untrained["en"] >= 90, (default_transfer, untrained)
    assert default_transfer[FAKE] >= 20 and untrained[FAKE] <= 0.5 * default_transfer[FAKE], (default_transfer, untrained)


def test_zero_shot_transfer_to_fake_english_needs_shared_layers(fake_english, default_transfer):
    pretrain_fake_english(fake_english, "separate", "--sharing", "sep-emb", "--separate-layers", 1, 1)
    # Both models learned their languages about as well: a lower transfer is the sharing's doing.
    for lang in ("en", FAKE):
        key = f"valid_{lang}_mlm_ppl"
        default_ppl, separate_ppl = (last_metrics(fake_english / run, key)[key] for run in ("default", "separate"))
        assert separate_ppl < 2 * default_ppl and default_ppl < 250, (lang, default_ppl, separate_ppl)
    scores = tagging_transfer(fake_english, "separate")
    assert scores["en"] >= 90, scores
    assert scores[FAKE] <= 0.7 * default_transfer[FAKE], (scores, default_transfer)

"""Does the grammar's NLI transfer to Fake-English at a test's size, where its parsing does?

The probe behind docs/notes/2026-12-05-fake-english-nli-at-test-size.md. It builds the pair of
tests/test_learning_parsing_transfer.py (the grammar of ``grammar_tasks`` with 440 made-up open-class
words, 20,000 sentences per language, Fake-English by ``xlt fake-english``), pretrains its Default
model (the test's settings) for each ``--seeds``, fine-tunes ``xlt finetune xnli`` on English pairs of
the grammar's NLI rule (the same verb: entailment; its antonym: contradiction; another verb: neutral)
with three fine-tuning seeds, and prints test accuracy on the English pairs and on their Fake-English
twins, beside the untrained control (``--control``), with how well the input embeddings pair each
word with its twin (P@1 among the words of its class, each language's mean removed).

Two kinds of variant ask what the transfer needs:

* ``--objects-by-verb``: each verb takes its objects from nouns of its own, so that a verb's contexts
  single out its twin (in the plain grammar every verb has the same contexts).
* ``--anchors verbs``: the Fake-English text keeps the verbs' English spelling (shared tokens), in
  pretraining and in the test pairs; ``--anchors nouns`` keeps the nouns' instead (with
  ``--objects-by-verb``, a verb and its twin then take the very same object tokens); ``--anchors
  open`` shares all three open classes, the languages then differing in their closed classes only.
  xlt's Fake-English tokenizer maps every string to its twin, so with anchors the task text is
  passed through as it is (the grammar is already tokenized: on plain pairs this is what the
  English and Fake-English tokenizers give, checked below).

Example (one thread, ~6 min for two pretraining seeds and the control; ~12 with ``--steps 8000``;
each variant in a folder of its own):
    .venv/bin/python bench/probe_nli_transfer.py --out /tmp/probe-nli --seeds 0,1 --control
    .venv/bin/python bench/probe_nli_transfer.py --out /tmp/probe-nli-anchors --anchors verbs --control
    .venv/bin/python bench/probe_nli_transfer.py --out /tmp/probe-nli-nouns --anchors nouns --objects-by-verb
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import grammar_tasks  # noqa: E402  (test support: the grammar whose answers are known)

from xlt.cli import main  # noqa: E402
from xlt.model.checkpoint_io import load_checkpoint  # noqa: E402
from xlt.text import tokenize  # noqa: E402
from xlt.text.fake import FAKE, to_fake  # noqa: E402
from xlt.text.vocab import Vocabulary  # noqa: E402

# tests/test_learning_parsing_transfer.py's pretraining (Table 1's Default for the pair: no language embeddings)
PRETRAINING = ("--preset", "tiny", "--stream-len", 32, "--batch-size", 64, "--dropout", 0, "--no-lang-embeddings",
               "--lr", 3e-3, "--warmup-steps", 30, "--log-every", 400)


def xlt(*args) -> None:
    try:
        with contextlib.redirect_stdout(io.StringIO()):   # fine-tuning's summary: the probe prints its own
            main(["-q", *map(str, args)])
    except SystemExit as stop:
        assert not stop.code, f"xlt {' '.join(map(str, args))} exited with {stop.code}"


def anchored(text: str, words: list[str]) -> str:
    """Fake-English text with ``words`` back in their English spelling (tabs and lines kept)."""
    back = {to_fake(word): word for word in words}
    return "\n".join("\t".join(" ".join(back.get(w, w) for w in part.split(" ")) for part in line.split("\t"))
                     for line in text.split("\n"))


def word_classes(lexicon: grammar_tasks.Lexicon) -> dict[str, list[str]]:
    return {"verbs": lexicon.verbs, "nouns": list(lexicon.nouns), "adjectives": list(lexicon.adjectives)}


def build(root: Path, lexicon: grammar_tasks.Lexicon, train_pairs: int, anchors: str) -> None:
    """Pretraining stores and vocabulary of the pair, and NLI train (English), dev and test files."""
    classes = word_classes(lexicon)
    shared = ([] if anchors == "none" else [w for ws in classes.values() for w in ws] if anchors == "open"
              else classes[anchors])
    grammar_tasks.fake_english_pair(root, lexicon, xlt, lambda text: anchored(text, shared))
    held = grammar_tasks.sentences(1000, seed=2, lexicon=lexicon)
    dev, test = held[:150], held[150:450]
    seen = {s.text for s in held}
    train = [s for s in grammar_tasks.sentences(train_pairs, seed=1, lexicon=lexicon) if s.text not in seen]
    for i, (split, items) in enumerate((("train", train), ("dev", dev), ("test", test))):
        grammar_tasks.write_nli(root / f"nli.en.{split}", items, seed=10 + i, lexicon=lexicon)
    for split in ("dev", "test"):
        twin = root / f"nli.{FAKE}.{split}"
        xlt("fake-english", "--format", "xnli", root / f"nli.en.{split}", "-o", twin)
        twin.write_text(anchored(twin.read_text(encoding="utf-8"), shared), encoding="utf-8")


def twin_p1(root: Path, run: str, lexicon: grammar_tasks.Lexicon, anchors: str) -> dict[str, float]:
    """P@1 of each English word's twin among its class's twins, by cosine of centred input embeddings."""
    vocab = Vocabulary.load(root / "vocab")
    weights = load_checkpoint(root / run / "checkpoints" / "last.pt")["model"]["encoder.token_embeddings.weight"]
    classes = {name: ws for name, ws in word_classes(lexicon).items()
               if anchors not in (name, "open")}   # shared words are one token
    if not classes:
        return {}
    words = [w for ws in classes.values() for w in ws]
    mean = {lang: weights[[vocab.index(f(w)) for w in words]].float().mean(0)
            for lang, f in (("en", str), (FAKE, to_fake))}
    scores = {}
    for name, ws in classes.items():
        en = torch.nn.functional.normalize(weights[[vocab.index(w) for w in ws]].float() - mean["en"], dim=1)
        fake = torch.nn.functional.normalize(weights[[vocab.index(to_fake(w)) for w in ws]].float() - mean[FAKE], dim=1)
        scores[name] = 100 * float(((en @ fake.T).argmax(1) == torch.arange(len(ws))).float().mean())
    return scores


def nli_transfer(root: Path, run: str, checkpoint: str, args) -> list[tuple[float, float]]:
    """(English, Fake-English) test accuracy of each fine-tuning seed (English dev selects the epoch)."""
    out = root / f"nli-{run}-{checkpoint}"
    xlt("finetune", "xnli", "--model", root / run, "-o", out, "--checkpoint", checkpoint, "--seeds", "1,2,3",
        "--train", "en", root / "nli.en.train", "--dev", "en", root / "nli.en.dev",
        *(x for lang in ("en", FAKE) for x in ("--eval", lang, root / f"nli.{lang}.dev", root / f"nli.{lang}.test")),
        "--batch-size", 32, "--encoder-lr", args.lr, "--head-lr", args.lr, "--epochs", args.epochs,
        "--epoch-size", args.train_pairs, "--task-option", "pooling", '"mean"')
    runs = json.loads((out / "results.json").read_text())["runs"]
    return [tuple(r["results"]["plain"][lang]["test"]["accuracy"] for lang in ("en", FAKE)) for r in runs]


def main_probe() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="working directory (made; reused if it exists)")
    parser.add_argument("--seeds", default="0,1", help="pretraining seeds")
    parser.add_argument("--steps", type=int, default=1600, help="pretraining steps (the parsing test's)")
    parser.add_argument("--train-pairs", type=int, default=8000, help="English NLI training pairs")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--lr", type=float, default=1e-3, help="encoder and head learning rate")
    parser.add_argument("--nouns", type=int, default=300, help="made-up nouns (the parsing test's 300)")
    parser.add_argument("--objects-by-verb", action="store_true", help="each verb takes objects of its own")
    parser.add_argument("--anchors", choices=("none", "verbs", "nouns", "open"), default="none",
                        help="a word class spelled alike in both languages (open: all three open classes)")
    parser.add_argument("--control", action="store_true", help="also the first seed's untrained control")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lexicon = grammar_tasks.Lexicon.pseudo(nouns=args.nouns, adjectives=100, verb_pairs=20,
                                           objects_by_verb=args.objects_by_verb)
    plain = [s.text for s in grammar_tasks.sentences(200, seed=5, lexicon=lexicon)]
    assert all(tokenize.Tokenizer("en").tokenize(t) == t for t in plain)
    assert all(tokenize.Tokenizer(FAKE).tokenize(to_fake(t)) == to_fake(t) for t in plain)
    if args.anchors != "none":
        tokenize.Tokenizer.tokenize = lambda self, line: " ".join(line.split())
    root = args.out
    # what the folder's data, models and fine-tuning runs were made with: they are reused, never mixed
    made_with = {k: v for k, v in vars(args).items() if k not in ("out", "seeds", "control")}
    if (root / "settings.json").exists():
        if json.loads((root / "settings.json").read_text()) != made_with:
            sys.exit(f"{root} was made with other settings ({root / 'settings.json'}): give another --out")
    elif root.exists() and any(root.iterdir()):
        sys.exit(f"{root} holds files but no settings.json: give another --out")
    else:
        root.mkdir(parents=True, exist_ok=True)
        build(root, lexicon, args.train_pairs, args.anchors)
        (root / "settings.json").write_text(json.dumps(made_with, indent=1) + "\n")
    models = []
    for seed in map(int, args.seeds.split(",")):
        run = f"default-{seed}"
        if not (root / run / "checkpoints" / "last.pt").exists():
            xlt("pretrain", "--run-dir", root / run, "--vocab", root / "vocab", "--train", "en", root / "en.train",
                "--train", FAKE, root / f"{FAKE}.train", "--dev", "en", root / "en.dev", "--dev", FAKE,
                root / f"{FAKE}.dev", *PRETRAINING, "--max-steps", args.steps, "--eval-every", args.steps,
                "--save-every", args.steps, "--seed", seed)
        models.append((run, "last"))
    if args.control:
        models.append((models[0][0], "untrained"))
    print("| model | English test (3 seeds) | Fake-English test | twin P@1 at the embeddings |")
    print("|---|---|---|---|")
    for run, checkpoint in models:
        scores = np.array(nli_transfer(root, run, checkpoint, args))
        p1 = twin_p1(root, run, lexicon, args.anchors) if checkpoint == "last" else {}
        cells = [" / ".join(f"{x:.1f}" for x in scores[:, i]) + f" (mean {scores[:, i].mean():.1f})" for i in (0, 1)]
        print(f"| {run} {checkpoint} | {cells[0]} | {cells[1]} | "
              + ", ".join(f"{k} {v:.1f}" for k, v in p1.items()) + " |", flush=True)


if __name__ == "__main__":
    main_probe()

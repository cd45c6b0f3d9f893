"""Tiny pretraining inputs built through the real CLI: a vocabulary with ownership and token stores."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import synthetic
from conftest import run_xlt

from xlt.text.vocab import Vocabulary, ownership_masks


def build_inputs(root: Path, n_train: int = 300, n_dev: int = 40, prefix_lang: bool = False) -> dict:
    """en/fr train and dev stores from the synthetic grammar; returns the CLI arguments for them."""
    root.mkdir(parents=True, exist_ok=True)
    en, fr = synthetic.corpus(n_train + n_dev, seed=1)
    texts = {"en": en, "fr": fr}
    counts = {lang: Counter(w for line in lines for w in line.split()) for lang, lines in texts.items()}
    if prefix_lang:
        merged = {f"{lang}:{w}": c for lang, cnt in counts.items() for w, c in cnt.items()}
        owners = ownership_masks([(lang, [f"{lang}:{w}" for w in cnt]) for lang, cnt in counts.items()], ["en", "fr"])
    else:
        merged = dict(counts["en"] + counts["fr"])
        owners = ownership_masks([(lang, cnt) for lang, cnt in counts.items()], ["en", "fr"])
    vocab = Vocabulary.from_counts(merged, ["en", "fr"], owners, prefix_lang=prefix_lang)
    vocab.save(root / "vocab")
    args = ["--vocab", str(root / "vocab")]
    for lang, lines in texts.items():
        for split, part in (("train", lines[:n_train]), ("dev", lines[n_train:])):
            text = root / f"{lang}.{split}.txt"
            text.write_text("\n".join(part) + "\n", encoding="utf-8")
            run_xlt("binarize", "--vocab", root / "vocab", "--lang", lang, text, "-o", root / f"{lang}.{split}",
                    check=True)
            args += [f"--{split}", lang, str(root / f"{lang}.{split}")]
    return {"args": args, "vocab": vocab, "root": root}



def tiny_args(max_steps: int, **extra: str) -> list[str]:
    args = ["--preset", "tiny", "--stream-len", "16", "--batch-size", "4", "--warmup-steps", "5", "--lr", "1e-3",
            "--log-every", "2", "--eval-every", "5", "--save-every", "3", "--max-steps", str(max_steps)]
    for k, v in extra.items():
        args += [f"--{k.replace('_', '-')}", v]
    return args


TINY_RUN_STEPS = 6


def pretrain_tiny_run(root: Path, steps: int = TINY_RUN_STEPS) -> Path:
    """A tiny en/fr model pretrained on the synthetic grammar (a few seconds); returns its run directory."""
    inputs = build_inputs(root / "inputs")
    run_xlt("pretrain", "--run-dir", root / "run", *inputs["args"], *tiny_args(steps), check=True)
    return root / "run"

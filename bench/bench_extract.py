"""Extraction throughput: sentences/s of ``sentence_vectors`` (every layer kept) on real sentences.

A randomly initialised model of the chosen preset (speed does not depend on the weights) reads the
XNLI dev sentences (premises and hypotheses of one language) through a word-level vocabulary built
from them; the figure includes tokenization, batching, the forward pass and mean pooling.

Example:
    .venv/bin/python bench/bench_extract.py --preset small --threads 2
    .venv/bin/python bench/bench_extract.py --preset wu2020 --n 512 --threads 2
    python bench/bench_extract.py --preset wu2020 --n 20000 --device cuda --batch-size 128
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from xlt.analysis.extract import sentence_vectors  # noqa: E402
from xlt.model.config import EncoderConfig  # noqa: E402
from xlt.model.heads import MaskedLM  # noqa: E402
from xlt.model.xlt_run import PretrainedRun  # noqa: E402
from xlt.text.tokenize import Tokenizer  # noqa: E402
from xlt.text.vocab import Vocabulary  # noqa: E402
from xlt.utils.textio import read_lines  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def xnli_sentences(lang: str, n: int) -> list[str]:
    """Unique premises and hypotheses of the XNLI dev set, first ``n``."""
    seen: dict[str, None] = {}
    for line in read_lines(REPO / "data" / "xnli" / f"dev-{lang}.tsv"):
        for sentence in line.split("\t")[:2]:
            seen.setdefault(sentence)
    sentences = list(seen)
    while len(sentences) < n:  # repeat when more are asked for than the dev set holds
        sentences += sentences
    return sentences[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small", help="model preset: tiny, small, wu2020")
    ap.add_argument("--lang", default="en")
    ap.add_argument("--n", type=int, default=2000, help="sentences to encode")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads [default: torch's]")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    sentences = xnli_sentences(args.lang, args.n)
    tokenizer = Tokenizer(args.lang)
    counts = Counter(t for s in sentences for t in tokenizer.tokenize(s).split())
    vocab = Vocabulary.from_counts(dict(counts))
    config = EncoderConfig.preset(args.preset, vocab_size=len(vocab), languages=[args.lang])
    torch.manual_seed(0)
    model = MaskedLM(config).eval()
    run = PretrainedRun("bench", model, config, vocab, {args.lang: {"codes": None}}, 0)

    start = time.perf_counter()
    subwords = sum(len(ids) for ids in run.text(args.lang).encode_lines(sentences))
    tokenize_s = time.perf_counter() - start
    sentence_vectors(run, args.lang, sentences[:args.batch_size], device=args.device)  # warm-up
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    X = sentence_vectors(run, args.lang, sentences, batch_size=args.batch_size, device=args.device)
    total_s = time.perf_counter() - start
    print(f"preset {args.preset} ({config.n_layers} layers, d={config.d_model}), {args.device}, "
          f"threads {torch.get_num_threads()}, batch {args.batch_size}, load {os.getloadavg()[0]:.1f}")
    print(f"{len(sentences)} sentences, {subwords} subwords ({subwords / len(sentences):.1f}/sentence), "
          f"output {tuple(X.shape)} = {X.nbytes / 2**20:.0f} MiB")
    print(f"tokenize+encode only: {len(sentences) / tokenize_s:,.0f} sentences/s")
    print(f"extract (all layers): {total_s:.2f} s = {len(sentences) / total_s:,.1f} sentences/s, "
          f"{subwords / total_s:,.0f} subwords/s")


if __name__ == "__main__":
    main()

"""The whole pretraining loop: tokens/s, model FLOPs utilisation, and how long it waits for data.

Runs the real ``Pretrainer`` (streams from memory-mapped stores, language sampling, masking,
checkpoints) on synthetic stores for a few steps and reads its ``metrics.jsonl``. The data-wait
share is the fraction of wall time the loop spent drawing and masking batches: it should stay a
few percent, i.e. data loading is never the bottleneck.

Example:
    .venv/bin/python bench/bench_pretrain.py                          # CPU, small preset, fp32
    .venv/bin/python bench/bench_pretrain.py --precision bf16
    python bench/bench_pretrain.py --preset wu2020 --batch 96 --stream-len 256 --steps 60   # GPU, bf16
    python bench/bench_pretrain.py --preset wu2020 --batch 96 --stream-len 256 --steps 30 --profile
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_model_flops import matmul_peak_tflops  # noqa: E402

from xlt.data.store import binarize  # noqa: E402
from xlt.pretrain import distributed  # noqa: E402
from xlt.pretrain.config import PretrainConfig  # noqa: E402
from xlt.pretrain.plan import resolve  # noqa: E402
from xlt.pretrain.trainer import Pretrainer  # noqa: E402
from xlt.text.vocab import Vocabulary, ownership_masks  # noqa: E402


def synthetic_inputs(root: Path, vocab_size: int, sentences: int) -> dict:
    """en/fr stores of random sentences over a shared synthetic vocabulary."""
    words = [f"w{i}" for i in range(vocab_size)]
    vocab = Vocabulary.from_counts({w: vocab_size - i for i, w in enumerate(words)}, ["en", "fr"],
                                   ownership_masks([("en", words), ("fr", words)], ["en", "fr"]))
    vocab.save(root / "vocab")
    rng = np.random.default_rng(0)
    paths = {}
    for lang in ("en", "fr"):
        for split, n in (("train", sentences), ("dev", 200)):
            text = root / f"{lang}.{split}.txt"
            with open(text, "w") as f:
                for _ in range(n):
                    f.write(" ".join(words[j] for j in rng.integers(0, vocab_size, rng.integers(8, 40))) + "\n")
            binarize(text, vocab, lang, root / f"{lang}.{split}")
            paths[(lang, split)] = str(root / f"{lang}.{split}")
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--sharing", default="default")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--stream-len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--vocab-size", type=int, default=30000)
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--compile", action="store_true", help="xlt pretrain --compile (CUDA only)")
    ap.add_argument("--profile", action="store_true",
                    help="torch.profiler over the whole run: where the loop's time goes beside the step's")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = synthetic_inputs(root, args.vocab_size, sentences=20000)
        cfg = PretrainConfig(vocab=str(root / "vocab"), train={l: paths[(l, "train")] for l in ("en", "fr")},
                             dev={l: paths[(l, "dev")] for l in ("en", "fr")}, preset=args.preset,
                             sharing=args.sharing, batch_size=args.batch, stream_len=args.stream_len,
                             max_steps=args.steps, warmup_steps=10, eval_every=10**9, save_every=10**9,
                             log_every=5, precision=args.precision, compile=args.compile)
        # distributed.setup() finds the GPU as xlt pretrain does
        trainer = Pretrainer(resolve(cfg), str(root / "run"), distributed.setup())
        device = trainer.d.device
        t0 = time.perf_counter()
        with profiled(args.profile, device) as prof:
            trainer.train()
        wall = time.perf_counter() - t0
        records = [json.loads(l) for l in (root / "run" / "metrics.jsonl").read_text().splitlines()]
        steady = [r for r in records if "tokens_per_s" in r][1:]  # the first lines include warm-up
        tokens_per_s = float(np.median([r["tokens_per_s"] for r in steady]))
        wait = sum(r["data_wait_s"] for r in records if "data_wait_s" in r)
        flops = trainer.model.flops_per_token(args.stream_len)
        dtype = "bf16" if trainer.autocast_dtype == torch.bfloat16 else "fp32"
        peak = matmul_peak_tflops(device, dtype)  # measured on this device, as bench_model_flops does
        achieved = flops * tokens_per_s / 1e12
        print(f"device {device} ({dtype}{', compiled' if args.compile else ''}), preset {args.preset}, sharing {args.sharing}, "
              f"batch {args.batch} x {args.stream_len}, {args.steps} steps")
        print(f"model FLOPs per token (training): {flops / 1e6:.1f} MFLOP")
        print(f"tokens/s (median of steady windows): {tokens_per_s:,.0f}")
        print(f"achieved {achieved:.3f} TFLOP/s; peak {peak:.3f} TFLOP/s; MFU {100 * achieved / peak:.1f} %")
        print(f"data wait: {wait:.2f} s of {wall:.1f} s wall ({100 * wait / wall:.1f} %)")
        if device.type == "cuda":
            print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
        if prof is not None:
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))


@contextlib.contextmanager
def profiled(wanted: bool, device: torch.device):
    """torch.profiler around the run when ``wanted`` (host and, on CUDA, device activity), else None."""
    if not wanted:
        yield None
        return
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        yield prof


if __name__ == "__main__":
    main()

"""Model FLOPs per token and measured training-step throughput / MFU of xlt's MaskedLM.

Prints, for the ``wu2020`` and ``small`` presets at stream length 256, the training FLOPs per token
(MaskedLM.flops_per_token: 6 * layer params + 12 * L * T * D + 15 % * 6 * D * V), then times
full training steps (forward + backward + Adam) of one preset and reports tokens/s and model FLOPs
utilisation (MFU) against a peak measured on the same device: the best of ten large matmuls in the
step's precision (2048^3 on CPU, 8192^3 of random numbers on CUDA, where an H100 or H200 reaches
~790 TFLOP/s in bf16 against a datasheet 989; --peak-tflops to give one).

On CUDA every optimizer/compile variant is timed (--variants): Adam as the pretraining loop
created it before 2026-11-27 (foreach), fused Adam (what it uses on CUDA now), and fused Adam under
torch.compile; --profile prints the kernels of one step of the first variant by time.

Example:
    .venv/bin/python bench/bench_model_flops.py                       # CPU, small preset, fp32
    .venv/bin/python bench/bench_model_flops.py --dtype bf16 --steps 5
    python bench/bench_model_flops.py --preset wu2020 --batch 96 --profile   # on a GPU box (cuda, bf16)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from xlt.model import EncoderConfig, MaskedLM  # noqa: E402

MASK_ID = 4  # <mask> in xlt.text.vocab.SPECIALS


def pick_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def autocast(device: torch.device, dtype: str):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "bf16")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class MLMBatch(NamedTuple):
    ids: torch.Tensor        # Long [B,T], predicted positions replaced by <mask>
    positions: torch.Tensor  # Long [N,2], (row, position) of each prediction
    targets: torch.Tensor    # Long [N], the original ids there
    chosen: torch.Tensor     # Bool [B,T], True at predicted positions


def mlm_batch(batch: int, seq_len: int, vocab_size: int, device: torch.device, seed: int = 0,
              predicted_fraction: float = 0.15) -> MLMBatch:
    """A random batch with ``predicted_fraction`` of the positions to predict."""
    g = torch.Generator().manual_seed(seed)
    original = torch.randint(5, vocab_size, (batch, seq_len), generator=g)
    chosen = torch.rand(batch, seq_len, generator=g) < predicted_fraction
    ids = original.masked_fill(chosen, MASK_ID)
    return MLMBatch(ids.to(device), chosen.nonzero().to(device), original[chosen].to(device), chosen.to(device))


def time_steps(step: Callable[[], None], device: torch.device, steps: int, warmup: int) -> list[float]:
    """Wall-clock seconds of each of ``steps`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        step()
    synchronize(device)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def xlt_train_step(model: MaskedLM, batch: MLMBatch, lang: str, device: torch.device,
                   dtype: str, fused: bool = False, compiled: bool = False) -> Callable[[], None]:
    """One training step as the pretraining loop runs it; ``fused``: fused Adam (one kernel for the
    whole update), ``compiled``: the forward and backward through torch.compile."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=fused)
    forward = torch.compile(model) if compiled else model

    def step() -> None:
        with autocast(device, dtype):
            loss = forward(batch.ids, lang, None, batch.positions, batch.targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def matmul_peak_tflops(device: torch.device, dtype: str, n: int | None = None, repeats: int = 10) -> float:
    """Best observed TFLOP/s of an n x n x n matmul (2 n^3 FLOPs) in the benchmark's precision; n
    defaults to 8192 on CUDA (smaller products leave a Hopper chip's units idle) and 2048 on CPU."""
    n = n or (8192 if device.type == "cuda" else 2048)
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    a = torch.randn(n, n, device=device, dtype=torch_dtype)
    b = torch.randn(n, n, device=device, dtype=torch_dtype)
    best = min(time_steps(lambda: a @ b, device, repeats, warmup=2))
    return 2 * n ** 3 / best / 1e12


def peak_memory_note(device: torch.device) -> str:
    if device.type == "cuda":
        return f"peak GPU memory {torch.cuda.max_memory_allocated(device) / 2 ** 30:.2f} GiB"
    try:
        import resource
        return f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20:.2f} GiB"
    except ImportError:
        return "peak memory not available"


def machine_note(device: torch.device) -> str:
    if device.type == "cuda":
        return f"device {torch.cuda.get_device_name(device)}"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"device cpu, {torch.get_num_threads()} torch thread(s), {os.cpu_count()} cores, load average {load:.2f}"


def add_step_arguments(parser: argparse.ArgumentParser) -> None:
    """The sizes, device and threads of a timed training step (shared with bench_vs_transformers)."""
    parser.add_argument("--vocab-size", type=int, default=32_000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="auto", help="auto (cuda when available), cpu or cuda")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch (default: torch's choice); on a shared, loaded machine 1 "
                             "thread gives steadier figures than threads that wait on each other")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small", help="preset whose training step is timed")
    add_step_arguments(parser)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default=None,
                        help="fp32 or bf16 autocast (default: bf16 on cuda, fp32 on cpu)")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="peak for MFU (default: a large matmul measured on the device)")
    parser.add_argument("--variants", default=None,
                        help="comma-separated of foreach, fused, compile (default: all three on cuda, foreach on cpu)")
    parser.add_argument("--profile", action="store_true", help="print the kernels of one step by device time")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    dtype = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    torch.manual_seed(0)

    print(f"== FLOPs per token (training, stream length {args.seq_len}, vocabulary {args.vocab_size:,}, "
          f"15 % predicted)")
    for name in ("wu2020", "small"):
        config = EncoderConfig.preset(name, vocab_size=args.vocab_size, languages=["en", "fr"])
        with torch.device("meta"):
            model = MaskedLM(config)
        flops = model.flops_per_token(args.seq_len)
        print(f"{name:7s} params {model.count_parameters() / 1e6:7.1f} M  "
              f"layer params {model.encoder.layer_parameters_per_language() / 1e6:6.2f} M  "
              f"{flops / 1e6:8.1f} MFLOP/token")

    if args.peak_tflops is not None:
        peak, peak_what = args.peak_tflops, "given"
    else:
        peak, peak_what = matmul_peak_tflops(device, dtype), f"best measured {dtype} matmul"
    variants = (args.variants or ("foreach,fused,compile" if device.type == "cuda" else "foreach")).split(",")
    flops = None
    print(f"== training step of {args.preset} ({machine_note(device)}, {dtype}, batch {args.batch} x "
          f"{args.seq_len}, Adam); peak {peak:.1f} TFLOP/s ({peak_what})")
    for variant in variants:
        torch.manual_seed(0)
        config = EncoderConfig.preset(args.preset, vocab_size=args.vocab_size, languages=["en", "fr"])
        model = MaskedLM(config).to(device).train()
        flops = model.flops_per_token(args.seq_len)
        batch = mlm_batch(args.batch, args.seq_len, args.vocab_size, device)
        step = xlt_train_step(model, batch, "en", device, dtype, fused=variant != "foreach",
                              compiled=variant == "compile")
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        started = time.perf_counter()
        times = time_steps(step, device, args.steps, args.warmup)
        median = statistics.median(times)
        tokens_per_s = args.batch * args.seq_len / median
        achieved = flops * tokens_per_s / 1e12
        print(f"{variant:8s} median step {median * 1e3:7.1f} ms (min {min(times) * 1e3:.1f}, max "
              f"{max(times) * 1e3:.1f}, {args.steps} steps; {time.perf_counter() - started:.0f} s with warm-up); "
              f"{tokens_per_s:,.0f} tokens/s; {achieved:.1f} TFLOP/s; MFU {100 * achieved / peak:.1f} %; "
              f"{peak_memory_note(device)}")
        if args.profile and variant == variants[0]:
            print_profile(step, device)
        del model, step, batch
        if device.type == "cuda":
            torch.cuda.empty_cache()


def print_profile(step: Callable[[], None], device: torch.device, rows: int = 25) -> None:
    """The operators of one step, by self time on the device (CPU time on a CPU)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        step()
        synchronize(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=rows, max_name_column_width=60))

if __name__ == "__main__":
    main()

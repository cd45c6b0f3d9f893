"""How long blocked CSLS retrieval takes, and how much memory it needs, at MUSE's scale.

MUSE's word translation test: 1,500 source queries against a 200k-word target space, CSLS with
k = 10, where each target's neighbourhood r_S(y) is its mean cosine to its 10 nearest words of
the whole mapped source space (200k words too). The three parts are timed separately:

* ``r_S``  -- targets x source space: by far the largest (200k x 200k products), linear in both;
* ``r_T``  -- queries x targets;
* ``top-k``-- queries x targets again, scored ``2cos - r_S``, top 10 kept.

Random Gaussian vectors stand in for embeddings (speed does not depend on the values). Peak
memory is the process's maximum resident set, printed next to the size of the input arrays, so
the difference is what the search itself needs (a few blocks of ``block x block`` float32 scores).
On a small machine, ``--source-space`` below 200k measures r_S on part of the space and the full
cost is extrapolated linearly (it is a fixed number of block products per source row).

Example:
    .venv/bin/python bench/bench_csls.py --dim 300
    .venv/bin/python bench/bench_csls.py --dim 768 --source-space 20000 --threads 2
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

from xlt.analysis.retrieval import blocked_topk, as_unit_tensor


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=1500)
    parser.add_argument("--targets", type=int, default=200_000)
    parser.add_argument("--source-space", type=int, default=200_000,
                        help="Rows of the mapped source space for r_S (the full cost is extrapolated to 200k).")
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--block", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=None, help="torch threads [default: torch's choice]")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    gen = torch.Generator().manual_seed(0)
    targets = as_unit_tensor(torch.randn(args.targets, args.dim, generator=gen), args.device)
    source = as_unit_tensor(torch.randn(args.source_space, args.dim, generator=gen), args.device)
    queries = source[:args.queries]
    data_mb = (targets.numel() + source.numel()) * 4 / 2**20
    print(f"queries {args.queries}, targets {args.targets}, source space {args.source_space}, dim {args.dim}, "
          f"block {args.block}, threads {torch.get_num_threads()}, device {args.device}")
    print(f"input arrays: {data_mb:.0f} MB; peak RSS before search: {peak_rss_mb():.0f} MB")

    start = time.perf_counter()
    r_source = blocked_topk(targets, source, 10, args.block)[0].mean(1)
    t_rs = time.perf_counter() - start
    start = time.perf_counter()
    r_target = blocked_topk(queries, targets, 10, args.block)[0].mean(1)
    t_rt = time.perf_counter() - start
    start = time.perf_counter()
    scores, ids = blocked_topk(queries, targets, 10, args.block, key_penalty=r_source, scale=2.0)
    scores = scores - r_target[:, None]
    t_top = time.perf_counter() - start

    full_rs = t_rs * 200_000 / args.source_space
    print(f"r_S   {t_rs:8.2f} s  ({args.targets * args.source_space / t_rs / 1e9:.2f} G sims/s)"
          + (f"  -> {full_rs:.0f} s for a 200k source space" if args.source_space != 200_000 else ""))
    print(f"r_T   {t_rt:8.2f} s")
    print(f"top-k {t_top:8.2f} s")
    print(f"total {t_rs + t_rt + t_top:8.2f} s measured; {full_rs + t_rt + t_top:.0f} s with a 200k source space")
    print(f"peak RSS: {peak_rss_mb():.0f} MB (inputs {data_mb:.0f} MB)")


if __name__ == "__main__":
    main()

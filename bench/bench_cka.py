"""CKA cost at the paper's scale: n sentences x L layers x d dims (default 10k x 9 x 768).

Times the per-layer column (layer i of A against layer i of B), the full layer x layer matrix and
the debiased estimator, all in the feature-space form, and one layer pair in the Gram-matrix form
(O(n²) memory) with ``--gram``. Memory is the peak of numpy allocations (tracemalloc) on top of the
two float32 input stacks.

Example:
    .venv/bin/python bench/bench_cka.py
    .venv/bin/python bench/bench_cka.py --n 10000 --gram
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from xlt.analysis.cka import cka, cka_gram_form, per_layer_cka  # noqa: E402


def measure(label: str, fn) -> object:
    tracemalloc.start()
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{label:<40} {seconds:8.2f} s   peak {peak / 2**20:8.0f} MiB")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--layers", type=int, default=9)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--gram", action="store_true", help="also one layer pair in the Gram-matrix form")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    A = rng.standard_normal((args.layers, args.n, args.dim), dtype=np.float32)
    B = (0.5 * A + rng.standard_normal(A.shape, dtype=np.float32)).astype(np.float32)
    print(f"n={args.n} layers={args.layers} d={args.dim}: inputs 2 x {A.nbytes / 2**20:.0f} MiB float32, "
          f"load {os.getloadavg()[0]:.1f}, BLAS threads {os.environ.get('OMP_NUM_THREADS', 'default')}")
    column = measure("per-layer column (linear)", lambda: per_layer_cka(A, B))
    measure("per-layer column (debiased)", lambda: per_layer_cka(A, B, debiased=True))
    matrix = measure(f"layer x layer matrix {args.layers}x{args.layers}", lambda: per_layer_cka(A, B, matrix=True))
    assert np.allclose(np.diag(matrix), column)
    if args.gram:
        gram = measure("one pair, Gram form (linear)", lambda: cka_gram_form(A[0], B[0]))
        print(f"  feature form {cka(A[0], B[0]):.10f} vs Gram form {gram:.10f}")


if __name__ == "__main__":
    main()

"""`xlt tokenize` throughput with 1 and 2 worker processes on English Wikipedia.

Takes a fixed slice (the first ``--lines`` lines, 20k by default: ~4.5 MB of paragraphs) of the
mirror's English Wikipedia sample, decompresses it to a plain temporary file, and times
:func:`xlt.text.tokenize.tokenize_file` (read, tokenize, write atomically: what the command does,
without interpreter start-up) with ``--workers 1`` (in process) and ``--workers 2`` (two forked
workers; the main process only reads and writes). Prints sentences per second for both and the
speed-up (target: >= 1.7x), also estimated from CPU times so that other jobs on the cores do not
hide it, checks that the two outputs are byte-identical, and prints the load
average, since other jobs sharing the cores change the figures.

Example:
    .venv/bin/python bench/bench_tokenize.py
    .venv/bin/python bench/bench_tokenize.py --lines 50000 --repeats 3
"""

from __future__ import annotations

import argparse
import itertools
import lzma
import os
import resource
import tempfile
import time
from pathlib import Path

from xlt.text.tokenize import TokenizerConfig, tokenize_file

MIRROR = Path(os.environ.get("XLT_DATA_MIRROR", Path(__file__).resolve().parents[2] / "shared" / "data"))


def timed_run(source: Path, output: Path, workers: int) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds of this process, CPU seconds of the (reaped) worker processes."""
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, cpu = time.perf_counter(), time.process_time()
    tokenize_file(source, output, TokenizerConfig("en"), workers=workers)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = sum(getattr(children_after, f) - getattr(children_before, f) for f in ("ru_utime", "ru_stime"))
    return wall, cpu, children


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, default=MIRROR / "mono/en/enwiki_wikiextractor_sample_30MB.txt.xz")
    parser.add_argument("--lines", type=int, default=20_000, help="lines taken from the start of the sample")
    parser.add_argument("--repeats", type=int, default=1, help="runs per worker count; the fastest is reported")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "slice.txt"
        with lzma.open(args.sample, "rt", encoding="utf-8") as f, open(source, "w", encoding="utf-8") as out:
            out.writelines(itertools.islice(f, args.lines))
        size_mb = source.stat().st_size / 1e6
        print(f"slice: {args.lines:,} lines ({size_mb:.1f} MB) of {args.sample.name}; "
              f"{os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.2f}")

        rates, cpu_bound = {}, {}
        for workers in (1, 2):
            wall, main_cpu, workers_cpu = min(timed_run(source, Path(tmp) / f"out{workers}.tok", workers)
                                              for _ in range(args.repeats))
            rates[workers] = args.lines / wall
            # What the run would take on idle cores: the busiest process's CPU time (workers share evenly).
            cpu_bound[workers] = max(main_cpu, workers_cpu / workers)
            print(f"workers={workers}: {wall:6.2f} s wall  {rates[workers]:8,.0f} sentences/s   "
                  f"CPU s: main {main_cpu:.2f}, workers {workers_cpu:.2f}")
        identical = (Path(tmp) / "out1.tok").read_bytes() == (Path(tmp) / "out2.tok").read_bytes()
        print(f"speed-up 2 vs 1 worker: {rates[2] / rates[1]:.2f}x wall (target >= 1.7x), "
              f"{cpu_bound[1] / cpu_bound[2]:.2f}x from CPU times (what idle cores would give); "
              f"outputs identical: {identical}; load average after: {os.getloadavg()[0]:.2f}")

if __name__ == "__main__":
    main()

"""xlt's in-process BPE learner against fastBPE's compiled ``fast learnbpe``, on a few MB of Wikipedia.

Takes the first ``--mb`` MB of the mirror's English sample (whole lines), then times, one run each
with process start-up counted on both sides:

* ``fast learnbpe N CORPUS`` (fastBPE, C++; needs ``make install``'s tool),
* ``python -m xlt bpe learn -n N CORPUS`` (pure Python and numpy, no compiled tool),

checks the two codes files are byte-identical and prints the times, their ratio and the load
average (other jobs on the machine change the figures). ``--repeat R`` shows the best of R rounds.

Example:
    .venv/bin/python bench/bpe_learn.py
    .venv/bin/python bench/bpe_learn.py --mb 20 --merges 40000
"""

from __future__ import annotations

import argparse
import lzma
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xlt.text.fastbpe import fast_tool

REPO = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("XLT_DATA_MIRROR", REPO.parent / "shared" / "data"))
SAMPLE = MIRROR / "mono/en/enwiki_wikiextractor_sample_30MB.txt.xz"


def head_mb(source: Path, target: Path, mb: float) -> int:
    """The first ``mb`` MB of ``source`` in whole lines; returns the number of words."""
    budget, words = int(mb * 1e6), 0
    with lzma.open(source, "rb") as f, open(target, "wb") as out:
        for line in f:
            if budget <= 0:
                break
            out.write(line)
            budget -= len(line)
            words += len(line.split())
    return words


def timed(command: list, stdout: Path) -> float:
    start = time.perf_counter()
    with open(stdout, "wb") as sink:
        subprocess.run(list(map(str, command)), stdout=sink, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=5.0, help="corpus size in MB (default 5)")
    parser.add_argument("--merges", type=int, default=10000, help="number of merges (default 10000)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the best is shown (default 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = work / "corpus.txt"
        words = head_mb(SAMPLE, corpus, args.mb)
        print(f"corpus: {corpus.stat().st_size / 1e6:.1f} MB, {words:,} words; {args.merges:,} merges; "
              f"load average {os.getloadavg()[0]:.2f}")
        fast_s, xlt_s = [], []
        for _ in range(args.repeat):  # in turn, so load changes hit both alike
            fast_s.append(timed([fast_tool(), "learnbpe", args.merges, corpus], work / "fast.codes"))
            xlt_s.append(timed([sys.executable, "-m", "xlt", "bpe", "learn", "-n", args.merges, corpus],
                               work / "xlt.codes"))
        # fastBPE pads with zero-count merges once the pairs run out; xlt stops there
        fast_codes = b"".join(line for line in (work / "fast.codes").read_bytes().splitlines(keepends=True)
                              if not line.endswith(b" 0\n"))
        identical = fast_codes == (work / "xlt.codes").read_bytes()
        print(f"fast learnbpe      {min(fast_s):8.2f} s")
        print(f"xlt bpe learn      {min(xlt_s):8.2f} s   ({min(xlt_s) / min(fast_s):.2f}x fastBPE)")
        print(f"codes byte-identical: {'yes' if identical else 'NO'}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""`xlt bpe apply` against fastBPE's own `fast applybpe` on ~30 MB of English Wikipedia.

Decompresses the mirror's English sample (30 MB), splits punctuation off words with a rough regex
(a stand-in for Moses tokenization), learns codes on the first few MB with `fast learnbpe`, then
times, one run each and with process start-up counted on both sides:

* ``fast applybpe OUT INPUT CODES [VOCAB]`` (fastBPE, multi-threaded C++),
* ``xlt bpe apply --codes CODES [--vocab VOCAB] INPUT -o OUT`` (plain file: wraps the same tool),
* ``xlt bpe apply`` reading stdin (streams through the Python binding, for information),

first without and then with a vocabulary, checks the outputs are byte-identical, and prints the
times and the ratio xlt / fastBPE (target: at most 1.25). Other jobs on the machine change the
figures, so the load average is printed too; ``--repeat R`` shows the best of R rounds instead.

Example:
    .venv/bin/python bench/bench_bpe_apply.py
    .venv/bin/python bench/bench_bpe_apply.py --repeat 3
    .venv/bin/python bench/bench_bpe_apply.py --merges 40000 --learn-mb 10
"""

from __future__ import annotations

import argparse
import lzma
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xlt.text.fastbpe import fast_tool

REPO = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("XLT_DATA_MIRROR", REPO.parent / "shared" / "data"))
SAMPLE = MIRROR / "mono/en/enwiki_wikiextractor_sample_30MB.txt.xz"
PUNCTUATION = re.compile(r"([.,;:!?()\[\]\"«»])")
XLT = [sys.executable, "-m", "xlt"]


def rough_tokenize(source: Path, target: Path) -> None:
    """Put spaces around punctuation and squeeze spaces: close enough to Moses for timing BPE."""
    with lzma.open(source, "rt", encoding="utf-8") as f, open(target, "w", encoding="utf-8") as out:
        for line in f:
            out.write(" ".join(PUNCTUATION.sub(r" \1 ", line).split()) + "\n")


def timed(command: list, stdin: Path | None = None, stdout: Path | None = None) -> float:
    """Wall-clock seconds of one run of ``command`` (its log on stderr dropped)."""
    start = time.perf_counter()
    with open(stdin or os.devnull, "rb") as source, open(stdout or os.devnull, "wb") as sink:
        subprocess.run(list(map(str, command)), stdin=source, stdout=sink, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def compare(work: Path, text: Path, codes: Path, vocab: Path | None, repeat: int) -> None:
    """Time fastBPE, xlt on the file and xlt on stdin (best of ``repeat`` rounds, taken in turn so
    load changes hit all three alike); check the three outputs are identical."""
    fast_out, xlt_out, stream_out = work / "fast.bpe", work / "xlt.bpe", work / "stream.bpe"
    limit = ["--vocab", vocab] if vocab else []
    rounds = [(timed([fast_tool(), "applybpe", fast_out, text, codes, *([vocab] if vocab else [])]),
               timed([*XLT, "bpe", "apply", "--codes", codes, *limit, text, "-o", xlt_out]),
               timed([*XLT, "bpe", "apply", "--codes", codes, *limit], stdin=text, stdout=stream_out))
              for _ in range(repeat)]
    fast_s, xlt_s, stream_s = (min(times) for times in zip(*rounds))
    same = fast_out.read_bytes() == xlt_out.read_bytes() == stream_out.read_bytes()
    label = "with vocabulary" if vocab else "no vocabulary"
    print(f"{label:>16}: fast applybpe {fast_s:6.2f} s | xlt bpe apply (file) {xlt_s:6.2f} s "
          f"= {xlt_s / fast_s:.2f}x | xlt bpe apply (stdin) {stream_s:6.2f} s = {stream_s / fast_s:.2f}x | "
          f"identical: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--merges", type=int, default=20000, help="BPE merges to learn")
    parser.add_argument("--learn-mb", type=float, default=5.0, help="MB of text to learn the codes on")
    parser.add_argument("--repeat", type=int, default=1, help="rounds per timing; the best is shown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        text = work / "en.tok"
        rough_tokenize(SAMPLE, text)
        learn_part = work / "learn.tok"
        learn_part.write_bytes(text.read_bytes()[: int(args.learn_mb * 1e6)].rsplit(b"\n", 1)[0] + b"\n")
        codes = work / "codes"
        learn_s = timed([fast_tool(), "learnbpe", args.merges, learn_part], stdout=codes)
        print(f"input {text.stat().st_size / 1e6:.1f} MB ({sum(1 for _ in open(text, 'rb')):,} lines); "
              f"{args.merges} merges learned on {args.learn_mb:g} MB in {learn_s:.1f} s; "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
        compare(work, text, codes, None, args.repeat)
        vocab = work / "vocab"
        timed([fast_tool(), "getvocab", work / "fast.bpe"], stdout=vocab)
        compare(work, text, codes, vocab, args.repeat)
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

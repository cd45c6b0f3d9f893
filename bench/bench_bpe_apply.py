"""`xlt bpe apply` against fastBPE's own `fast applybpe` on ~30 MB of English Wikipedia.

Decompresses the mirror's English sample (30 MB), splits punctuation off words with a rough regex
(a stand-in for Moses tokenization), learns codes on the first few MB with `fast learnbpe`, then
times, one run each and with process start-up counted on both sides:

* ``fast applybpe OUT INPUT CODES [VOCAB]`` (fastBPE, multi-threaded C++),
* ``xlt bpe apply --codes CODES [--vocab VOCAB] INPUT -o OUT`` (plain file: wraps the same tool),
* ``xlt bpe apply`` reading stdin (streams through the Python binding, for information),

first without and then with a vocabulary, checks the outputs are byte-identical, and prints the
times and the ratio xlt / fastBPE (target: at most 1.25). Other jobs on the machine change the
figures, so the load average is printed too.

Example:
    .venv/bin/python bench/bench_bpe_apply.py
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

from xlt.text.bpe import fast_tool

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


def timed(command: list, stdin: Path | None = None) -> float:
    start = time.perf_counter()
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as f, open(os.devnull, "wb") as sink:
        subprocess.run(list(map(str, command)), stdin=f, stdout=sink if stdin else None, stderr=subprocess.DEVNULL,
                       check=True)
    return time.perf_counter() - start


def compare(work: Path, text: Path, codes: Path, vocab: Path | None) -> None:
    fast_out, xlt_out, stream_out = work / "fast.bpe", work / "xlt.bpe", work / "stream.bpe"
    extra = [vocab] if vocab else []
    fast_s = timed([fast_tool(), "applybpe", fast_out, text, codes, *extra])
    xlt_s = timed([*XLT, "bpe", "apply", "--codes", codes, *(["--vocab", vocab] if vocab else []), text, "-o", xlt_out])
    start = time.perf_counter()
    with open(text, "rb") as f, open(stream_out, "wb") as out:
        subprocess.run(list(map(str, [*XLT, "bpe", "apply", "--codes", codes, *(["--vocab", vocab] if vocab else [])])),
                       stdin=f, stdout=out, check=True)
    stream_s = time.perf_counter() - start
    same = fast_out.read_bytes() == xlt_out.read_bytes() == stream_out.read_bytes()
    label = "with vocabulary" if vocab else "no vocabulary"
    print(f"{label:>16}: fast applybpe {fast_s:6.2f} s | xlt bpe apply (file) {xlt_s:6.2f} s "
          f"= {xlt_s / fast_s:.2f}x | xlt bpe apply (stdin) {stream_s:6.2f} s = {stream_s / fast_s:.2f}x | "
          f"identical: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--merges", type=int, default=20000, help="BPE merges to learn")
    parser.add_argument("--learn-mb", type=float, default=5.0, help="MB of text to learn the codes on")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        text = work / "en.tok"
        rough_tokenize(SAMPLE, text)
        learn_part = work / "learn.tok"
        learn_part.write_bytes(text.read_bytes()[: int(args.learn_mb * 1e6)].rsplit(b"\n", 1)[0] + b"\n")
        codes = work / "codes"
        start = time.perf_counter()
        with open(codes, "wb") as f:
            subprocess.run([fast_tool(), "learnbpe", str(args.merges), str(learn_part)], stdout=f,
                           stderr=subprocess.DEVNULL, check=True)
        learn_s = time.perf_counter() - start
        print(f"input {text.stat().st_size / 1e6:.1f} MB ({sum(1 for _ in open(text, 'rb')):,} lines); "
              f"{args.merges} merges learned on {args.learn_mb:g} MB in {learn_s:.1f} s; "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
        compare(work, text, codes, None)
        vocab = work / "vocab"
        with open(vocab, "wb") as f:
            subprocess.run([fast_tool(), "getvocab", str(work / "fast.bpe")], stdout=f, stderr=subprocess.DEVNULL,
                           check=True)
        compare(work, text, codes, vocab)
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

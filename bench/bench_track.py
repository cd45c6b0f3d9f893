"""What one snapshot's evaluation by ``xlt track`` costs, per measure, at the demo scale.

Builds a small en-fr run the way make/text.mk does (the first --lines lines of each Wikipedia
sample tokenized, one joint BPE of --merges merges, token stores), pretrains the demo's mini preset
(8 layers x 64) for --steps steps with a snapshot at the end, then times ``xlt track`` on that one
snapshot with the demo's data: the XNLI dev premises (CKA, language identity, contextual words),
the MUSE en-fr test dictionary with 2,000 lines of the pretraining text for contextual words (the
demo's CWORD_SENTENCES), Tatoeba fra-eng, WikiANN NER (make/dynamics.mk's TRACK_ARGS:
1,000 training sentences, 3 epochs, 1,000 dev/test sentences). Each measure is timed alone in a
fresh tracking directory (so a measure that shares sentence vectors with another pays for them),
after the random encoder's bound has been computed (it is computed once per run, not per snapshot);
the "all" row is one snapshot with every measure, as cron pays it. The weights barely matter to
the cost: only the number of layers, the width and the data do.

Example:
    .venv/bin/python bench/bench_track.py                 # 1 thread, the demo's data
    .venv/bin/python bench/bench_track.py --threads 2 --device cpu
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("XLT_DATA", REPO / "data"))
MEASURES = ["dev_ppl", "cka", "word_p1", "word_mrr", "sentence_p1", "lang_id", "ner_f1"]
TRACK_ARGS = ["--ner-epochs", "3", "--ner-train-sentences", "1000", "--max-sentences", "1000", "--ner-lr", "3e-3"]


def xlt(*args, env=None) -> None:
    proc = subprocess.run([sys.executable, "-m", "xlt", *map(str, args)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"xlt {' '.join(map(str, args[:2]))} failed:\n{proc.stderr[-3000:]}")


def first_lines(corpus: Path, n: int, out: Path) -> Path:
    with lzma.open(corpus, "rt", encoding="utf-8") as f, open(out, "w", encoding="utf-8") as g:
        kept = 0
        for line in f:
            if line.strip():
                g.write(line)
                kept += 1
                if kept == n:
                    break
    return out


def build_run(root: Path, lines: int, merges: int, steps: int, env) -> Path:
    for lang in ("en", "fr"):
        corpus = next((DATA / "mono" / lang).glob("*.xz"))
        raw = first_lines(corpus, lines + 500, root / f"{lang}.raw")
        xlt("tokenize", "--lang", lang, raw, "-o", root / f"{lang}.tok", env=env)
        text = (root / f"{lang}.tok").read_text(encoding="utf-8").splitlines(keepends=True)
        (root / f"{lang}.train.tok").write_text("".join(text[:lines]), encoding="utf-8")
        (root / f"{lang}.dev.tok").write_text("".join(text[lines:]), encoding="utf-8")
    xlt("bpe", "learn", "--merges", merges, "-o", root / "codes", root / "en.train.tok", root / "fr.train.tok", env=env)
    for lang in ("en", "fr"):
        for split in ("train", "dev"):
            xlt("bpe", "apply", "--codes", root / "codes", root / f"{lang}.{split}.tok", "-o",
                root / f"{lang}.{split}.bpe", env=env)
    xlt("bpe", "vocab", "--lang", "en", "--lang", "fr", "-o", root / "vocab", root / "en.train.bpe",
        root / "fr.train.bpe", env=env)
    store_args = []
    for lang in ("en", "fr"):
        for split in ("train", "dev"):
            xlt("binarize", "--vocab", root / "vocab", "--lang", lang, root / f"{lang}.{split}.bpe", "-o",
                root / f"{lang}.{split}", env=env)
            store_args += [f"--{split}", lang, root / f"{lang}.{split}"]
        store_args += ["--codes", lang, root / "codes"]
    run = root / "run"
    xlt("pretrain", "--run-dir", run, "--vocab", root / "vocab", *store_args, "--preset", "mini", "--batch-size", "16",
        "--stream-len", "64", "--max-steps", steps, "--warmup-steps", "10", "--lr", "3e-3", "--eval-every", steps,
        "--save-every", steps, "--eval-batches", "10", "--precision", "fp32", "--dropout", "0", env=env)
    shutil.copy(run / "checkpoints" / "last.pt", run / "checkpoints" / f"step-{steps}.pt")
    return run


def demo_data(root: Path) -> list[str]:
    """make/dynamics.mk's data: XNLI dev premises, the MUSE test dictionary, Tatoeba, WikiANN."""
    sys.path.insert(0, str(REPO))
    from xlt.analysis.align_parallel import read_parallel

    en, fr = read_parallel(str(DATA / "xnli" / "dev-en.tsv"), str(DATA / "xnli" / "dev-fr.tsv"))
    (root / "xnli-dev.en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    (root / "xnli-dev.fr.txt").write_text("\n".join(fr) + "\n", encoding="utf-8")
    tatoeba = DATA / "tatoeba" / "v1" / "tatoeba.fra-eng"
    return ["--parallel", root / "xnli-dev.en.txt", root / "xnli-dev.fr.txt",
            "--word-corpus", root / "en.raw", root / "fr.raw", "--word-sentences", "2000",
            "--dictionary", DATA / "muse" / "splits_reconstructed" / "en-fr.5000-6500.txt",
            "--tatoeba", f"{tatoeba}.eng", f"{tatoeba}.fra", "--ner-data-dir", DATA]


def timed_track(run: Path, out: Path, data: list, measures: list[str], device: str, env) -> float:
    args = ["track", "--run", run, "-o", out, "--device", device, *data, *TRACK_ARGS]
    for m in measures:
        args += ["--measures", m]
    start = time.perf_counter()
    xlt(*args, env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=20000, help="training lines per language")
    parser.add_argument("--merges", type=int, default=8000, help="joint BPE merges (the demo's)")
    parser.add_argument("--steps", type=int, default=20, help="pretraining steps before the snapshot")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (OMP_NUM_THREADS)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "XLT_DATA": str(DATA)}
    with tempfile.TemporaryDirectory(prefix="bench-track-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        run = build_run(root, args.lines, args.merges, args.steps, env)
        data = demo_data(root)
        print(f"run: mini preset en-fr, {args.lines:,} lines per language, {args.merges:,} merges, "
              f"{args.steps} steps ({time.perf_counter() - start:.0f} s to build); {args.threads} thread(s), "
              f"{args.device}")
        print(f"{'measure':<12} {'snapshot s':>10} {'bound s':>8}  (measure alone; the bound once per run)")
        rows = {}
        for measure in MEASURES:
            out = root / f"track-{measure}"
            total = timed_track(run, out, data, [measure], args.device, env)
            records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
            snapshot = max(r["seconds"] for r in records if r["snapshot"] != "random")
            bound = max(r["seconds"] for r in records if r["snapshot"] == "random")
            rows[measure] = (snapshot, bound, total)
            print(f"{measure:<12} {snapshot:>10.1f} {bound:>8.1f}")
        out = root / "track-all"
        all_first = timed_track(run, out, data, [], args.device, env)  # every bound, the first snapshot
        shutil.copy(run / "checkpoints" / f"step-{args.steps}.pt", run / "checkpoints" / f"step-{args.steps + 1}.pt")
        all_next = timed_track(run, out, data, [], args.device, env)
        print(f"{'all':<12} {all_next:>10.1f} {'':>8}  one new snapshot, every measure, the whole command "
              f"(start-up included; the first call, with every bound: {all_first:.0f} s)")


if __name__ == "__main__":
    main()

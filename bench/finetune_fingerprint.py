"""A fingerprint of what ``xlt finetune`` writes, to show that a change to the runner's code changed none of it.

Ten tiny ``xlt finetune`` commands (the three tasks on a tiny xlt run, its untrained control, a grid of
two batch sizes x two seeds with a frozen layer, a plugin-free pooling option, two on static word
vectors, two on a tiny transformers BERT) run in fresh processes with fixed seeds, one CPU thread, on
the synthetic grammar's data that the tests build. Every file each one leaves (results.json,
summary.md, runs/<hash>/: config.json, metrics.jsonl, train.json, eval/*, predictions/*, weights) is
hashed, with what changes between two runs of the same code taken out: timings (seconds,
examples/s), the machine and command line (``environment``, ``command``). Run directory names, which
are hashes of each run's identity, are part of the fingerprint.

    .venv/bin/python bench/finetune_fingerprint.py --work /tmp/fp --save /tmp/fp/before.json   # old code
    .venv/bin/python bench/finetune_fingerprint.py --work /tmp/fp --compare /tmp/fp/before.json  # after

The same ``--work`` folder must be used for both: paths in results.json are absolute. The inputs are
built once there and reused. About 2 minutes on one core.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Keys whose values differ between two runs of the same code on the same machine.
VOLATILE = {"seconds", "examples_per_s", "environment", "command", "train_seconds", "eval_seconds",
            "sentences_per_s", "tokens_per_s"}


def build_inputs(work: Path) -> dict[str, Path]:
    """The tiny xlt run, task files, static vectors and transformers model (built once per folder)."""
    import numpy as np
    from finetune_hf_data import write_task
    from finetune_toy import build_toy_world
    from hf_fixtures import _bert

    inputs = work / "inputs"
    world = build_toy_world(inputs / "world")
    paths = {"run": world.run}
    for task in ("ner", "xnli", "parse"):
        files = write_task(inputs / "tasks", task, n_train=24, n_eval=8)
        paths.update({f"{task}:{name}": path for name, path in files.items()})
    static = inputs / "w2v.txt"
    if not static.exists():
        import synthetic
        from xlt.embed.formats import write_word2vec

        en, fr = synthetic.corpus(200, seed=0)
        words = sorted({w for line in en + fr for w in line.split()})[:-5]   # a few words without a vector
        write_word2vec(static, words, np.random.default_rng(0).standard_normal((len(words), 8)).astype(np.float32))
    paths["static"] = static
    if not (inputs / "bert").exists():
        _bert(inputs / "bert")
    paths["bert"] = inputs / "bert"
    return paths


def data_args(paths: dict[str, Path], task: str) -> list[str]:
    f = {name.split(":", 1)[1]: p for name, p in paths.items() if name.startswith(task + ":")}
    return ["--train", "en", str(f["train.en"]), "--dev", "en", str(f["dev.en"]),
            "--eval", "en", str(f["dev.en"]), str(f["test.en"]), "--eval", "fr", str(f["dev.fr"]), str(f["test.fr"])]


def scenarios(paths: dict[str, Path]) -> dict[str, list[str]]:
    run, static, bert = str(paths["run"]), f"static:{paths['static']}", str(paths["bert"])
    xnli = ["--batch-size", "8", "--encoder-lr", "1e-4", "--head-lr", "1e-3", "--epochs", "2", "--epoch-size", "16"]
    tagging = ["--batch-size", "8", "--encoder-lr", "1e-4", "--epochs", "2"]
    return {
        "xnli-xlt": ["xnli", "--model", run, "--checkpoint", "last", *xnli],
        "ner-xlt": ["ner", "--model", run, *tagging],
        "parse-xlt": ["parse", "--model", run, "--checkpoint", "last", *tagging],
        "xnli-untrained": ["xnli", "--model", run, "--checkpoint", "untrained", *xnli],
        "ner-grid": ["ner", "--model", run, "--batch-size", "8,16", "--encoder-lr", "1e-4", "--epochs", "1",
                     "--seeds", "1,2", "--freeze-bottom", "1", "--no-predictions"],
        "xnli-mean": ["xnli", "--model", run, "--task-option", "pooling", "mean", *xnli,
                      "--lang-embedding-at-test", "source"],
        "xnli-static": ["xnli", "--model", static, "--lstm-dim", "8", *xnli],
        "ner-static": ["ner", "--model", static, "--lstm-dim", "8", *tagging],
        "ner-hf": ["ner", "--model", bert, *tagging],
        "xnli-hf": ["xnli", "--model", bert, *xnli],
    }


def canonical(value):
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def file_digest(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix in (".json", ".jsonl"):
        lines = [json.dumps(canonical(json.loads(line))) for line in data.decode().splitlines() if line.strip()] \
            if path.suffix == ".jsonl" else [json.dumps(canonical(json.loads(data)))]
        data = "\n".join(lines).encode()
    return hashlib.sha256(data).hexdigest()


def fingerprint_dir(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): file_digest(p) for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != "lock"}


def run_all(work: Path, only: list[str]) -> dict[str, dict[str, str]]:
    paths = build_inputs(work)
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    prints = {}
    for name, args in scenarios(paths).items():
        if only and name not in only:
            continue
        out = work / "out" / name
        shutil.rmtree(out, ignore_errors=True)
        cmd = [sys.executable, "-m", "xlt", "finetune", *args, "-o", str(out), "--device", "cpu", "--max-len", "64",
               *([] if "--seeds" in args else ["--seeds", "1"]), *data_args(paths, args[0])]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{name} failed ({proc.returncode}):\n{proc.stderr}")
        prints[name] = fingerprint_dir(out)
        print(f"{name}: {len(prints[name])} files", file=sys.stderr)
    return prints


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="folder for inputs and outputs (reused)")
    parser.add_argument("--save", type=Path, help="write the fingerprint to this JSON file")
    parser.add_argument("--compare", type=Path, help="compare with a saved fingerprint; exit 1 on a difference")
    parser.add_argument("--only", nargs="*", default=[], help="scenario names (default: all)")
    args = parser.parse_args()
    prints = run_all(args.work, args.only)
    if args.save:
        args.save.write_text(json.dumps(prints, indent=1, sort_keys=True) + "\n")
    if args.compare:
        saved = json.loads(args.compare.read_text())
        differ = 0
        for name, files in prints.items():
            old = saved.get(name, {})
            for rel in sorted(set(files) | set(old)):
                if files.get(rel) != old.get(rel):
                    differ += 1
                    print(f"DIFFERS {name}/{rel}: {old.get(rel, 'absent')[:12]} -> {files.get(rel, 'absent')[:12]}")
        print(f"{len(prints)} scenario(s), {sum(map(len, prints.values()))} files, {differ} differ")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()

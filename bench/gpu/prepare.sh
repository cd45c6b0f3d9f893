#!/usr/bin/env bash
# Run HERE, on the machine with package registries, before a GPU session: gathers what the GPU box
# lacks into two git-ignored folders that travel with the working tree (device tool: `carry`).
#   .whl/                    pure-Python wheels of xlt's fine-tuning dependencies (conllu, seqeval);
#                            the box's image already has torch, transformers, click, rich, numpy, scipy
#   build/gpu-bench/data/    the English task files bench_finetune reads (about 25 MB, in data/'s layout)
# Then on the GPU box: bash bench/gpu/run.sh   (see bench/README.md)
set -euo pipefail
cd "$(dirname "$0")/../.."
pip=.venv/bin/pip
[ -x "$pip" ] || { echo "bench/gpu/prepare.sh: .venv is missing; run 'make install' first" >&2; exit 2; }

rm -rf .whl && mkdir -p .whl
# Built here as py3-none-any wheels, so the box installs them offline whatever its Python is.
"$pip" wheel -q --no-deps -w .whl conllu seqeval

data=build/gpu-bench/data
rm -rf "$data" && mkdir -p "$data"
files=$(.venv/bin/python - <<'PY'
from xlt.finetune.config import default_path
for task in ("xnli", "ner", "parse"):
    for split in ("train", "dev"):
        print(default_path(task, "data", "en", split)[len("data/"):])
PY
)
for f in $files; do
    [ -f "data/$f" ] || { echo "bench/gpu/prepare.sh: data/$f is missing; run 'make data' first" >&2; exit 2; }
    mkdir -p "$data/$(dirname "$f")" && cp "data/$f" "$data/$f"
done
du -sh .whl "$data"

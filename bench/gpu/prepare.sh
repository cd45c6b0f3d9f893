#!/usr/bin/env bash
# Run HERE, on the machine with package registries, before a GPU session: gathers what the GPU box
# lacks into two git-ignored folders that travel with the working tree (device tool: `carry`).
#   .whl/                    pure-Python wheels of xlt's fine-tuning dependencies (conllu, seqeval, sacremoses);
#                            the box's image already has torch, transformers, click, rich, numpy, scipy
#   build/gpu-bench/data/    the English task files bench_finetune reads (their first 4,096 examples,
#                            in data/'s layout)
#   build/gpu-bench/paths/   small inputs of every command for bench/gpu/cuda_paths.sh (a few MB)
#   build/gpu-bench/curve/   SCALE=gpu's en-fr Default stores and the pretraining arguments of
#                            scales/gpu.mk, for bench/gpu/curve.sh (about 25 MB; made here with make)
# Then on the GPU box: bash bench/gpu/run.sh   (see bench/README.md)
set -euo pipefail
cd "$(dirname "$0")/../.."
pip=.venv/bin/pip
[ -x "$pip" ] || { echo "bench/gpu/prepare.sh: .venv is missing; run 'make install' first" >&2; exit 2; }

rm -rf .whl && mkdir -p .whl
# Built here as py3-none-any wheels, so the box installs them offline whatever its Python is.
"$pip" wheel -q --no-deps -w .whl conllu seqeval sacremoses

data=build/gpu-bench/data
rm -rf "$data" && mkdir -p "$data"
files=$(.venv/bin/python - <<'PY'
from xlt.finetune.config import default_path
for task in ("xnli", "ner", "parse"):
    for split in ("train", "dev"):
        print(default_path(task, "data", "en", split)[len("data/"):])
PY
)
# first N examples of a task file: N lines (tsv) or N blank-line-separated blocks (CoNLL-style)
head_examples() {  # head_examples N FILE
    case $2 in
        *.tsv) head -n "$1" "$2" ;;
        *) awk -v n="$1" 'BEGIN { RS = ""; ORS = "\n\n" } NR <= n' "$2" ;;
    esac
}
for f in $files; do
    [ -f "data/$f" ] || { echo "bench/gpu/prepare.sh: data/$f is missing; run 'make data' first" >&2; exit 2; }
    mkdir -p "$data/$(dirname "$f")" && head_examples 4096 "data/$f" > "$data/$f"
done

# cuda_paths.sh: a small en-fr text pipeline from SCALE=gpu's stores, task files, parallel text
W=work/gpu; joint=$W/data/joint/en-fr
make -s "$joint/stores.stamp" SCALE=gpu
paths=build/gpu-bench/paths
rm -rf "$paths" && mkdir -p "$paths/enfr" "$paths/tasks" "$paths/parallel"
cp "$joint"/{vocab,vocab.langs.json,codes.en,codes.fr} "$paths/enfr/"
for l in en fr; do
    head -n 20000 "$joint/$l.train.bpe" > "$paths/enfr/$l.train.bpe"
    head -n 500 "$joint/$l.dev.bpe" > "$paths/enfr/$l.dev.bpe"
    for split in train dev; do
        .venv/bin/xlt -q binarize --vocab "$joint/vocab" --lang $l "$paths/enfr/$l.$split.bpe" -o "$paths/enfr/$l.$split"
        rm "$paths/enfr/$l.$split.bpe"
    done
    head -n 2000 "$W/raw/$l.dev" > "$paths/parallel/$l.corpus"
    awk -F'\t' 'NR <= 300 { print $1 }' "data/xnli/dev-$l.tsv" > "$paths/parallel/$l.txt"  # line-parallel
done
t=$paths/tasks
head -n 400 data/nli/mnli/mnli_20k.tsv > $t/xnli.en.train
for l in en fr; do
    for split in dev test; do head -n 150 "data/xnli/$split-$l.tsv" > "$t/xnli.$l.$split"; done
done
head_examples 400 data/ner/wikiann/en/train > $t/ner.en.train
head_examples 400 data/ud/en_ewt/en_ewt-ud-train.conllu > $t/parse.en.train
for l in en fr; do
    ud=$([ $l = en ] && echo en_ewt || echo fr_gsd)
    for split in dev test; do
        head_examples 100 "data/ner/wikiann/$l/$split" > "$t/ner.$l.$split"
        head_examples 100 "data/ud/$ud/$ud-ud-$split.conllu" > "$t/parse.$l.$split"
    done
done
head -n 1500 data/muse/splits_reconstructed/en-fr.0-5000.txt > "$paths/en-fr.dict"

# curve.sh: the gpu scale's Default en-fr stores and its pretraining arguments, as make would run them
curve=build/gpu-bench/curve
rm -rf "$curve" && mkdir -p "$curve"
cp "$joint"/{vocab,vocab.langs.json,codes.en,codes.fr} "$joint"/{en,fr}.{train,dev}.{bin,idx,json} "$curve/"
make -s -n "$W/models/default/en-fr/finished" SCALE=gpu | grep -o -- '--sharing .*' > "$curve/args"
du -sh .whl "$data" "$paths" "$curve"

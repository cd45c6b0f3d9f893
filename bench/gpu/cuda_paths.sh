#!/usr/bin/env bash
# Every command's device path on the GPU box, on a tiny model: pretraining through torchrun with one
# GPU (NCCL), then finetune (xnli, ner, parse; and of the run exported to transformers), extract, cka,
# shift-decode, align and track, all with the default --device auto, which must find the GPU. Inputs come from bench/gpu/prepare.sh
# (build/gpu-bench/paths/); the run and the outputs go to $WORK (default build/gpu-bench/paths-out).
# Each step prints one line, ok or FAILED with its log's tail; the exit status counts the failures.
# DEVICE=cpu checks the script itself here (torchrun then uses gloo): XLT_DEVICE=cpu for pretraining
# and --device cpu for the rest.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
IN=build/gpu-bench/paths
WORK=${WORK:-build/gpu-bench/paths-out}
DEVICE=${DEVICE:-auto}
STEPS=${STEPS:-60}
[ -d "$IN" ] || { echo "cuda_paths.sh: $IN is missing; run bench/gpu/prepare.sh first" >&2; exit 2; }
rm -rf "$WORK" && mkdir -p "$WORK/logs"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ "$DEVICE" = cpu ] && export XLT_DEVICE=cpu
xlt() { "$PY" -m xlt "$@"; }
dev=(--device "$DEVICE")
failed=0
step() {  # step NAME COMMAND...: run it, keep its log, say ok or FAILED
    local name=$1; shift
    local t0=$SECONDS
    if "$@" >"$WORK/logs/$name.log" 2>&1; then
        echo "ok      $name ($((SECONDS - t0)) s)"
    else
        echo "FAILED  $name ($((SECONDS - t0)) s, exit $?):"; tail -n 15 "$WORK/logs/$name.log" | sed 's/^/    /'
        failed=$((failed + 1))
    fi
}

D=$IN/enfr
RUN=$WORK/run
step pretrain-torchrun "$PY" -m torch.distributed.run --standalone --nproc_per_node 1 -m xlt -q pretrain \
    --run-dir "$RUN" --vocab $D/vocab --codes en $D/codes.en --codes fr $D/codes.fr \
    --train en $D/en.train --dev en $D/en.dev --train fr $D/fr.train --dev fr $D/fr.dev \
    --preset mini --batch-size 16 --stream-len 64 --max-steps "$STEPS" --warmup-steps 10 --eval-every 30 \
    --save-every 30 --eval-batches 4 --short-stream-len 8 --short-stream-steps 20 --precision auto --snapshot-every 30
step device-recorded "$PY" - "$RUN" "$DEVICE" <<'PY'
import json, sys, torch
run, device = sys.argv[1], sys.argv[2]
state = torch.load(f"{run}/checkpoints/last.pt", map_location="cpu", weights_only=False)
lines = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
print("last step", state.get("step"), "| metrics lines", len(lines), "| last", lines[-1])
assert state.get("step") is not None
PY

F=$IN/tasks
ft() { xlt -q finetune "$@" --model "${MODEL:-$RUN}" --seeds 1 --epochs 1 --batch-size 16 --encoder-lr 5e-5 "${dev[@]}"; }
step finetune-xnli ft xnli --epoch-size 400 --head-lr 1e-4 -o $WORK/ft-xnli --train en $F/xnli.en.train --dev en $F/xnli.en.dev \
    --eval en $F/xnli.en.dev $F/xnli.en.test --eval fr $F/xnli.fr.dev $F/xnli.fr.test
step finetune-ner ft ner -o $WORK/ft-ner --train en $F/ner.en.train --dev en $F/ner.en.dev \
    --eval en $F/ner.en.dev $F/ner.en.test --eval fr $F/ner.fr.dev $F/ner.fr.test
step finetune-parse ft parse -o $WORK/ft-parse --train en $F/parse.en.train --dev en $F/parse.en.dev \
    --eval en $F/parse.en.dev $F/parse.en.test --eval fr $F/parse.fr.dev $F/parse.fr.test

P=$IN/parallel
step extract xlt -q extract --model "$RUN" --lang fr --layers 0,2,4 "${dev[@]}" $P/fr.txt -o $WORK/reps.fr
step extract-word xlt -q extract --model "$RUN" --lang en --level word --pooling mean "${dev[@]}" $P/en.txt \
    -o $WORK/reps.en.words
step cka xlt -q cka compare --model-a "$RUN" --lang-a en --text-a $P/en.txt --lang-b fr --text-b $P/fr.txt \
    --label en-fr --column Bilingual --matrix "${dev[@]}" -o $WORK/cka.en-fr
step cka-random xlt -q cka compare --model-a "$RUN" --lang-a en --text-a $P/en.txt --random-b 0 --lang-b fr \
    --text-b $P/fr.txt --label en-fr --column Random "${dev[@]}" -o $WORK/cka.en-fr.random
step means-en xlt -q shift-decode means --model "$RUN" --lang en "${dev[@]}" $P/en.txt -o $WORK/means.en.npz
step means-fr xlt -q shift-decode means --model "$RUN" --lang fr "${dev[@]}" $P/fr.txt -o $WORK/means.fr.npz
step shift xlt -q shift-decode shift --src $WORK/means.en.npz --tgt $WORK/means.fr.npz -o $WORK/shift.en-fr.npz
# fine-tuning shifts the target's states towards the source's: fr -> en
step shift-back xlt -q shift-decode shift --src $WORK/means.fr.npz --tgt $WORK/means.en.npz -o $WORK/shift.fr-en.npz
step translate xlt -q shift-decode translate --model "$RUN" --shift $WORK/shift.en-fr.npz "${dev[@]}" \
    --input $P/en.txt --reference $P/fr.txt -o $WORK/en-fr.json
step finetune-shift ft xnli --epoch-size 400 --head-lr 1e-4 -o $WORK/ft-xnli-shift --train en $F/xnli.en.train --dev en $F/xnli.en.dev \
    --eval en $F/xnli.en.dev $F/xnli.en.test --eval fr $F/xnli.fr.dev $F/xnli.fr.test \
    --shift $WORK/shift.fr-en.npz --shift-layer 2 --shift-alpha 1
step align-cword xlt -q align contextual-word --model "$RUN" --source-lang en --target-lang fr \
    --source-corpus $P/en.corpus --target-corpus $P/fr.corpus --n-sentences 2000 --map none --no-csls \
    --test-dict $IN/en-fr.dict "${dev[@]}" -o $WORK/cword.json
step align-cword-procrustes xlt -q align contextual-word --model "$RUN" --source-lang en --target-lang fr \
    --source-corpus $P/en.corpus --target-corpus $P/fr.corpus --n-sentences 2000 \
    --train-dict $IN/en-fr.dict --test-dict $IN/en-fr.dict "${dev[@]}" -o $WORK/cword-procrustes.json
step track xlt -q track --run "$RUN" --label mini --parallel $P/en.txt $P/fr.txt --dictionary $IN/en-fr.dict \
    --measures dev_ppl --measures cka --measures word_mrr --measures lang_id "${dev[@]}" -o $WORK/track
step export-hf xlt -q export hf "$RUN" -o $WORK/hf
MODEL=$WORK/hf step finetune-ner-hf ft ner -o $WORK/ft-ner-hf --train en $F/ner.en.train --dev en $F/ner.en.dev \
    --eval en $F/ner.en.dev $F/ner.en.test --eval fr $F/ner.fr.dev $F/ner.fr.test
echo "devices the runs recorded:"; grep -rho '"device": "[^"]*"' "$WORK" | sort | uniq -c
echo "cuda_paths.sh: $failed step(s) failed"
exit $failed

#!/usr/bin/env bash
# Run ON THE GPU BOX, in the repository root, after bench/gpu/prepare.sh ran here: the GPU figures
# that issues #3 and #4 ask for, one log per benchmark under $OUT (default build/gpu-bench/out).
#   1. FLOPs per token and MFU of one wu2020 training step (batch 96 x 256, bf16)
#   2. xlt against transformers' BertForMaskedLM of the same size, interleaved steps
#   3. the whole pretraining loop (streams, masking, checkpoints): tokens/s, MFU, data wait; its profile
#      (pretrain_profile: what the loop adds to the step, 2026-12-04's open question); again with --compile
#   4. the same loop at SCALE=gpu's settings (batch 64), for the reproduction guide's runtime estimate
#   5. fine-tuning throughput per task (sentences/s) and padding waste; finetune_profile: where an XNLI
#      training step's time goes (torch.profiler, host and device)
#   6. cuda_paths: every command's device path on a tiny model (bench/gpu/cuda_paths.sh)
#   7. curve: a few minutes of SCALE=gpu's Default en-fr pretraining, dev perplexity against tokens
#      (bench/gpu/curve.sh; CURVE_SECONDS, default 200)
# Arguments name the benchmarks to run (default: all, in this order), so that the set can be split
# over calls with a time limit: `run.sh flops vs_transformers pretrain finetune cuda_paths`, then
# `run.sh curve`. Each benchmark is stopped after LIMIT seconds (default 240).
# PRESET, BATCH, GPU_SCALE_BATCH, DEVICE, LIMIT, FT_EXAMPLES, PYTHON and OUT can be set in the environment
# (PRESET=tiny BATCH=6 GPU_SCALE_BATCH=4 DEVICE=cpu checks the script itself on a CPU).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
OUT=${OUT:-build/gpu-bench/out}
PRESET=${PRESET:-wu2020}
BATCH=${BATCH:-96}
GPU_SCALE_BATCH=${GPU_SCALE_BATCH:-64}  # scales/gpu.mk's BATCH
DEVICE=${DEVICE:-cuda}
LIMIT=${LIMIT:-240}
FT_EXAMPLES=${FT_EXAMPLES:-2048}  # English examples per task for the fine-tuning figures
export XLT_DEVICE=$DEVICE  # the pretraining loop finds CUDA itself; this lets DEVICE=cpu check the script
wanted=" ${*:-flops vs_transformers pretrain pretrain_profile pretrain_compiled pretrain_gpu_scale finetune finetune_profile cuda_paths curve} "
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/xlt-site .whl/*.whl \
        || exit 2
    export PYTHONPATH=/tmp/xlt-site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

failed=0
bench() {  # bench NAME COMMAND...: if asked for, run with a time limit, keep a log, note a failure, go on
    [[ $wanted == *" $1 "* ]] || return 0
    echo "== $1: ${*:2}"
    timeout "$LIMIT" "${@:2}" 2>&1 | tee "$OUT/$1.log"
    local status=${PIPESTATUS[0]}
    [ "$status" -eq 0 ] || { echo "!! $1 failed (exit $status; 124 = stopped after $LIMIT s)"; failed=1; }
}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi";
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'; } | tee "$OUT/machine.log"

bench flops "$PY" bench/bench_model_flops.py --preset "$PRESET" --batch "$BATCH" --vocab-size 80000 --dtype bf16 --steps 10 --device "$DEVICE" --profile
bench vs_transformers "$PY" bench/bench_vs_transformers.py --preset "$PRESET" --batch "$BATCH" --vocab-size 80000 --dtype bf16 --steps 10 --device "$DEVICE"
bench pretrain "$PY" bench/bench_pretrain.py --preset "$PRESET" --batch "$BATCH" --stream-len 256 --vocab-size 80000 --steps 60 --precision bf16
bench pretrain_profile "$PY" bench/bench_pretrain.py --preset "$PRESET" --batch "$BATCH" --stream-len 256 --vocab-size 80000 --steps 30 --precision bf16 --profile
bench pretrain_compiled "$PY" bench/bench_pretrain.py --preset "$PRESET" --batch "$BATCH" --stream-len 256 --vocab-size 80000 --steps 60 --precision bf16 --compile
bench pretrain_gpu_scale "$PY" bench/bench_pretrain.py --preset "$PRESET" --batch "$GPU_SCALE_BATCH" --stream-len 256 --vocab-size 40000 --steps 60 --precision auto
bench finetune "$PY" bench/bench_finetune.py --preset "$PRESET" --device "$DEVICE" --data-dir build/gpu-bench/data --examples "$FT_EXAMPLES"
bench finetune_profile "$PY" bench/bench_finetune.py --preset "$PRESET" --device "$DEVICE" --data-dir build/gpu-bench/data \
    --examples 256 --tasks xnli --profile 23
bench cuda_paths env DEVICE="${DEVICE/cuda/auto}" PYTHON="$PY" bash bench/gpu/cuda_paths.sh
bench curve env OUT="$OUT" SECONDS_LIMIT="${CURVE_SECONDS:-200}" PYTHON="$PY" bash bench/gpu/curve.sh
exit $failed

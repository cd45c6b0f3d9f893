#!/usr/bin/env bash
# Second device call (2026-12-04): attention without cuDNN (no per-shape plan); fine-tuning first.
set -u
PY=$(command -v "${PYTHON:-python3}"); [[ $PY == /* ]] || PY=$PWD/$PY
DEST=$OUT; R=/tmp/r2; mkdir -p $R
pack() { tar -czf "$DEST/results2.tgz" -C $R . 2>/dev/null; }
trap pack EXIT
t0=$SECONDS
note() { echo "[drive2 +$((SECONDS - t0)) s] $*" | tee -a $R/drive.log; }
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/xlt-site .whl/*.whl
export PYTHONPATH=/tmp/xlt-site PYTHONUNBUFFERED=1
DEV=${DEVICE:-cuda}; PRE=${PRESET:-wu2020}; B=${BATCH:-96}
note "finetune"
timeout 80 $PY bench/bench_finetune.py --preset $PRE --device $DEV --data-dir build/gpu-bench/data --examples 1024 \
   > $R/finetune.log 2>&1; cat $R/finetune.log
note "finetune profile"
timeout 40 $PY bench/bench_finetune.py --preset $PRE --device $DEV --data-dir build/gpu-bench/data --examples 256 \
   --tasks xnli --profile 23 > $R/finetune_profile.log 2>&1; grep -E "^profile|Self C|^xnli" $R/finetune_profile.log
pl() { timeout 60 $PY bench/bench_pretrain.py --preset $PRE --batch $B --stream-len 256 --vocab-size 80000 --steps 60 --precision bf16 "$@"; }
note "pretrain loop, new"; pl > $R/pretrain.log 2>&1; grep -E "tokens/s|MFU" $R/pretrain.log
note "pretrain loop, old (cuDNN attention)"
(cd build/gpu-bench/old && PYTHONPATH=/tmp/xlt-site pl) > $R/pretrain_old.log 2>&1; grep -E "tokens/s|MFU" $R/pretrain_old.log
note "pretrain loop, new, compiled"; pl --compile > $R/pretrain_compiled.log 2>&1; tail -n 8 $R/pretrain_compiled.log
note "done"

#!/usr/bin/env bash
# One device call (2026-12-04): the isolated timings first, then the gpu-scale curve (compiled) beside
# cuda_paths.sh; every log into one tarball under $OUT (at most 8 files come back).
set -u
PY=$(command -v "${PYTHON:-python3}"); [[ $PY == /* ]] || PY=$PWD/$PY   # absolute: the old loop runs from another folder
DEST=$OUT; R=/tmp/r; mkdir -p $R
pack() { tar -czf "$DEST/results.tgz" -C $R . 2>/dev/null; }
trap pack EXIT
t0=$SECONDS
note() { echo "[drive +$((SECONDS - t0)) s] $*" | tee -a $R/drive.log; }
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/xlt-site .whl/*.whl
fi
export PYTHONPATH=/tmp/xlt-site PYTHONUNBUFFERED=1
nvidia-smi > $R/nvidia-smi.txt 2>&1; lscpu > $R/lscpu.txt 2>&1
note "phase A"
PYTHON=$PY LIMIT=${LIMIT_A:-120} OUT=$R bash bench/gpu/run.sh ${A:-flops vs_transformers pretrain} 2>&1 | tail -n 40
if [[ " ${A:-pretrain} " == *" pretrain "* ]]; then
  note "old loop (HEAD 96d98f6)"
  (cd build/gpu-bench/old && PYTHONPATH=/tmp/xlt-site timeout 100 $PY bench/bench_pretrain.py --preset ${PRESET:-wu2020} \
     --batch ${BATCH:-96} --stream-len 256 --vocab-size 80000 --steps 60 --precision ${PRECISION:-bf16}) > $R/pretrain_old.log 2>&1
  tail -n 6 $R/pretrain_old.log
fi
PYTHON=$PY FT_EXAMPLES=${FT_EXAMPLES:-1024} LIMIT=${LIMIT_A:-120} OUT=$R bash bench/gpu/run.sh ${A2:-pretrain_compiled finetune} 2>&1 | tail -n 30
if [ -z "${SKIP_PROFILE:-}" ]; then
  note "fine-tuning profile"
  timeout 90 $PY bench/bench_finetune.py --preset ${PRESET:-wu2020} --device ${DEVICE:-cuda} --data-dir build/gpu-bench/data \
     --examples 256 --tasks xnli --profile 23 > $R/finetune_profile.log 2>&1; head -n 4 $R/finetune_profile.log
fi
pack
note "phase B"
limit_b=$(( ${BUDGET:-540} - (SECONDS - t0) )); limit_b=$(( limit_b < 150 ? 150 : limit_b ))
PYTHON=$PY LIMIT=$limit_b OUT=$R bash bench/gpu/run.sh cuda_paths > $R/cuda_paths_driver.log 2>&1 &
left=$(( ${BUDGET:-540} - (SECONDS - t0) - 60 ))
curve=$(( left < ${CURVE_SECONDS:-150} ? left : ${CURVE_SECONDS:-150} ))
if [ "$curve" -ge 40 ]; then
  note "curve for $curve s"
  PYTHON=$PY CURVE_SECONDS=$curve LIMIT=$((curve + 60)) EXTRA_ARGS=${EXTRA_ARGS---compile} OUT=$R bash bench/gpu/run.sh curve 2>&1 | tail -n 40
else
  note "no time left for the curve"
fi
wait
tail -n 30 $R/cuda_paths_driver.log
note "done"

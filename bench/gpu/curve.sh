#!/usr/bin/env bash
# SCALE=gpu's Default en-fr pretraining for a few minutes on the GPU box: the run make would start
# (the arguments scales/gpu.mk gives it, gathered by bench/gpu/prepare.sh into build/gpu-bench/curve/),
# except that the dev perplexity is measured every EVAL_EVERY steps (default 250) to draw the curve.
# Stopped by SIGTERM after SECONDS_LIMIT seconds (default 200): the run saves a checkpoint and exits
# 143, as a time-limited job would. Prints tokens/s and the dev perplexity against tokens, and copies
# metrics.jsonl to $OUT. EXTRA_ARGS are added to make's arguments (EXTRA_ARGS=--compile: the run
# `make SCALE=gpu COMPILE=1` would start).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
C=build/gpu-bench/curve
OUT=${OUT:-build/gpu-bench/out}
RUN=${RUN:-build/gpu-bench/curve-run}
EVAL_EVERY=${EVAL_EVERY:-250}
SECONDS_LIMIT=${SECONDS_LIMIT:-200}
read -r -a extra <<< "${EXTRA_ARGS:-}"
[ -f "$C/args" ] || { echo "curve.sh: $C is missing; run bench/gpu/prepare.sh first" >&2; exit 2; }
mkdir -p "$OUT" && rm -rf "$RUN"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
read -r -a args < "$C/args"
for i in "${!args[@]}"; do [ "${args[$i]}" = --eval-every ] && args[$((i + 1))]=$EVAL_EVERY; done
timeout -s TERM "$SECONDS_LIMIT" "$PY" -m xlt pretrain --run-dir "$RUN" --vocab $C/vocab \
    --codes en $C/codes.en --codes fr $C/codes.fr --train en $C/en.train --dev en $C/en.dev \
    --train fr $C/fr.train --dev fr $C/fr.dev "${args[@]}" "${extra[@]}" 2>&1 | grep -v "^\s*$" | tail -n 30
echo "xlt pretrain exit ${PIPESTATUS[0]} (143 or 124: stopped by the time limit, as planned)"
cp "$RUN/metrics.jsonl" "$OUT/curve-metrics.jsonl"
"$PY" - "$RUN" <<'PY'
import json, statistics, sys
records = [json.loads(line) for line in open(f"{sys.argv[1]}/metrics.jsonl")]
train = [r for r in records if "tokens_per_s" in r]
evals = [r for r in records if "valid_en_mlm_ppl" in r]
tokens_per_step = 64 * 256  # both curriculum phases read as many tokens a step
short = [r["tokens_per_s"] for r in train[1:] if r["step"] <= 1000]
long = [r["tokens_per_s"] for r in train if r["step"] > 1100]
for name, values in (("short windows (8)", short), ("long windows (256)", long)):
    if values:
        print(f"tokens/s, {name}: median {statistics.median(values):,.0f} over {len(values)} log windows")
print("step | tokens | dev ppl en | dev ppl fr | unigram en / fr")
for r in evals:
    print(f"{r['step']:5d} | {r['step'] * tokens_per_step / 1e6:5.1f} M | {r['valid_en_mlm_ppl']:9.1f} | "
          f"{r['valid_fr_mlm_ppl']:9.1f} | {r.get('valid_en_unigram_ppl', 0):.0f} / {r.get('valid_fr_unigram_ppl', 0):.0f}")
PY

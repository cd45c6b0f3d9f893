# SCALE=gpu: one GPU, the paper's model for 10k steps on all of the mirror's text, the full task data,
# a small grid, three seeds where a task is cheap. From throughputs measured on an H200 (2026-12-04,
# docs/notes/2026-12-04-h200-attention-and-loop.md): ~5 min of pretraining per model, ~53 min of
# fine-tuning per row, ~10.5 h per language pair.
JOBS               := 1
THREADS            := 8
DEV_BYTES          := 1000000
TRAIN_BYTES        := 1000000000  # everything the mirror has (en 30 MB, fr 17 MB, ru 4.6 MB, zh 8 MB)
BPE_MERGES         := 40000
BPE_LANG_MERGES    := 20000
PRESET             := wu2020
BATCH              := 64
STREAM_LEN         := 256
STEPS              := 10000
# Measured on an H100 (bench/probe_plateau.py, docs/reproduce.md): this model on 128-token windows
# stayed at the unigram perplexity for 18M tokens; 4.8M tokens of 8-token windows first, then
# 128-token ones, brought it to a quarter of it by 12M tokens (lr 3e-4, warm-up 1,000, no dropout;
# the preset's dropout 0.1 kept the 8 x 64 model on the plateau past 5M tokens).
SHORT_STREAM_LEN   := 8
SHORT_STEPS        := 1000
DROPOUT            := 0
EQUAL_COPIES_INIT  := 1        # as the demo (measured there on the CPU, docs/pretrain.md)
WARMUP             := 1000
LR                 := 3e-4
EVAL_EVERY         := 2000
SNAPSHOT_EVERY     := 1000       # make reproduce-dynamics: a weight-only snapshot every N steps (10 snapshots over 10,000 steps)
SAVE_EVERY         := 1000
LOG_EVERY          := 100
EVAL_BATCHES       := 50
PRECISION          := auto
# COMPILE := 1 trains through torch.compile: 1.4x the tokens/s of this scale's run on an H200, but
# ~100 s of compiling, so a 10,000-step model takes ~5.0 min compiled against ~4.7 eager (measured
# 2026-12-04, bench/gpu/curve.sh): off here; it pays from a few tens of thousands of steps.
COMPILE            :=
TORCHRUN           :=
XNLI_TRAIN_STRIDE  := 1
XNLI_EVAL_STRIDE   := 1
NER_TRAIN_STRIDE   := 1
NER_EVAL_STRIDE    := 1
PARSE_TRAIN_STRIDE := 1
PARSE_EVAL_STRIDE  := 1
FT_SEEDS           := 12
# NER and parsing are cheap enough for three seeds (~17 and ~16 min a row; XNLI ~20 min with one):
# a verdict then rests on a margin against the seeds' spread, as at the demo scale
NER_SEEDS          := 12,156,78
PARSE_SEEDS        := 12,156,78
XNLI_ARGS          := --batch-size 8 --encoder-lr 5e-6,2.5e-5 --head-lr 1.25e-4 --epochs 10 --epoch-size 20000
NER_ARGS           := --batch-size 32 --encoder-lr 3e-5,5e-5 --epochs 10
PARSE_ARGS         := --batch-size 32 --encoder-lr 3e-5,5e-5 --epochs 10
# analyses (Figure 7, alignment, Liu et al.)
CWORD_SENTENCES    := 100000
MEANS_SENTENCES    := 10000
TRANSLATE_SENTENCES := 5000
DEVICE             := cuda
# Liu et al. Figures 1-4 (make/liu_figures.mk): the paper's 768 dimensions; 1:10 of its sizes (the
# mirror's ru text holds fewer lines than the big size: it is used whole)
LIU_SIZES          := 20000 100000
LIU_DIM            := 768
LIU_STEPS          := 10000
LIU_SHORT_STEPS    := 1000
LIU_W2V_EPOCHS     := 5
LIU_GLOVE_EPOCHS   := 25
LIU_MIN_COUNT      := 5
LIU_LSTM_DIM       := 512
LIU_XNLI_ARGS      := $(XNLI_ARGS)
LIU_STATIC_XNLI_ARGS := --batch-size 64 --encoder-lr 1e-3 --head-lr 1e-3 --epochs 5 --epoch-size 20000

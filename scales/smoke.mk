# SCALE=smoke: a pipeline check, not a result. Real data from the recipes, tiny models, EVERY row and
# language pair on a 2-core CPU in under half an hour (22.5 min measured, docs/reproduce.md). Its
# models learn nothing (300 steps of 64-token windows stay on the unigram plateau:
# docs/notes/2026-11-24-smoke-scale-diagnosis.md, "Why the smoke scale learns nothing"); use it to check that every stage runs after a change.
JOBS               := 2        # make -j: independent stages side by side (your own -jN wins)
THREADS            := 1        # torch and tokenizer threads per job
# pretraining text, per corpus
DEV_BYTES          := 100000   # held out: dev perplexity, Means of Language
TRAIN_BYTES        := 2000000  # training text (the paper: all of Wikipedia)
BPE_MERGES         := 8000     # joint BPE (the paper: 80000)
BPE_LANG_MERGES    := 4000     # per-language BPE before the union (the paper: 40000 each)
# pretraining
PRESET             := mini     # 8 layers x 64 wide: every sharing row exists
BATCH              := 16
STREAM_LEN         := 64
STEPS              := 300
WARMUP             := 50
LR                 := 1e-3
EVAL_EVERY         := 100
SNAPSHOT_EVERY     := 100        # make reproduce-dynamics: a weight-only snapshot every N steps (300 steps: three snapshots)
SAVE_EVERY         := 100
LOG_EVERY          := 100
EVAL_BATCHES       := 10
PRECISION          := fp32
TORCHRUN           :=
# fine-tuning: every k-th example of each task file, one setting, one seed
XNLI_TRAIN_STRIDE  := 10       # 2,003 MNLI pairs
XNLI_EVAL_STRIDE   := 5        # 498 dev / 1,002 test pairs per language
NER_TRAIN_STRIDE   := 10       # 2,000 WikiANN en sentences
NER_EVAL_STRIDE    := 10       # 1,000 dev / test sentences (MSRA: 437 test)
PARSE_TRAIN_STRIDE := 6        # 2,091 EWT sentences
PARSE_EVAL_STRIDE  := 2
FT_SEEDS           := 12
# learning rates for a 64-wide model (the paper's 1e-6..5e-5 barely move it in two epochs); the
# parser's MLPs scaled down with the encoder (crosslingual-nlp: 512 / 128)
XNLI_ARGS          := --batch-size 32 --encoder-lr 5e-4 --head-lr 1e-3 --epochs 2 --epoch-size 2003
NER_ARGS           := --batch-size 32 --encoder-lr 1e-3 --epochs 2
PARSE_ARGS         := --batch-size 32 --encoder-lr 1e-3 --epochs 2 --task-option arc_dim 128 --task-option label_dim 64
# analyses (Figure 7, alignment, Liu et al.)
CWORD_SENTENCES    := 2000
MEANS_SENTENCES    := 10000
TRANSLATE_SENTENCES := 300
DEVICE             := cpu      # extract, cka, align, shift-decode (fine-tuning and pretraining find CUDA themselves)
# Liu et al. Figures 1-4 (make/liu_figures.mk): one joint model of en + LIU_LANGS per size and kind;
# a pipeline check (its BERTs are 100 steps on the unigram plateau)
LIU_SIZES          := 500 2500     # lines per language (the paper: 200k and 1000k sentences)
LIU_DIM            := 64           # = the mini preset's d_model (the paper: 768)
LIU_STEPS          := 100
LIU_SHORT_STEPS    := 0
LIU_W2V_EPOCHS     := 2
LIU_GLOVE_EPOCHS   := 3
LIU_MIN_COUNT      := 2
LIU_LSTM_DIM       := 32
LIU_XNLI_ARGS      := --batch-size 32 --encoder-lr 5e-4 --head-lr 1e-3 --epochs 1 --epoch-size 1000
LIU_STATIC_XNLI_ARGS := --batch-size 32 --encoder-lr 1e-3 --head-lr 1e-3 --epochs 1 --epoch-size 1000

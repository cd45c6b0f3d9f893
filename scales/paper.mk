# SCALE=paper: the paper's model and settings on several GPUs (GPUS per node, 8 by default; NNODES
# and MASTER for several nodes, which the rendezvous numbers itself). The mirror's corpora are far
# smaller than Wikipedia: point CORPUS_<lang> at full dumps (make/text.mk); XNLI trains on the full
# MNLI (`xlt data fetch mnli_full`, automatic). BATCH is per GPU: the paper's 96 x 8 GPUs = 768
# windows a step is kept on two nodes of 8 GPUs with BATCH=48.
GPUS               ?= 8
NNODES             ?= 1
MASTER             ?= localhost:29500
ifneq ($(NNODES),1)
ifneq ($(filter localhost:% 127.0.0.1:%,$(MASTER)),)
$(error NNODES=$(NNODES) needs MASTER=<host of the first node>:<port>, reachable from every node)
endif
endif
JOBS               := 1
THREADS            := 8
DEV_BYTES          := 5000000
TRAIN_BYTES        := 100000000000
BPE_MERGES         := 80000
BPE_LANG_MERGES    := 40000
PRESET             := wu2020
BATCH              := 96         # per GPU
STREAM_LEN         := 256
STEPS              := 1000000
WARMUP             := 30000
LR                 := 1e-4
EVAL_EVERY         := 200000     # XLM's epoch of 200k batches
SNAPSHOT_EVERY     := 50000      # make reproduce-dynamics: a weight-only snapshot every N steps (20 snapshots over 1M steps)
SAVE_EVERY         := 5000       # a crash loses at most this many steps
LOG_EVERY          := 1000
EVAL_BATCHES       := 500
PRECISION          := auto
# One H200 ran the whole loop at 96 x 256 (bf16) at 494k tokens/s, 761k under torch.compile
# (COMPILE := 1): 1M steps are 13.8 h (9.0 h) per model before the all-reduce (bench/README.md,
# 2026-12-04). Compiling under torchrun on several GPUs is not measured yet, so it stays off here.
COMPILE            :=
TORCHRUN           := $(VENV)/bin/torchrun --nnodes $(NNODES) --nproc_per_node $(GPUS) \
                      --rdzv_backend c10d --rdzv_endpoint $(MASTER) -m
XNLI_TRAIN         := nli/mnli/mnli_train.tsv
XNLI_TRAIN_STRIDE  := 1
XNLI_EVAL_STRIDE   := 1
NER_TRAIN_STRIDE   := 1
NER_EVAL_STRIDE    := 1
PARSE_TRAIN_STRIDE := 1
PARSE_EVAL_STRIDE  := 1
FT_SEEDS           := 12,156,78,37,8   # crosslingual-nlp's seeds; the paper's full grids (task defaults)
XNLI_ARGS          :=
NER_ARGS           :=
PARSE_ARGS         :=
# analyses (Figure 7, alignment, Liu et al.)
CWORD_SENTENCES    := 500000
MEANS_SENTENCES    := 10000
TRANSLATE_SENTENCES := 5010
DEVICE             := cuda
# Liu et al. Figures 1-4 (make/liu_figures.mk): the paper's sizes and 768 dimensions (point CORPUS_<L>
# at full dumps: the mirror holds far fewer lines)
LIU_SIZES          := 200000 1000000
LIU_DIM            := 768
LIU_STEPS          := 200000
LIU_SHORT_STEPS    := 0
LIU_W2V_EPOCHS     := 5
LIU_GLOVE_EPOCHS   := 25
LIU_MIN_COUNT      := 5
LIU_LSTM_DIM       := 512
LIU_XNLI_ARGS      := $(XNLI_ARGS)
LIU_STATIC_XNLI_ARGS := --batch-size 64 --encoder-lr 1e-3 --head-lr 1e-3 --epochs 10 --epoch-size 20000

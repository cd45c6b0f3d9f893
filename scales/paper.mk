# SCALE=paper: the paper's model and data sizes on several GPUs (GPUS=8; NNODES, NODE_RANK and
# MASTER for several nodes). The mirror's corpora are far smaller than Wikipedia: point the
# mono recipes at full dumps for paper-size data.
GPUS         ?= 8
NNODES       ?= 1
NODE_RANK    ?= 0
MASTER       ?= localhost:29500
LINES        := 100000000
DEV_LINES    := 5000
BPE_MERGES   := 80000
PRESET       := wu2020
BATCH        := 96
STREAM_LEN   := 256
STEPS        := 1000000
WARMUP       := 30000
LR           := 1e-4
EVAL_EVERY   := 200000
PRECISION    := auto
TORCHRUN     := $(VENV)/bin/torchrun --nnodes $(NNODES) --node_rank $(NODE_RANK) --nproc_per_node $(GPUS) \
                --rdzv_backend c10d --rdzv_endpoint $(MASTER) -m

# xlt: the two set-up commands are `make reproduce-table1` and `make test` (see README.md).
# Every target installs what it needs first; `make install` is idempotent and quick when done.

PYTHON      ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
PIP         := $(PY) -m pip --disable-pip-version-check -q
FASTBPE_VER := 0.1.0
FAST        := $(VENV)/bin/fast
STAMP       := $(VENV)/.installed

.PHONY: install test bench data clean help demo reproduce-table1 reproduce-figure7 reproduce-alignment reproduce-kept-alignment \
        reproduce-liu-table2 reproduce-liu-table4 reproduce-liu-figures reproduce-all
help:
	@echo "make install          create .venv with every dependency (idempotent)"
	@echo "make test             run the test suite"
	@echo "make data             fetch and check every data set (XLT_DATA_MIRROR or official URLs)"
	@echo "make bench            run the benchmarks under bench/ and print figures"
	@echo "make demo             en-fr text pipeline and a Default-row pretraining run (SCALE=smoke|demo|cpu|gpu|paper)"
	@echo "make reproduce-table1 Wu et al. Table 1: 10 rows x en-fr (LANGS=\"fr ru zh\": all; LANGS=fake: Fake-English; \"fake fakeperm\": with its words permuted too), XNLI + NER + parsing"
	@echo "make reproduce-figure7 / reproduce-alignment / reproduce-liu-table2 / reproduce-liu-table4 / reproduce-all"
	@echo "make reproduce-liu-figures  Liu et al. Figures 1-4 + MRR by POS: BERT vs Word2Vec/GloVe, 2 data sizes (LIU_LANGS)"
	@echo "  MODEL=hf:NAME|DIR    reproduce-liu-table2/4 of that model, nothing pretrained (docs/hf.md)"
	@echo "make reproduce-dynamics  Default and Sep L1-6 en-fr snapshotted every SNAPSHOT_EVERY steps, xlt track, xlt report dynamics"
	@echo "make reproduce-steps  Default en-fake (CURVE_ROW, CURVE_LANG) pretrained to CURVE_STEPS, every CURVE_EVERY-step snapshot fine-tuned: zero-shot against steps"
	@echo "make reproduce-table1-at-steps  Table 1's findings on the curved rows' cells at snapshot STEPS_AT (STEPS_ROWS)"
	@echo "make reproduce-kept-alignment  per layer, how well Table 1's Default pairs the languages' sentences before and after each task's fine-tuning (LANGS)"

install: $(STAMP) $(FAST)

# torch first, pinned to the version this machine carries as a local file; the project's
# own requirement is a range, so a CUDA build of torch satisfies it on a GPU box.
# fastBPE's binding (the [fastbpe] extra) builds only with Cython present and no build isolation.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel Cython
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install "torch==$${TORCH_VERSION:-2.13.0}"
	$(PIP) install --no-build-isolation "fastBPE==$(FASTBPE_VER)"
	$(PIP) install -e ".[test]"
	touch $@

# fastBPE's command-line tool, compiled from its PyPI sdist: `xlt bpe apply` runs it on plain files
# (speed), and the tests check xlt's in-process learnbpe / getvocab / apply against it byte for byte.
$(FAST): $(STAMP)
	rm -rf build/fastbpe && mkdir -p build/fastbpe
	$(PIP) download --no-deps --no-binary :all: -d build/fastbpe "fastBPE==$(FASTBPE_VER)"
	tar -xzf build/fastbpe/fastBPE-$(FASTBPE_VER).tar.gz -C build/fastbpe
	g++ -std=c++11 -pthread -O3 build/fastbpe/fastBPE-$(FASTBPE_VER)/fastBPE/main.cc \
	    -Ibuild/fastbpe/fastBPE-$(FASTBPE_VER)/fastBPE -o $@.tmp && mv $@.tmp $@

# One torch thread per worker: the tests' models are tiny, and workers x threads above the cores
# slows every one of them. On 2 cores: 13 minutes against 23 for one process (2026-11-27;
# TEST_JOBS=0 runs them in this one process).
TEST_JOBS ?= auto
test: install
	OMP_NUM_THREADS=1 $(VENV)/bin/pytest -q -n $(TEST_JOBS) --dist loadfile tests

bench: install
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

data: install
	$(VENV)/bin/xlt data fetch --data-dir $(XLT_DATA) all

clean:
	rm -rf build work

# ---- the pipeline ---------------------------------------------------------------------------------
# Every stage is a file target: an interrupted `make` resumes where it stopped, a finished stage is
# never recomputed, and independent rows run side by side (JOBS from the scale, or your own -jN).
# Sizes come from one settings file per scale (scales/$(SCALE).mk); the rules live in make/*.mk.
# Outputs go to $(W) (default work/$(SCALE)); see docs/reproduce.md.
SCALE    ?= demo
override SCALE := $(strip $(SCALE))
ifeq ($(wildcard scales/$(SCALE).mk),)
$(error SCALE=$(SCALE): no scales/$(SCALE).mk (one of: $(basename $(notdir $(wildcard scales/*.mk)))))
endif
include scales/$(SCALE).mk
XLT      := $(VENV)/bin/xlt
W        ?= work/$(SCALE)
# The data sets live in the checkout (an installed xlt defaults to the user cache): exported, so every
# xlt that make runs, with or without --data-dir, uses the same place.
export XLT_DATA ?= data
LANGS    ?= fr ru zh
# Wu et al.'s representation analyses (Figure 7's CKA, the §5.1 alignment) study four pairs.
ANALYSIS_LANGS ?= fr de ru zh
# $(call setting,NAME,VALUE) -> $(W)/settings/NAME, a file holding VALUE, rewritten only when VALUE
# changes. A table that lists it as a prerequisite is remade when the setting changes; missing
# (secondary) inputs alone would not remake it, so a language added to LANGS later would never
# reach the table. Use it as $$(call setting,...) (secondary expansion). GNU make 4.3 expands it for
# every rule, whatever the goal, so any make run records the values it was given: a run of another
# goal with other values makes the next run of a table remake that table (cheap: finished
# fine-tuning runs are found, not trained again).
# (Stripped: a scale file's `NAME := value   # comment` keeps the spaces before its comment, and the
# same value typed on the command line would read as a change.)
setting = $(shell f=$(W)/settings/$(1); mkdir -p $(W)/settings; [ "$$(cat $$f 2>/dev/null)" = "$(strip $(2))" ] || echo "$(strip $(2))" > $$f; echo $$f)
MAKEFLAGS += -j$(JOBS) --output-sync=line
export OMP_NUM_THREADS := $(strip $(THREADS))
SHELL    := /bin/bash
.SHELLFLAGS := -o pipefail -c
.DELETE_ON_ERROR:
# Every file is secondary: kept, and never remade just because it is missing, so a finished stage
# stays finished when its inputs (models, token stores) are deleted to save disk.
.SECONDARY:
.SECONDEXPANSION:
include make/text.mk make/table1.mk make/analysis.mk make/liu_figures.mk make/dynamics.mk make/steps.mk
# A language without text is refused as the makefiles are read, not after the English stages ran.
$(foreach l,$(filter-out fake fakeperm,$(LANGS)),$(if $(strip $(CORPUS_$(l))),,$(error LANGS: corpus $(l) has no files: set CORPUS_$(l))))
ifneq ($(and $(filter fakeperm,$(LANGS)),$(filter reproduce-all reproduce-liu-table2 reproduce-liu-table4,$(MAKECMDGOALS))),)
$(error LANGS: fakeperm is Table 1's word-order control; Liu et al.'s targets read each language's raw text, which it has not)
endif

demo: $(W)/models/default/en-fr/finished
	@echo "demo done: $(W)/models/default/en-fr (metrics.jsonl, checkpoints/best.pt)"

reproduce-all: reproduce-table1 reproduce-figure7 reproduce-alignment reproduce-liu-table2 reproduce-liu-table4 \
               reproduce-liu-figures

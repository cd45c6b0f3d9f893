# xlt: the two set-up commands are `make reproduce-table1` and `make test` (see README.md).
# Every target installs what it needs first; `make install` is idempotent and quick when done.

PYTHON      ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
PIP         := $(PY) -m pip --disable-pip-version-check -q
FASTBPE_VER := 0.1.0
FAST        := $(VENV)/bin/fast
STAMP       := $(VENV)/.installed

.PHONY: install test bench data clean help demo
help:
	@echo "make install          create .venv with every dependency (idempotent)"
	@echo "make test             run the test suite"
	@echo "make data             fetch and check every data set (XLT_DATA_MIRROR or official URLs)"
	@echo "make bench            run the benchmarks under bench/ and print figures"
	@echo "make demo             en-fr text pipeline and a Default-row pretraining run (SCALE=demo|gpu|paper)"

install: $(STAMP) $(FAST)

# torch first, pinned to the version this machine carries as a local file; the project's
# own requirement is a range, so a CUDA build of torch satisfies it on a GPU box.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel Cython
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install "torch==$${TORCH_VERSION:-2.13.0}"
	$(PIP) install --no-build-isolation "fastBPE==$(FASTBPE_VER)"
	$(PIP) install -e ".[test]"
	touch $@

# fastBPE's command-line tool (learnbpe / applybpe / getvocab), compiled from its PyPI sdist.
$(FAST): $(STAMP)
	rm -rf build/fastbpe && mkdir -p build/fastbpe
	$(PIP) download --no-deps --no-binary :all: -d build/fastbpe "fastBPE==$(FASTBPE_VER)"
	tar -xzf build/fastbpe/fastBPE-$(FASTBPE_VER).tar.gz -C build/fastbpe
	g++ -std=c++11 -pthread -O3 build/fastbpe/fastBPE-$(FASTBPE_VER)/fastBPE/main.cc \
	    -Ibuild/fastbpe/fastBPE-$(FASTBPE_VER)/fastBPE -o $@.tmp && mv $@.tmp $@

test: install
	$(VENV)/bin/pytest -q tests

bench: install
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

data: install
	$(VENV)/bin/xlt data fetch all

clean:
	rm -rf build work

# ---- the pipeline ---------------------------------------------------------------------------------
# Every stage is a file target: an interrupted `make` resumes where it stopped, and a finished stage
# is never recomputed. Sizes come from one settings file per scale (scales/$(SCALE).mk).
SCALE   ?= demo
include scales/$(SCALE).mk
XLT     := $(VENV)/bin/xlt
W       := work/$(SCALE)
XLT_DATA ?= data
MONO_en := $(XLT_DATA)/mono/en/enwiki_wikiextractor_sample_30MB.txt.xz
MONO_fr := $(XLT_DATA)/mono/fr/frwiki_vikidia_wivico_piaf_13MB.txt.xz
MONO_ru := $(XLT_DATA)/mono/ru/ruwiki_wikineural_valtest_sentences.txt.xz
MONO_zh := $(XLT_DATA)/mono/zh/zhwiki_drcd_devtest_wikiextractor_3.6MB.txt.xz

$(XLT_DATA)/mono/%: | install
	$(XLT) data fetch mono_$(firstword $(subst /, ,$*))

# Non-empty lines only: blank lines separate documents and carry no tokens.
.SECONDEXPANSION:
$(W)/tok/%.all: $$(MONO_$$*) | install
	@mkdir -p $(@D)
	xz -dc $(MONO_$*) | grep -v '^[[:space:]]*$$' | head -n $(LINES) | $(XLT) tokenize --lang $* --workers 2 -o $@

$(W)/tok/%.train: $(W)/tok/%.all
	head -n -$(DEV_LINES) $< > $@.tmp && mv $@.tmp $@
$(W)/tok/%.dev: $(W)/tok/%.all
	tail -n $(DEV_LINES) $< > $@.tmp && mv $@.tmp $@

$(W)/en-%/codes: $(W)/tok/en.train $(W)/tok/%.train
	@mkdir -p $(@D)
	$(XLT) bpe learn --merges $(BPE_MERGES) -o $@ $^

$(W)/en-%/bpe.stamp: $(W)/en-%/codes $(W)/tok/en.train $(W)/tok/en.dev $(W)/tok/%.train $(W)/tok/%.dev
	for f in en.train en.dev $*.train $*.dev; do $(XLT) bpe apply --codes $< $(W)/tok/$$f -o $(@D)/$$f.bpe || exit 1; done
	touch $@

$(W)/en-%/vocab: $(W)/en-%/bpe.stamp
	$(XLT) bpe vocab --lang en --lang $* -o $@ $(@D)/en.train.bpe $(@D)/$*.train.bpe

$(W)/en-%/store.stamp: $(W)/en-%/vocab
	for f in en.train en.dev $*.train $*.dev; do \
	  $(XLT) binarize --vocab $< --lang $${f%%.*} $(@D)/$$f.bpe -o $(@D)/$$f || exit 1; done
	touch $@

$(W)/en-%/runs/default/checkpoints/best.pt: $(W)/en-%/store.stamp
	$(if $(TORCHRUN),$(TORCHRUN) xlt,$(XLT)) pretrain --run-dir $(W)/en-$*/runs/default \
	  --vocab $(W)/en-$*/vocab --codes en $(W)/en-$*/codes --codes $* $(W)/en-$*/codes \
	  --train en $(W)/en-$*/en.train --train $* $(W)/en-$*/$*.train \
	  --dev en $(W)/en-$*/en.dev --dev $* $(W)/en-$*/$*.dev \
	  --preset $(PRESET) --batch-size $(BATCH) --stream-len $(STREAM_LEN) --max-steps $(STEPS) \
	  --warmup-steps $(WARMUP) --lr $(LR) --eval-every $(EVAL_EVERY) --save-every $(EVAL_EVERY) \
	  --precision $(PRECISION)

.SECONDARY:
demo: $(W)/en-fr/runs/default/checkpoints/best.pt
	@echo "demo done: $(W)/en-fr/runs/default (metrics.jsonl, checkpoints/best.pt)"

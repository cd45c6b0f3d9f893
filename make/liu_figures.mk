# Liu et al. (2020) Figures 1-4 and the MRR-by-part-of-speech table: BERT, Word2Vec and GloVe trained
# from scratch on the same BPE'd text of English and LIU_LANGS (one joint model of all of them, as the
# paper's 15-language one), at two data sizes; word retrieval MRR in the joint space and XNLI
# zero-shot for each. Included by the Makefile after make/table1.mk (uses T, PRETRAIN, PRETRAIN_ARGS,
# xnli_files, comma_list) and make/text.mk (W/text, W/raw, MUSE).
#
#   $(W)/liu-fig/n<N>/text/<L>.{raw,train}   the first N lines of each language's training slice, tokenized
#   $(W)/liu-fig/n<N>/data/                  joint codes, <L>.{train,dev}.bpe, vocab, token stores
#   $(W)/liu-fig/n<N>/models/bert{,-w20}/    xlt pretrain run directories (default / 20-token windows)
#   $(W)/liu-fig/n<N>/static/<model>.txt     w2v-w5, w2v-w128, w2v-w256, glove (xlt embed train)
#   $(W)/liu-fig/n<N>/own/<model>/en-<L>.{json,pairs}  xlt align word / contextual-word --map none on the
#                                            pairs the model covers (--pairs-out: those pairs)
#   $(W)/liu-fig/n<N>/mrr/<model>/en-<L>.json   the same on the pairs every model of size N covers
#   $(W)/liu-fig/n<N>/spaces/bert{,-w20}/    BERT's word spaces while they are needed (--space-cache)
#   $(W)/liu-fig/n<N>/xnli/<model>/results.json xlt finetune xnli (static: --model static:FILE)
#   $(W)/report/liu-figures.*, liu-pos.*     xlt report liu-figures / liu-pos
#
# Settings (each scale sets its own; these are the fallbacks):
LIU_LANGS        ?= fr de ru zh
LIU_SIZES        ?= 4000 20000     # lines per language: the small and the big size (the paper: 200k, 1000k)
LIU_DIM          ?= 64             # static vectors' dimension = the BERT preset's d_model (the paper: 768)
LIU_STEPS        ?= 2000           # BERT steps (same tokens per step at both window lengths)
LIU_SHORT_STEPS  ?= 1000           # ... of which the short-window warm-up of the scale's curriculum
LIU_W2V_EPOCHS   ?= 5
LIU_GLOVE_EPOCHS ?= 10
LIU_MIN_COUNT    ?= 3
LIU_LSTM_DIM     ?= 64             # BiLSTM units per direction of the static XNLI baseline (XNLI paper: 512)
# sentences per language whose BERT states are averaged per word; all: every line of the size, as the
# paper ("we average embeddings in all contexts"). 2,000 of the 20,000 at SCALE=cpu left French MRR
# on pairs of two strings at 0.049 where all of them give 0.071 (measured, docs/reproduce.md)
LIU_CWORD_SENTENCES ?= all
LIU_XNLI_ARGS    ?= $(XNLI_ARGS)
LIU_STATIC_XNLI_ARGS ?= --batch-size 32 --encoder-lr 1e-3 --head-lr 1e-3 --epochs 3 --epoch-size 10000
# extra `xlt align` options, e.g. --drop-identical: in one joint space without language prefixes a
# pair of one string is one static row (rank 1 for free); the paper used the MUSE dictionaries as they are
LIU_ALIGN_ARGS   ?=
# the MUSE split whose pairs are scored: with --map none nothing is learned from a dictionary, so the
# 0-5000 split (frequent words, the closed classes among them) is a test set like any other; the
# 5000-6500 split holds almost no closed-class English word (1 of 1,500 in the smoke run), which the
# part-of-speech table needs
LIU_DICT         ?= 0-5000
LIU_W2V_WINDOWS  := 5 128 256
LIU_SHORT_WINDOW := 20             # Liu et al. §2.4: inputs sliced into 20-token segments
LIU_STATIC       := $(foreach w,$(LIU_W2V_WINDOWS),w2v-w$(w)) glove
LIU_MODELS       := bert bert-w20 $(LIU_STATIC)
LIU_ALL          := en $(LIU_LANGS)
LF               := $(W)/liu-fig
UD_POS           := $(XLT_DATA)/ud/en_ewt/en_ewt-ud-train.conllu
# The settings records (Makefile: `setting`) are written when make parses a goal of this file: a
# pattern rule's prerequisites are looked up before secondary expansion could write them. liu-align
# names the pair set (pairs=common, below) and BERT's contexts too: a run scored before every model
# shared one pair set, or on other contexts, is re-scored.
LIU_SET := $(W)/settings/liu
ifneq ($(filter reproduce-liu-figures reproduce-all $(W)/liu-fig/% $(W)/report/liu-%,$(MAKECMDGOALS)),)
LIU_SETTINGS := $(call setting,liu-langs,$(LIU_LANGS)) $(call setting,liu-sizes,$(LIU_SIZES)) \
                $(call setting,liu-align,$(LIU_DICT) $(LIU_ALIGN_ARGS) pairs=common contexts=$(LIU_CWORD_SENTENCES)) \
                $(call setting,liu-xnli-train,$(XNLI_TRAIN))
endif
# the size of a stem <N>/text/<L> (after the rule's "n"): 4000
liu_n = $(firstword $(subst /, ,$(1)))

# ---- text: the first N non-blank lines of each language's training slice (raw: BERT's contextual
# vectors read it), then tokenized as the Table 1 text (only what the sizes need is tokenized)
$(LF)/n%.raw: $(W)/raw/$$(notdir $$*).train
	@mkdir -p $(@D)
	head -n $(call liu_n,$*) $< > $@.tmp && mv $@.tmp $@
$(LF)/n%.train: $(LF)/n%.raw
	$(XLT) -q tokenize --lang $(notdir $*) --workers $(THREADS) $< -o $@
# ---- one joint BPE over every language of the size, BPE'd text, vocabulary, token stores ---------
LIU_TEXT = $(foreach l,$(LIU_ALL),$(LF)/n$(1)/text/$(l).train)
$(LF)/n%/data/codes: $$(call LIU_TEXT,$$*) $(LIU_SET)-langs
	@mkdir -p $(@D)
	$(XLT) bpe learn --merges $(BPE_MERGES) -o $@ $(filter %.train,$^)
$(LF)/n%/data/stores.stamp: $(LF)/n%/data/codes $$(foreach l,$(LIU_ALL),$(W)/text/$$(l).dev)
	$(foreach l,$(LIU_ALL),cp $< $(@D)/codes.$(l) && $(XLT) bpe apply --codes $< $(LF)/n$*/text/$(l).train \
	  -o $(@D)/$(l).train.bpe && $(XLT) bpe apply --codes $< $(W)/text/$(l).dev -o $(@D)/$(l).dev.bpe && ) true
	$(XLT) bpe vocab $(foreach l,$(LIU_ALL),--lang $(l)) -o $(@D)/vocab $(foreach l,$(LIU_ALL),$(@D)/$(l).train.bpe)
	$(call binarize,$(@D),$(@D),$(LIU_ALL))

# ---- BERT: the scale's recipe, LIU_STEPS steps; bert-w20 reads 20-token windows with batches grown
# to the same tokens per step (the paper keeps the data; a fixed step count then keeps the compute).
# Every step mixes as many one-language batches as there are languages, the scale's BATCH windows
# shared among them: BERT's own code, which Liu et al. trained with, mixes languages within a batch,
# and one language per step (XLM's) leaves a small model of three or more languages at the unigram
# floor where mixing takes it below (measured, docs/reproduce.md).
LIU_MIX   := $(words $(LIU_ALL))
LIU_BATCH := $(shell echo $$(( ($(BATCH) + $(LIU_MIX) - 1) / $(LIU_MIX) )))
liu_pretrain = $(PRETRAIN) --run-dir $(@D) --vocab $(<D)/vocab \
  $(foreach l,$(LIU_ALL),--codes $(l) $(<D)/codes.$(l) --train $(l) $(<D)/$(l).train --dev $(l) $(<D)/$(l).dev) \
  --sharing default --select-on en --langs-per-step $(LIU_MIX) $(PRETRAIN_ARGS)
$(LF)/n%/models/bert/finished: $(LF)/n%/data/stores.stamp
	$(liu_pretrain)
	touch $@
$(LF)/n%/models/bert-w20/finished: $(LF)/n%/data/stores.stamp
	$(liu_pretrain)
	touch $@
$(LF)/%/models/bert/finished $(LF)/%/models/bert-w20/finished: STEPS = $(LIU_STEPS)
$(LF)/%/models/bert/finished $(LF)/%/models/bert-w20/finished: SHORT_STEPS = $(LIU_SHORT_STEPS)
$(LF)/%/models/bert/finished: BATCH := $(LIU_BATCH)
$(LF)/%/models/bert-w20/finished: BATCH := $(shell echo $$(( $(LIU_BATCH) * $(STREAM_LEN) / $(LIU_SHORT_WINDOW) )))
$(LF)/%/models/bert-w20/finished: STREAM_LEN = $(LIU_SHORT_WINDOW)

# ---- static embeddings on the same BPE'd text ----------------------------------------------------
liu_embed = $(XLT) embed train $(foreach l,$(LIU_ALL),--text $(l) $(<D)/$(l).train.bpe) --dim $(LIU_DIM) \
  --min-count $(LIU_MIN_COUNT) --workers $(THREADS) --seed 1 -o $@
$(LF)/n%/static/glove.txt: $(LF)/n%/data/stores.stamp
	@mkdir -p $(@D)
	$(liu_embed) --method glove --epochs $(LIU_GLOVE_EPOCHS) --device $(DEVICE)
# one rule per window (a pattern rule with several targets would make them all in one run)
define liu_w2v_rule
$(LF)/n%/static/w2v-w$(1).txt: $(LF)/n%/data/stores.stamp
	@mkdir -p $$(@D)
	$$(liu_embed) --method word2vec --epochs $(LIU_W2V_EPOCHS) --window $(1)
endef
$(foreach w,$(LIU_W2V_WINDOWS),$(eval $(call liu_w2v_rule,$(w))))

# ---- word retrieval MRR in the joint space (no map) and XNLI zero-shot, per (size, model) ----------
# MRR: cosine among the test dictionary's targets (Liu et al. Eq. 1), a BPE-split word the mean of its
# pieces (static) or of its subwords' states averaged over its occurrences (BERT, every layer),
# broken down by the English word's most frequent UPOS in UD English EWT (--pos-from).
liu_align = --source-lang en --target-lang $(1) --map none --no-csls --pos-from $(UD_POS) \
  --test-dict $(MUSE)/en-$(1).$(LIU_DICT).txt $(LIU_ALIGN_ARGS) -o $@
LIU_XNLI_FILES := $(T)/$(XNLI_TRAIN) $(T)/xnli/dev-en.tsv $(T)/xnli/test-en.tsv \
  $(foreach l,$(LIU_LANGS),$(T)/xnli/dev-$(l).tsv $(T)/xnli/test-$(l).tsv)
liu_xnli = $(XLT) finetune xnli -o $(@D) --data-dir $(T) --seeds $(FT_SEEDS) --train en $(T)/$(XNLI_TRAIN) \
  --dev en $(T)/xnli/dev-en.tsv $(foreach l,$(LIU_LANGS),--eval $(l) $(T)/xnli/dev-$(l).tsv $(T)/xnli/test-$(l).tsv)

# Every model of one size is scored on the same dictionary pairs: a first pass (own/) scores each
# model on the pairs it can represent and writes them (--pairs-out: a static file covers almost every
# dictionary word, BERT only those of its LIU_CWORD_SENTENCES sentences); the second (mrr/, what the
# report reads) scores each on the pairs common to all of them (--pairs-from every model's file).
liu_common = $(foreach m,$(LIU_MODELS),--pairs-from $(LF)/n$(1)/own/$(m)/en-$(2).pairs)
LIU_OWN = $(foreach m,$(LIU_MODELS),$(LF)/n$(1)/own/$(m)/en-%.json)
# $(call liu_mrr_rules,N,MODEL,PREREQUISITES,COMMAND): both passes of one model's MRR (COMMAND a
# variable taking N, the language and the model; the options of each pass are appended)
define liu_mrr_rules
$(LF)/n$(1)/own/$(2)/en-%.json: $(3) $(MUSE)/en-%.$(LIU_DICT).txt $(UD_POS) $(LIU_SET)-align
	@mkdir -p $$(@D)
	$$(call $(4),$(1),$$*,$(2)) --pairs-out $$(@D)/en-$$*.pairs
$(LF)/n$(1)/mrr/$(2)/en-%.json: $(3) $(MUSE)/en-%.$(LIU_DICT).txt $(UD_POS) $(LIU_SET)-align $(LIU_OWN)
	@mkdir -p $$(@D)
	$$(call $(4),$(1),$$*,$(2)) $$(call liu_common,$(1),$$*)
endef
liu_static_mrr = $(XLT) align word --emb-a $(word 1,$^) --codes $(LF)/n$(1)/data/codes --subwords mean \
  $(call liu_align,$(2))
# BERT's word spaces are computed once per language and kept in spaces/<model>/ (--space-cache): English
# serves every target and each space both passes; once every language of the model is scored they are
# deleted (spaces/<model>.dropped), as at the gpu and paper scales each is gigabytes (13 x 50k x 768 x 4 B;
# both BERTs of a size hold theirs at once, the common pairs needing both: 20 GB for five languages)
liu_bert_mrr = $(XLT) align contextual-word --device $(DEVICE) --model $(patsubst %/finished,%,$(word 1,$^)) \
  --source-corpus $(LF)/n$(1)/text/en.raw --target-corpus $(LF)/n$(1)/text/$(2).raw \
  --space-cache $(LF)/n$(1)/spaces/$(3) \
  --n-sentences $(if $(filter all,$(LIU_CWORD_SENTENCES)),$(1),$(LIU_CWORD_SENTENCES)) $(call liu_align,$(2))

# $(call liu_static_rules,N,MODEL) / $(call liu_bert_rules,N,MODEL): the rules of one trained model
define liu_static_rules
$(call liu_mrr_rules,$(1),$(2),$(LF)/n$(1)/static/$(2).txt,liu_static_mrr)
$(LF)/n$(1)/xnli/$(2)/results.json: $(LF)/n$(1)/static/$(2).txt $(LIU_XNLI_FILES) $(LIU_SET)-langs $(LIU_SET)-xnli-train
	$$(liu_xnli) --model static:$$< --codes $(LF)/n$(1)/data/codes --lstm-dim $(LIU_LSTM_DIM) $(LIU_STATIC_XNLI_ARGS)
endef
define liu_bert_rules
$(call liu_mrr_rules,$(1),$(2),$(LF)/n$(1)/models/$(2)/finished $(LF)/n$(1)/text/en.raw $(LF)/n$(1)/text/%.raw,liu_bert_mrr)
$(LF)/n$(1)/xnli/$(2)/results.json: $(LF)/n$(1)/models/$(2)/finished $(LIU_XNLI_FILES) $(LIU_SET)-langs $(LIU_SET)-xnli-train
	$$(liu_xnli) --model $(LF)/n$(1)/models/$(2) $(LIU_XNLI_ARGS)
$(LF)/n$(1)/spaces/$(2).dropped: $(foreach l,$(LIU_LANGS),$(LF)/n$(1)/mrr/$(2)/en-$(l).json)
	mkdir -p $$(@D) && rm -rf $(LF)/n$(1)/spaces/$(2) && touch $$@
endef
$(foreach n,$(LIU_SIZES),$(foreach m,$(LIU_STATIC),$(eval $(call liu_static_rules,$(n),$(m)))) \
  $(foreach m,bert bert-w20,$(eval $(call liu_bert_rules,$(n),$(m)))))

# ---- the figures and the POS table ----------------------------------------------------------------
LIU_FIG_RESULTS := $(foreach n,$(LIU_SIZES),$(foreach m,$(LIU_MODELS),$(LF)/n$(n)/xnli/$(m)/results.json \
  $(foreach l,$(LIU_LANGS),$(LF)/n$(n)/mrr/$(m)/en-$(l).json) $(if $(filter bert%,$(m)),$(LF)/n$(n)/spaces/$(m).dropped)))
$(W)/report/liu-figures.md: $(LIU_FIG_RESULTS) $(LIU_SET)-langs $(LIU_SET)-sizes
	$(XLT) report liu-figures --results-dir $(LF) --langs $(call comma_list,$(LIU_LANGS)) \
	  --sizes $(call comma_list,$(LIU_SIZES)) -o $(W)/report > /dev/null
# MRR by part of speech: the paper's BERT pretrained on the big size
$(W)/report/liu-pos.md: $(foreach l,$(LIU_LANGS),$(LF)/n$(lastword $(LIU_SIZES))/mrr/bert/en-$(l).json) \
                        $(LIU_SET)-langs
	$(XLT) report liu-pos --results-dir $(LF)/n$(lastword $(LIU_SIZES))/mrr/bert --langs $(call comma_list,$(LIU_LANGS)) \
	  -o $(W)/report > /dev/null
reproduce-liu-figures: $(W)/report/liu-figures.md $(W)/report/liu-pos.md
	@cat $^
	@echo "Liu et al. Figures 1-4 and Table 1 at SCALE=$(SCALE): $(W)/report/liu-{figures,pos}.{md,csv,tex,json,png}"

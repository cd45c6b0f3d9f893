# Issue 30, when does cross-lingual structure emerge: Default and Sep L1-6 of en-fr pretrained
# with a weight-only snapshot every $(SNAPSHOT_EVERY) steps, every snapshot measured by `xlt track`
# (dev perplexity, CKA, word and sentence retrieval, language identity, zero-shot NER, each with its
# random-encoder bound) and the curves drawn by `xlt report dynamics`. Included by the Makefile; the
# text, BPE and token stores are make/text.mk's, the pretraining settings and NER files
# make/table1.mk's, the parallel sentences and Tatoeba make/analysis.mk's.
#
#   $(W)/dynamics/models/<row>/en-<L>/   pretraining run with checkpoints/step-N.pt; `finished` once done
#   $(W)/dynamics/track/records.jsonl    one record per (snapshot, measure, language, layer): docs/cron.md
#   $(W)/dynamics/report/dynamics.md     `xlt report dynamics`: when each measure emerges, beside its
#                                        .csv/.json tables and one PNG curve per measure
#
# The runs here are their own (Table 1's are pretrained without snapshots). To follow a run while
# it trains, call the same `xlt track` from cron (docs/cron.md): it evaluates what is new each time.

SNAPSHOT_EVERY ?= 500
# Sep L1-6 rather than Sep Emb + L1-6: at the demo scale it learns English (dev ppl 1,136 / 754 at
# 5,000 steps, docs/notes/2026-11-25-separated-rows.md) but transfers little (zero-shot NER 9.9
# against Default's 28.6), where Sep Emb + L1-6 does not learn English, so its curves would be flat.
DYNAMICS_ROWS  ?= default sep-l1-6
DYNAMICS_LANG  ?= fr
LABEL_default        := Default
LABEL_sep-emb+l1-6   := Sep Emb + L1-6
LABEL_sep-l1-6       := Sep L1-6
LABEL_sep-l1-3       := Sep L1-3
LABEL_sep-emb+l1-3   := Sep Emb + L1-3
LABEL_sep-emb        := Sep Emb
# Per snapshot: NER fine-tuned briefly on the first 1,000 English training sentences, every data
# set cut to its first 1,000 sentences (bench/bench_track.py measures the cost per measure).
TRACK_ARGS     ?= --ner-epochs 3 --ner-train-sentences 1000 --max-sentences 1000 --ner-lr 3e-3
DYN      := $(W)/dynamics
DYN_RUNS  = $(foreach r,$(DYNAMICS_ROWS),$(DYN)/models/$(r)/en-$(DYNAMICS_LANG))

# The stem is <row>/en-<L>, as Table 1's models (row_data, ROW_<row>: make/table1.mk).
$(DYN)/models/%/finished: $$(call row_data,$$*)/stores.stamp
	$(PRETRAIN) --run-dir $(@D) --vocab $(<D)/vocab \
	  $(foreach l,en $(call target_of,$*),--codes $(l) $(<D)/codes.$(l) \
	    --train $(l) $(<D)/$(l).train --dev $(l) $(<D)/$(l).dev) \
	  $(call row_options,$(patsubst %/,%,$(dir $*))) $(PRETRAIN_ARGS) --snapshot-every $(SNAPSHOT_EVERY)
	touch $@

# What each measure reads: the XNLI dev premises (CKA, language identity), the MUSE test dictionary
# and the first CWORD_SENTENCES lines of the pretraining text (word retrieval, as §5.1's alignment),
# Tatoeba (sentence retrieval), the NER task files (--data-dir).
DYN_DATA = $(W)/parallel/xnli-dev.en.txt $(W)/parallel/xnli-dev.$(DYNAMICS_LANG).txt \
  $(MUSE)/en-$(DYNAMICS_LANG).5000-6500.txt \
  $(call TATOEBA,$(DYNAMICS_LANG)).eng $(call TATOEBA,$(DYNAMICS_LANG)).$(TATOEBA_$(DYNAMICS_LANG)) \
  $(W)/raw/en.train $(W)/raw/$(DYNAMICS_LANG).train $(call ner_files,$(DYNAMICS_LANG))
# A stamp, not records.jsonl: the records are appended to, never remade, and .DELETE_ON_ERROR must
# not delete them when one tracking call fails. The rows are a setting: with `.SECONDARY:` a row added
# later would otherwise stay unpretrained behind an up-to-date stamp (xlt track then adds only its
# records).
$(DYN)/track/tracked.stamp: $(foreach run,$(DYN_RUNS),$(run)/finished) $(DYN_DATA) \
                            $$(call setting,dynamics-runs,$(sort $(DYNAMICS_ROWS)) $(DYNAMICS_LANG))
	$(XLT) track $(foreach r,$(DYNAMICS_ROWS),--run $(DYN)/models/$(r)/en-$(DYNAMICS_LANG) --label "$(LABEL_$(r))") \
	  --device $(DEVICE) --parallel $(wordlist 1,2,$(DYN_DATA)) --dictionary $(word 3,$(DYN_DATA)) \
	  --tatoeba $(wordlist 4,5,$(DYN_DATA)) --word-corpus $(wordlist 6,7,$(DYN_DATA)) \
	  --word-sentences $(CWORD_SENTENCES) --ner-data-dir $(T) $(TRACK_ARGS) -o $(@D)
	touch $@

$(DYN)/report/dynamics.md: $(DYN)/track/tracked.stamp
	$(XLT) report dynamics --records $(<D)/records.jsonl -o $(@D) > /dev/null

.PHONY: reproduce-dynamics
reproduce-dynamics: $(DYN)/report/dynamics.md
	@cat $<
	@echo "dynamics at SCALE=$(SCALE): records $(DYN)/track/records.jsonl, curves and tables $(DYN)/report/"

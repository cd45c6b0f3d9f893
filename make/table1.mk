# Wu et al. (2020) Table 1: ten pretrained models per language pair, each fine-tuned on English and
# tested zero-shot on XNLI, NER and parsing, then `xlt report table1`. Included by the Makefile.
#
#   $(W)/models/<row>/en-<L>/              pretraining run directory; `finished` once it is done
#   $(W)/models/<row>/en-<L>-seed<k>/      the same row pretrained with seed k (PRETRAIN_SEEDS_<L>)
#   $(W)/tasks/...                         the task data (a stride sample per scale), in the layout
#                                          `xlt finetune --data-dir` reads
#   $(W)/table1/<row>/en-<L>/<task>/       `xlt finetune` output: results.json, summary.md, runs/
#   $(W)/table1/<row>/en-<L>/missing.json  a cell that cannot be computed, with the reason
#   $(W)/table1/control/en-<L>/<task>/     the no-pretraining control: Default's architecture and
#                                          vocabulary, untrained, fine-tuned the same way
#   $(W)/table1/baselines/en-<L>/<task>.json  trivial baselines (chance, majority, all O, next word...)
#   $(W)/report/table1.{md,csv,tex,json}   the table

TABLE1_ROWS := default wiki-cc default-anchors no-anchors extra-anchors \
               sep-emb sep-emb+l1-3 sep-emb+l1-6 sep-l1-3 sep-l1-6
TASKS := xnli ner parse
comma := ,
empty :=
space := $(empty) $(empty)
comma_list = $(subst $(space),$(comma),$(strip $(1)))

# ---- pretraining -------------------------------------------------------------------------------
# Each row is (data kind of make/text.mk, sharing preset); one batch is one language, and the best
# checkpoint is chosen on English dev perplexity.
ROW_default         := joint      default
ROW_wiki-cc         := wikicc     default
ROW_default-anchors := union      default
ROW_no-anchors      := prefixed   default
ROW_extra-anchors   := codeswitch default
ROW_sep-emb         := union      sep-emb
ROW_sep-emb+l1-3    := union      sep-emb+l1-3
ROW_sep-emb+l1-6    := union      sep-emb+l1-6
ROW_sep-l1-3        := union      sep-l1-3
ROW_sep-l1-6        := union      sep-l1-6
# Not a row of the paper: the separated rows' dose at one layer (layer 1 language-specific), for
# Fake-English where Sep L1-3 already loses the transfer (issue 28). A row's words after its preset
# are pretraining options. EXTRA_ROWS_<L> adds such rows to a pair's table, e.g. EXTRA_ROWS_fake=sep-l1.
ROW_sep-l1          := union      default --separate-layers 1 1
EXTRA_ROWS ?=
# $(call row_options,ROW): the row's pretraining options: its sharing preset, then any words after it
row_options = --sharing $(word 2,$(ROW_$(1))) $(wordlist 3,$(words $(ROW_$(1))),$(ROW_$(1)))
PRETRAIN := $(if $(TORCHRUN),$(TORCHRUN) xlt,$(XLT)) pretrain
# $(call pair_setting,NAME): NAME_<L> where a scale sets one for the pair's target language L (the
# stem of a model rule is <row>/en-<L>), else NAME. Fake-English's recipe differs: scales/demo.mk.
# Permuted Fake-English (fakeperm) is fake's control: it takes fake's settings where it has none.
SETTINGS_OF_fakeperm := fake
pair_setting = $(call setting_of,$(1),$(call target_of,$*))
setting_of = $(or $($(1)_$(2)),$($(1)_$(SETTINGS_OF_$(2))),$($(1)))
PRETRAIN_ARGS = --preset $(PRESET) --batch-size $(BATCH) --stream-len $(STREAM_LEN) \
  --max-steps $(call pair_setting,STEPS) \
  --warmup-steps $(WARMUP) --lr $(LR) --eval-every $(EVAL_EVERY) --save-every $(SAVE_EVERY) \
  --eval-batches $(EVAL_BATCHES) --precision $(PRECISION) --log-every $(LOG_EVERY) \
  $(if $(SHORT_STREAM_LEN),--short-stream-len $(SHORT_STREAM_LEN) --short-stream-steps $(call pair_setting,SHORT_STEPS)) \
  $(if $(DROPOUT),--dropout $(DROPOUT)) $(if $(EQUAL_COPIES_INIT),--equal-copies-init) $(if $(COMPILE),--compile) \
  $(if $(filter 0,$(call pair_setting,LANG_EMBEDDINGS)),--no-lang-embeddings)
# XLM's language embeddings (Wu et al.'s models have them); a scale may drop them for one pair
# (LANG_EMBEDDINGS_<L> := 0), and the report says so in the table.
LANG_EMBEDDINGS ?= 1
# Pretraining seeds per pair: the model of seed 0 is <row>/en-<L>, that of seed k > 0 <row>/en-<L>-seed<k>
# (the same data and arguments). The report reads a row's models as draws of one architecture, and
# decides a finding only beyond their spread (xlt/report/noise.py). A scale sets PRETRAIN_SEEDS_<L>.
PRETRAIN_SEEDS ?= 0
pretrain_seeds = $(call setting_of,PRETRAIN_SEEDS,$(1))
# $(call pair_dir,L,SEED) -> en-<L>, or en-<L>-seed<SEED> for a later seed
pair_dir = en-$(1)$(if $(filter-out 0,$(2)),-seed$(2))
# $(call target_of,STEM) and $(call seed_of,STEM): L and the seed of a stem <row>/en-<L>[-seed<k>]
target_of = $(firstword $(subst -seed, ,$(subst en-,,$(notdir $(1)))))
seed_of = $(or $(word 2,$(subst -seed, ,$(notdir $(1)))),0)
# $(call row_data,ROW/en-L[-seedK]) -> the pair's data directory for that row (every seed reads it)
row_data = $(W)/data/$(word 1,$(ROW_$(patsubst %/,%,$(dir $(1)))))/en-$(call target_of,$(1))

# The stem is <row>/en-<L>[-seed<k>]; the mono/<L> models of make/analysis.mk have a rule of their own.
$(W)/models/%/finished: $$(call row_data,$$*)/stores.stamp
	$(PRETRAIN) --run-dir $(@D) --vocab $(<D)/vocab \
	  $(foreach l,en $(call target_of,$*),--codes $(l) $(<D)/codes.$(l) \
	    --train $(l) $(<D)/$(l).train --dev $(l) $(<D)/$(l).dev) \
	  $(call row_options,$(patsubst %/,%,$(dir $*))) --seed $(call seed_of,$*) $(PRETRAIN_ARGS)
	touch $@

# ---- task data: every k-th example of each file (k = 1 at the gpu and paper scales) ---------------
T := $(W)/tasks
every_line  = mkdir -p $(@D) && awk -v k=$(1) '(NR - 1) % k == 0' $< > $@.tmp && mv $@.tmp $@
blocks      = awk -v k=$(1) 'BEGIN { RS = ""; ORS = "\n\n" } (NR - 1) % k == 0'
every_block = mkdir -p $(@D) && $(call blocks,$(1)) $< > $@.tmp && mv $@.tmp $@
$(T)/nli/%.tsv:               $(XLT_DATA)/nli/%.tsv               ; $(call every_line,$(XNLI_TRAIN_STRIDE))
# XNLI_TRAIN=nli/mnli_snli.tsv: MNLI's 20k sample whole with SNLI's train sample, dev and test
# (49,686 pairs; at every scale, the paper's included: the full MNLI is not part of it), for a small
# model that MNLI's sample leaves near chance (docs/notes/2026-11-28-fake-english-xnli.md).
MNLI_SNLI := mnli/mnli_20k snli/snli_train_sample_9999 snli/snli_dev snli/snli_test
$(T)/nli/mnli_snli.tsv: $(foreach f,$(MNLI_SNLI),$(XLT_DATA)/nli/$(f).tsv)
	mkdir -p $(@D) && cat $^ > $@.tmp && mv $@.tmp $@
$(T)/xnli/%.tsv:              $(XLT_DATA)/xnli/%.tsv              ; $(call every_line,$(XNLI_EVAL_STRIDE))
$(T)/ner/wikiann/en/train:    $(XLT_DATA)/ner/wikiann/en/train    ; $(call every_block,$(NER_TRAIN_STRIDE))
$(T)/ner/wikiann/%:           $(XLT_DATA)/ner/wikiann/%           ; $(call every_block,$(NER_EVAL_STRIDE))
$(T)/ud/%-ud-train.conllu:    $(XLT_DATA)/ud/%-ud-train.conllu    ; $(call every_block,$(PARSE_TRAIN_STRIDE))
$(T)/ud/%.conllu:             $(XLT_DATA)/ud/%.conllu             ; $(call every_block,$(PARSE_EVAL_STRIDE))
# Chinese NER (the paper: MSRA, Levow 2006): the gold test set as characters with BIO tags (each
# character is one word); MSRA has no dev split, so every 100th training segment stands in.
$(T)/ner/msra/test: $(XLT_DATA)/ner/msra/msra_test_gold_char_bio.txt ; $(call every_block,$(NER_EVAL_STRIDE))
$(T)/ner/msra/dev: $(XLT_DATA)/ner/msra/msra_train_char_bio.txt.xz
	@mkdir -p $(@D)
	xz -dc $< | $(call blocks,$$((100 * $(NER_EVAL_STRIDE)))) > $@.tmp && mv $@.tmp $@

# Each task's files for target L: source train/dev, then the target's dev and test.
# Parsing in Chinese: GSDSimp (simplified script, like the zh pretraining text; r2.16) rather than
# the paper's v2.3 GSD (traditional script): set UD_zh := zh_gsd to use the latter.
UD_en ?= en_ewt
UD_fr ?= fr_gsd
UD_ru ?= ru_gsd
UD_zh ?= zh_gsdsimp
UD_de ?= de_gsd
UD_fake ?= fake_ewt
UD_fakeperm ?= fakeperm_ewt
ud_file = $(T)/ud/$(UD_$(1))/$(UD_$(1))-ud-$(2).conllu
XNLI_TRAIN ?= nli/mnli/mnli_20k.tsv
xnli_files  = $(T)/$(XNLI_TRAIN) $(T)/xnli/dev-en.tsv $(T)/xnli/test-en.tsv $(T)/xnli/dev-$(1).tsv $(T)/xnli/test-$(1).tsv
ner_target  = $(if $(filter zh,$(1)),$(T)/ner/msra/dev $(T)/ner/msra/test,$(T)/ner/wikiann/$(1)/dev $(T)/ner/wikiann/$(1)/test)
ner_files   = $(T)/ner/wikiann/en/train $(T)/ner/wikiann/en/dev $(T)/ner/wikiann/en/test $(call ner_target,$(1))
parse_files = $(foreach s,train dev test,$(call ud_file,en,$(s))) $(call ud_file,$(1),dev) $(call ud_file,$(1),test)

# Fake-English's test and dev sets: English's (the same sample) through the mapping, labels kept;
# permuted Fake-English's with each sentence's words permuted too (entities whole, heads renumbered).
fake_task = mkdir -p $(@D) && $(XLT) -q fake-english --format $(1) $< -o $@
perm_task = mkdir -p $(@D) && $(XLT) -q fake-english --format $(1) $< | $(XLT) -q permute-words --format $(1) -o $@
$(T)/xnli/dev-fake.tsv $(T)/xnli/test-fake.tsv: $(T)/xnli/%-fake.tsv: $(T)/xnli/%-en.tsv ; $(call fake_task,xnli)
$(T)/ner/wikiann/fake/dev $(T)/ner/wikiann/fake/test: $(T)/ner/wikiann/fake/%: $(T)/ner/wikiann/en/% ; $(call fake_task,wikiann)
$(call ud_file,fake,dev) $(call ud_file,fake,test): $(call ud_file,fake,%): $(call ud_file,en,%) ; $(call fake_task,conllu)
$(T)/xnli/dev-fakeperm.tsv $(T)/xnli/test-fakeperm.tsv: $(T)/xnli/%-fakeperm.tsv: $(T)/xnli/%-en.tsv
	$(call perm_task,xnli)
$(T)/ner/wikiann/fakeperm/dev $(T)/ner/wikiann/fakeperm/test: $(T)/ner/wikiann/fakeperm/%: $(T)/ner/wikiann/en/%
	$(call perm_task,wikiann)
$(call ud_file,fakeperm,dev) $(call ud_file,fakeperm,test): $(call ud_file,fakeperm,%): $(call ud_file,en,%)
	$(call perm_task,conllu)

# ---- fine-tuning: the stem is <row>/en-<L>[-seed<k>]; the English test set comes from --data-dir ----
# Seeds per task (a scale sets them where a task is cheap enough for more than FT_SEEDS): the report
# decides a finding only where its margin stands clear of the seeds' spread (xlt/report/noise.py).
XNLI_SEEDS  ?= $(FT_SEEDS)
NER_SEEDS   ?= $(FT_SEEDS)
PARSE_SEEDS ?= $(FT_SEEDS)
SEEDS_xnli   = $(XNLI_SEEDS)
SEEDS_ner    = $(NER_SEEDS)
SEEDS_parse  = $(PARSE_SEEDS)
# A pair's own fine-tuning arguments where a scale sets them (XNLI_ARGS_fake), else the scale's; the
# rules' stem names the pair (<row>/en-<L>, or <L> for the control).
ARGS_xnli   = $(call pair_setting,XNLI_ARGS)
ARGS_ner    = $(call pair_setting,NER_ARGS)
ARGS_parse  = $(call pair_setting,PARSE_ARGS)
# A cell's prerequisite: seeds added later (a finished run, then NER_SEEDS=...) re-run `xlt finetune`,
# which trains the new seeds only (finished runs are skipped without loading a model).
seeds_of = $(call setting,seeds-$(1),$(SEEDS_$(1)))
# and arguments changed later (a new run name for each changed setting; the runs already done are kept)
args_of = $(call setting,args-$(1)-$(call target_of,$*),$(ARGS_$(1)))
# and XNLI's training file (XNLI_TRAIN): a cell trained on another file is made again, as its baselines
train_of = $(if $(filter xnli,$(1)),$(call setting,train-xnli,$(XNLI_TRAIN)))
# and parsing's treebanks (UD_en, UD_<L>): files of another treebank are missing, not newer, and
# a missing secondary file alone remakes nothing, so the old treebank's cells would stay in the table
treebank_of = $(if $(filter parse,$(1)),$(call setting,ud-$(call target_of,$*),$(UD_en) $(UD_$(call target_of,$*))))
# all four, as one prerequisite list of a TASK cell
cell_settings = $(call seeds_of,$(1)) $(call args_of,$(1)) $(call train_of,$(1)) $(call treebank_of,$(1))
# written by `setting` as make expands the cells' prerequisites; a rule, so that a pattern rule may
# name the file before it is written (a fresh work directory)
$(W)/settings/seeds-%: ;
$(W)/settings/args-%: ;
$(W)/settings/train-%: ;
$(W)/settings/ud-%: ;
# $(call finetune,TASK,FILES,ARGS): source train, source dev, one target (dev, test). A pair once
# recorded as a gap (Wiki-CC before CORPUS_cc-<L> was given) is one no longer: its reason goes.
define finetune
$(XLT) finetune $(1) --model $(W)/models/$* -o $(@D) --data-dir $(T) --seeds $(SEEDS_$(1)) \
  --train en $(word 1,$(2)) --dev en $(word 2,$(2)) --eval $(call target_of,$*) $(wordlist 4,5,$(2)) $(3)
rm -f $(W)/table1/$*/missing.json
endef
$(W)/table1/%/xnli/results.json: $(W)/models/%/finished $$(call xnli_files,$$(call target_of,$$*)) $$(call cell_settings,xnli)
	$(call finetune,xnli,$(call xnli_files,$(call target_of,$*)),$(ARGS_xnli))
$(W)/table1/%/ner/results.json: $(W)/models/%/finished $$(call ner_files,$$(call target_of,$$*)) $$(call cell_settings,ner)
	$(call finetune,ner,$(call ner_files,$(call target_of,$*)),$(ARGS_ner))
$(W)/table1/%/parse/results.json: $(W)/models/%/finished $$(call parse_files,$$(call target_of,$$*)) $$(call cell_settings,parse)
	$(call finetune,parse,$(call parse_files,$(call target_of,$*)),$(ARGS_parse))

# The control row: the Default model's run directory with --checkpoint untrained (what fine-tuning
# alone reaches; pretraining is worth the difference). Its stem is the target language.
define finetune_control
$(XLT) finetune $(1) --model $(W)/models/default/en-$* --checkpoint untrained -o $(@D) --data-dir $(T) \
  --seeds $(SEEDS_$(1)) --train en $(word 1,$(2)) --dev en $(word 2,$(2)) --eval $* $(wordlist 4,5,$(2)) $(3)
endef
$(W)/table1/control/en-%/xnli/results.json: $(W)/models/default/en-%/finished $$(call xnli_files,$$*) $$(call cell_settings,xnli)
	$(call finetune_control,xnli,$(call xnli_files,$*),$(ARGS_xnli))
$(W)/table1/control/en-%/ner/results.json: $(W)/models/default/en-%/finished $$(call ner_files,$$*) $$(call cell_settings,ner)
	$(call finetune_control,ner,$(call ner_files,$*),$(ARGS_ner))
$(W)/table1/control/en-%/parse/results.json: $(W)/models/default/en-%/finished $$(call parse_files,$$*) $$(call cell_settings,parse)
	$(call finetune_control,parse,$(call parse_files,$*),$(ARGS_parse))

# Trivial baselines from the task files alone, scored on the English and the target test sets.
# $(call baselines,TASK,FILES): FILES as for finetune (train, dev, en test, target dev, target test).
baselines = mkdir -p $(@D) && $(XLT) -q baselines $(1) --train en $(word 1,$(2)) --eval en $(word 3,$(2)) \
  --eval $* $(word 5,$(2)) -o $@
$(W)/table1/baselines/en-%/xnli.json: $$(call xnli_files,$$*) $$(call train_of,xnli) ; $(call baselines,xnli,$^)
$(W)/table1/baselines/en-%/ner.json: $$(call ner_files,$$*) ; $(call baselines,ner,$^)
$(W)/table1/baselines/en-%/parse.json: $$(call parse_files,$$*) $$(call treebank_of,parse) ; $(call baselines,parse,$^)

# A cell that cannot be computed, with the reason for the report to show: Wiki-CC without a web
# corpus for its language, and the rows Fake-English cannot have (NA_<row>_<L>).
NA_FAKE := not applicable to Fake-English:
NA_wiki-cc_fake         := $(NA_FAKE) Wiki-CC swaps the target's Wikipedia for web text, and Fake-English has no text of its own
NA_default-anchors_fake := $(NA_FAKE) anchors are strings both vocabularies share, and Fake-English shares none with English, so this row is Default with per-language BPE
NA_no-anchors_fake      := $(NA_FAKE) removing shared strings removes nothing when there are none, so this row is Default anchors, itself not applicable
# K et al.'s word-order control is one row: Default with the target's words permuted, read beside
# Default on fake (the report compares the two).
ifneq ($(filter fakeperm,$(LANGS)),)
ifeq ($(filter fake,$(LANGS)),)
$(error LANGS=fakeperm is fake's word-order control: set LANGS="fake fakeperm")
endif
endif
NA_ONLY_DEFAULT_fakeperm := the word-order control is Default's alone (K et al. 2020): the other rows are run on fake
# $(call cell_gap,ROW,L): the reason, or empty where the cell can be computed
cell_gap = $(or $(NA_$(1)_$(2)),$(and $(filter-out default,$(1)),$(NA_ONLY_DEFAULT_$(2))),$(and $(filter wiki-cc,$(1)),$(if $(CORPUS_cc-$(2)),,$(or $(GAP_cc-$(2)),no web corpus))))
$(W)/table1/%/missing.json:
	@mkdir -p $(@D)
	printf '{"reason": "%s"}\n' "$(call cell_gap,$(patsubst %/,%,$(dir $*)),$(call target_of,$*))" > $@.tmp && mv $@.tmp $@

# ---- the table ----------------------------------------------------------------------------------
# A later pretraining seed's model is fine-tuned on PRETRAIN_SEED_TASKS only (a scale leaves out a task
# that decides nothing at its size).
PRETRAIN_SEED_TASKS ?= $(TASKS)
table1_cell = $(if $(call cell_gap,$(1),$(2)), \
  $(W)/table1/$(1)/en-$(2)/missing.json, \
  $(foreach s,$(call pretrain_seeds,$(2)),$(foreach t,$(if $(filter-out 0,$(s)),$(PRETRAIN_SEED_TASKS),$(TASKS)), \
    $(W)/table1/$(1)/$(call pair_dir,$(2),$(s))/$(t)/results.json)))
# the paper's rows, then each pair's extra rows (EXTRA_ROWS_<L>)
extra_rows = $(call setting_of,EXTRA_ROWS,$(1))
$(foreach l,$(LANGS),$(foreach r,$(call extra_rows,$(l)),$(if $(ROW_$(r)),,$(error EXTRA_ROWS_$(l): $(r) is not a row (no ROW_$(r) in make/table1.mk)))))
# only Fake-English's table shows a row that is not the paper's (xlt/report/table1_fake.py)
$(foreach l,$(filter-out fake fakeperm,$(LANGS)),$(if $(call extra_rows,$(l)),$(error EXTRA_ROWS for en-$(l): only Fake-English's table has rows that are not the paper's (EXTRA_ROWS_fake))))
TABLE1_CELLS   := $(foreach r,$(TABLE1_ROWS),$(foreach l,$(LANGS),$(call table1_cell,$(r),$(l)))) \
  $(foreach l,$(LANGS),$(foreach r,$(call extra_rows,$(l)),$(call table1_cell,$(r),$(l))))
TABLE1_RESULTS := $(TABLE1_CELLS) $(foreach l,$(LANGS),$(foreach t,$(TASKS),$(W)/table1/control/en-$(l)/$(t)/results.json \
    $(W)/table1/baselines/en-$(l)/$(t).json))
# every model those cells read, in row order (each node of a multi-node run pretrains them in turn)
table1_models = $(if $(call cell_gap,$(1),$(2)),, \
  $(foreach s,$(call pretrain_seeds,$(2)),$(W)/models/$(1)/$(call pair_dir,$(2),$(s))/finished))
TABLE1_MODELS  := $(foreach r,$(TABLE1_ROWS),$(foreach l,$(LANGS),$(call table1_models,$(r),$(l)))) \
  $(foreach l,$(LANGS),$(foreach r,$(call extra_rows,$(l)),$(call table1_models,$(r),$(l))))

# Several nodes (SCALE=paper NNODES=2 MASTER=host0:29500): one node prepares every token store
# (`make prepare-table1`), then every node runs `make pretrain-table1` (the same models in the same
# order, one at a time, run directories on a shared file system), then one node runs
# `make reproduce-table1` for the fine-tuning and the table.
.PHONY: prepare-table1 pretrain-table1
prepare-table1: $(sort $(foreach m,$(patsubst $(W)/models/%/finished,%,$(TABLE1_MODELS)),$(call row_data,$(m))/stores.stamp))
pretrain-table1: $(TABLE1_MODELS)

# The cells are a setting (relative to $(W), so another spelling of W changes nothing): with
# `.SECONDARY:` a cell added later (a pretraining seed, a row) would otherwise stay unbuilt behind a
# report newer than everything it was made from.
$(W)/report/table1.md: $(TABLE1_RESULTS) $$(call setting,langs,$(LANGS)) \
                       $$(call setting,table1-cells,$(patsubst $(W)/%,%,$(TABLE1_CELLS)))
	$(XLT) report table1 --results-dir $(W)/table1 --langs $(call comma_list,$(LANGS)) -o $(W)/report > /dev/null

reproduce-table1: $(W)/report/table1.md
	@cat $<
	@echo "Table 1 at SCALE=$(SCALE): $(W)/report/table1.{md,csv,tex,json}"

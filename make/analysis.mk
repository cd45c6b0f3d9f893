# Representation analyses on the Table 1 Default models and on monolingual models: Wu et al.'s
# Figure 7 (CKA) and §5.1 alignment, Liu et al.'s Table 2 (shift decoding) and Table 4 (XNLI with
# the mean difference shift). Included by the Makefile after make/table1.mk (uses T, PRETRAIN).
#
#   $(W)/models/mono/<L>/          a monolingual model (one language, its own BPE)
#   $(W)/parallel/xnli-<split>.<L>.txt   XNLI premises, one per distinct English premise (parallel)
#   $(W)/figure7/en-<L>.<column>.json    `xlt cka compare` columns; fig7.{json,tsv,png}
#   $(W)/alignment/en-<L>.<level>.json   `xlt align` results
#   $(W)/liu/en-<L>/...            language means, shift files, translations, XNLI with shift
#   $(W)/report/                   figure7, alignment, liu-table2, liu-table4 (.md .csv .tex .json, .png)
#
# MODEL=hf:NAME (or a transformers directory, or an xlt run): the two Liu et al. tables of THAT model,
# nothing pretrained, as the paper studies one m-BERT for every language (docs/hf.md):
#   $(W)/model/<MODEL_TAG>/liu/means/<L>.npz     language means, once per language
#   $(W)/model/<MODEL_TAG>/liu/en-<L>/...        shift files, translations (as above)
#   $(W)/model/<MODEL_TAG>/liu/xnli-{all,mds}/   XNLI all layers / bottom frozen + shift: one
#                                                fine-tuning each, with every target of LANGS
#   $(W)/model/<MODEL_TAG>/report/               liu-table2, liu-table4
#   $(W)/token-sets/<L>.txt                      text whose tokens are V_L (the convert rate) for a
#                                                transformers model, which records none

# MODEL's outputs live apart from the pipeline's, one directory per model: MODEL_TAG is hf:NAME as
# hf-NAME, a directory as dir + its absolute path, each with / as _ (hf:org/x -> hf-org_x).
# Only as make's argument (make ... MODEL=...): a MODEL in the shell's environment is another tool's.
ifeq ($(origin MODEL),environment)
MODEL :=
endif
MODEL := $(strip $(MODEL))
ifeq ($(MODEL),)
MDS_DIR    := $(W)/liu
MDS_REPORT := $(W)/report
LIU_DEPTH  := 8
else
MODEL_TAG  ?= $(subst /,_,$(if $(filter hf:%,$(MODEL)),hf-$(patsubst hf:%,%,$(MODEL)),dir$(abspath $(MODEL))))
MDS_DIR    := $(W)/model/$(MODEL_TAG)/liu
MDS_REPORT := $(W)/model/$(MODEL_TAG)/report
# a directory's config is a prerequisite (a re-exported model is studied again); hf:NAME has no file
MODEL_READY := $(if $(filter hf:%,$(MODEL)),,$(MODEL)/config.json)
# an xlt run knows which tokens each language owns; a transformers model needs text (--token-set)
MODEL_IS_HF := $(if $(filter hf:%,$(MODEL)),yes,$(if $(wildcard $(MODEL)/text.json),,yes))
TOKEN_SET_BYTES ?= 10000000
MODEL_XNLI_ARGS ?= $(XNLI_ARGS)
# The model's number of layers, from its config (hf:NAME: the hub or its cache); LIU_DEPTH=N skips this.
ifeq ($(origin LIU_DEPTH),undefined)
LIU_DEPTH := $(shell $(PY) -c 'import sys; from xlt.model.spec import model_depth; print(model_depth(sys.argv[1]))' \
               '$(MODEL)' 2>&1 | tail -n 1)
no_digits = $(subst 0,,$(subst 1,,$(subst 2,,$(subst 3,,$(subst 4,,$(subst 5,,$(subst 6,,$(subst 7,,$(subst 8,,$(subst 9,,$(1)))))))))))
ifneq ($(words $(LIU_DEPTH))$(call no_digits,$(LIU_DEPTH)),1)
$(error MODEL=$(MODEL): cannot read its number of layers ($(subst xlt.utils.errors.XltError: ,,$(LIU_DEPTH))); \
  set LIU_DEPTH=N)
endif
endif
endif
# Layers at the papers' relative depths (8-layer xlt models: every preset the scales use): Liu et al.
# freeze and shift after layer 6 of 12 (Table 4) -> 4 of 8; BLEU-1 at layer 11 and convert rate at
# layer 10 of 12 (Table 2) -> 7 and 6 of 8. Any of them can be set on the command line.
LIU_LAYER       := $(shell echo $$(( $(LIU_DEPTH) / 2 )))
LIU_BLEU_LAYER  := $(shell echo $$(( $(LIU_DEPTH) - 1 )))
LIU_CR_LAYER    := $(shell echo $$(( $(LIU_DEPTH) - 2 )))
LIU_ALPHAS      := 0.25,0.5,1,1.5,2
TATOEBA_fr := fra
TATOEBA_ru := rus
TATOEBA_zh := cmn
TATOEBA_de := deu
src_of = $(firstword $(subst -, ,$(1)))
tgt_of = $(lastword $(subst -, ,$(1)))

# ---- monolingual models -------------------------------------------------------------------------
$(W)/models/mono/%/finished: $(W)/data/mono/%/stores.stamp
	$(PRETRAIN) --run-dir $(@D) --vocab $(<D)/vocab --codes $* $(<D)/codes.$* \
	  --train $* $(<D)/$*.train --dev $* $(<D)/$*.dev --select-on $* $(PRETRAIN_ARGS)
	touch $@

# ---- parallel sentences: XNLI is multi-way parallel, line by line ------------------------------
# The premise of every line where the English premise changes (each premise has three hypotheses).
$(W)/parallel/xnli-%.txt: $(T)/xnli/$$(basename $$*)-en.tsv $(T)/xnli/$$(basename $$*)-$$(subst .,,$$(suffix $$*)).tsv
	@mkdir -p $(@D)
	awk -F'\t' 'NR == FNR { if ($$1 != previous) keep[FNR]; previous = $$1; next } FNR in keep { print $$1 }' \
	  $+ > $@.tmp && mv $@.tmp $@

# ---- Figure 7: CKA per layer of parallel sentences ---------------------------------------------
cka = $(XLT) cka compare --device $(DEVICE) --lang-a en --text-a $(W)/parallel/xnli-dev.en.txt --lang-b $* \
  --text-b $(W)/parallel/xnli-dev.$*.txt --label en-$* -o $(basename $@)
CKA_TEXT = $(W)/parallel/xnli-dev.en.txt $(W)/parallel/xnli-dev.%.txt
$(W)/figure7/en-%.bilingual.json: $(W)/models/default/en-%/finished $(CKA_TEXT)
	@mkdir -p $(@D)
	$(cka) --model-a $(W)/models/default/en-$* --column Bilingual
$(W)/figure7/en-%.monolingual.json: $(W)/models/mono/en/finished $(W)/models/mono/%/finished $(CKA_TEXT)
	@mkdir -p $(@D)
	$(cka) --model-a $(W)/models/mono/en --model-b $(W)/models/mono/$* --column Monolingual
# The lower bound: English through its trained model, the other language through a random encoder.
$(W)/figure7/en-%.random.json: $(W)/models/mono/en/finished $(W)/models/mono/%/finished $(CKA_TEXT)
	@mkdir -p $(@D)
	$(cka) --model-a $(W)/models/mono/en --model-b $(W)/models/mono/$* --random-b 0 --column Random
FIGURE7_COLUMNS := $(foreach l,$(ANALYSIS_LANGS),$(foreach c,bilingual monolingual random,$(W)/figure7/en-$(l).$(c).json))
$(W)/figure7/fig7.json: $(FIGURE7_COLUMNS) $$(call setting,analysis-langs,$(ANALYSIS_LANGS))
	$(XLT) cka table $(filter %.json,$^) -o $(basename $@)
$(W)/report/figure7.md: $(W)/figure7/fig7.json
	$(XLT) report figure7 --results-dir $(W)/figure7 --langs $(call comma_list,$(ANALYSIS_LANGS)) -o $(W)/report > /dev/null
reproduce-figure7: $(W)/report/figure7.md
	@cat $<

# ---- §5.1: Procrustes alignment of two monolingual models ----------------------------------------
MONO_PAIR = $(W)/models/mono/en/finished $(W)/models/mono/%/finished
align = $(XLT) align $(1) --device $(DEVICE) --model $(W)/models/mono/en --target-model $(W)/models/mono/$* \
  --source-lang en --target-lang $* -o $@
muse_dicts = --train-dict $(MUSE)/en-$*.0-5000.txt --test-dict $(MUSE)/en-$*.5000-6500.txt
$(W)/alignment/en-%.word.json: $(MONO_PAIR) $(MUSE)/en-%.0-5000.txt $(MUSE)/en-%.5000-6500.txt
	@mkdir -p $(@D)
	$(call align,word) $(muse_dicts)
$(W)/alignment/en-%.contextual-word.json: $(MONO_PAIR) $(MUSE)/en-%.0-5000.txt $(MUSE)/en-%.5000-6500.txt \
                                          $(W)/raw/en.train $(W)/raw/%.train
	@mkdir -p $(@D)
	$(call align,contextual-word) $(muse_dicts) --source-corpus $(W)/raw/en.train \
	  --target-corpus $(W)/raw/$*.train --n-sentences $(CWORD_SENTENCES)
TATOEBA = $(XLT_DATA)/tatoeba/v1/tatoeba.$(TATOEBA_$(1))-eng
$(W)/alignment/en-%.sentence.json: $(MONO_PAIR) $(T)/xnli/dev-en.tsv $(T)/xnli/dev-%.tsv \
                                   $(T)/xnli/test-en.tsv $(T)/xnli/test-%.tsv $$(call TATOEBA,$$*).eng
	@mkdir -p $(@D)
	$(call align,sentence) --train $(T)/xnli/dev-en.tsv $(T)/xnli/dev-$*.tsv \
	  --train $(T)/xnli/test-en.tsv $(T)/xnli/test-$*.tsv \
	  --test $(call TATOEBA,$*).eng $(call TATOEBA,$*).$(TATOEBA_$*)
ALIGNMENT_RESULTS := $(foreach l,$(ANALYSIS_LANGS),$(foreach k,word contextual-word sentence,$(W)/alignment/en-$(l).$(k).json))
$(W)/report/alignment.md: $(ALIGNMENT_RESULTS) $$(call setting,analysis-langs,$(ANALYSIS_LANGS))
	$(XLT) report alignment --results-dir $(W)/alignment --langs $(call comma_list,$(ANALYSIS_LANGS)) -o $(W)/report > /dev/null
reproduce-alignment: $(W)/report/alignment.md
	@cat $<

# ---- the alignment fine-tuning keeps (issue 28's XNLI diagnosis) --------------------------------
# Per layer, each XNLI test hypothesis of L retrieves its English one in Table 1's model as it is
# (`xlt align sentence --map none`), before fine-tuning and after each task's (the cell's first run,
# `--finetuned`): whether what the classifier learns on English can read L. Table 1's cells first
# (`make reproduce-table1 LANGS=...`, or the cells named here are made); a few seconds per file.
KEPT_ROWS  ?= default
KEPT_TASKS ?= $(TASKS)
KD         := $(W)/kept-alignment
ifneq ($(filter control,$(KEPT_ROWS)),)
$(error KEPT_ROWS: the control has no pretrained model of its own (read its runs with xlt align sentence --model \
  $(W)/models/default/en-L --finetuned $(W)/table1/control/en-L/TASK))
endif
kept_tests = $(T)/xnli/test-en.tsv $(T)/xnli/test-$(call target_of,$(1)).tsv
kept_retrieval = $(XLT) -q align sentence --device $(DEVICE) --model $(W)/models/$(1) --source-lang en \
  --target-lang $(call target_of,$(1)) --map none --test-columns 2 \
  --test $(call kept_tests,$(1)) $(2) -o $@
$(KD)/%/pretrained.json: $(W)/models/%/finished $$(call kept_tests,$$*)
	@mkdir -p $(@D)
	$(call kept_retrieval,$*)
$(KD)/%.json: $(W)/table1/%/results.json $(W)/models/$$(*D)/finished $$(call kept_tests,$$(*D))
	@mkdir -p $(@D)
	$(call kept_retrieval,$(*D),--finetuned $(W)/table1/$*)
KEPT_RESULTS := $(foreach r,$(KEPT_ROWS),$(foreach l,$(LANGS),$(foreach s,pretrained $(KEPT_TASKS),$(KD)/$(r)/en-$(l)/$(s).json)))
$(W)/report/kept-alignment.md: $(KEPT_RESULTS) $$(call setting,kept-alignment,$(LANGS) / $(KEPT_ROWS) / $(KEPT_TASKS))
	$(XLT) report kept-alignment --results-dir $(KD) --langs $(call comma_list,$(LANGS)) \
	  --rows $(call comma_list,$(KEPT_ROWS)) -o $(W)/report > /dev/null
reproduce-kept-alignment: $(W)/report/kept-alignment.md
	@cat $<

# ---- Liu et al. Table 2: unsupervised token translation by the mean difference shift ------------
# Means of Language over held-out text; stems are <pair>/<lang> and <pair>/<src>-<tgt>. With MODEL,
# one model for every pair: its means once per language, in $(MDS_DIR)/means/.
mds_model = $(or $(MODEL),$(W)/models/default/$(1))
mds_means = $(if $(MODEL),$(MDS_DIR)/means/$(2).npz,$(MDS_DIR)/$(1)/$(2).means.npz)
$(W)/liu/%.means.npz: $(W)/models/default/$$(*D)/finished $(W)/raw/$$(*F).dev
	@mkdir -p $(@D)
	$(XLT) shift-decode means --device $(DEVICE) --model $(W)/models/default/$(*D) --lang $(*F) \
	  --n-sentences $(MEANS_SENTENCES) $(W)/raw/$(*F).dev -o $@
ifneq ($(MODEL),)
$(MDS_DIR)/means/%.npz: $(W)/raw/%.dev $(MODEL_READY)
	@mkdir -p $(@D)
	$(XLT) shift-decode means --device $(DEVICE) --model $(MODEL) --lang $* \
	  --n-sentences $(MEANS_SENTENCES) $< -o $@
endif
$(MDS_DIR)/%.shift.npz: $$(call mds_means,$$(*D),$$(call src_of,$$(*F))) $$(call mds_means,$$(*D),$$(call tgt_of,$$(*F)))
	@mkdir -p $(@D)
	$(XLT) shift-decode shift --src $(word 1,$^) --tgt $(word 2,$^) -o $@
# V_L of a transformers model: the tokens of the first TOKEN_SET_BYTES of L's text after the held-out part
$(W)/token-sets/%.txt: $$(CORPUS_$$*) | install
	$(call need_corpus,$*)
	@mkdir -p $(@D)
	xz -dc $(CORPUS_$*) | $(call slice,$(DEV_BYTES),$(TOKEN_SET_BYTES)) > $@.tmp && mv $@.tmp $@
mds_token_texts = $(if $(MODEL_IS_HF),$(foreach l,$(1),$(W)/token-sets/$(l).txt))
mds_token_sets = $(foreach l,$(1),$(if $(MODEL_IS_HF),--token-set $(l) $(W)/token-sets/$(l).txt))
$(MDS_DIR)/%.translate.json: $(MDS_DIR)/%.shift.npz $(W)/parallel/xnli-test.$$(call src_of,$$(*F)).txt \
                            $(W)/parallel/xnli-test.$$(call tgt_of,$$(*F)).txt \
                            $$(call mds_token_texts,$$(call src_of,$$(*F)) $$(call tgt_of,$$(*F)))
	$(XLT) shift-decode translate --device $(DEVICE) --model $(call mds_model,$(*D)) --shift $< --input $(word 2,$^) \
	  --reference $(word 3,$^) --alphas 1,2,3 --n-sentences $(TRANSLATE_SENTENCES) \
	  $(call mds_token_sets,$(call src_of,$(*F)) $(call tgt_of,$(*F))) -o $@
LIU_TRANSLATIONS := $(foreach l,$(LANGS),$(MDS_DIR)/en-$(l)/en-$(l).translate.json $(MDS_DIR)/en-$(l)/$(l)-en.translate.json)
$(MDS_DIR)/table2.json: $(LIU_TRANSLATIONS) $$(call setting,langs,$(LANGS))
	$(XLT) shift-decode table $(filter %.json,$^) --layer $(LIU_BLEU_LAYER) --alpha 3 --cr-layer $(LIU_CR_LAYER) -o $(basename $@)
$(MDS_REPORT)/liu-table2.md: $(MDS_DIR)/table2.json
	$(XLT) report liu-table2 --results-dir $(MDS_DIR) --langs $(call comma_list,$(LANGS)) -o $(MDS_REPORT) > /dev/null
reproduce-liu-table2: $(MDS_REPORT)/liu-table2.md
	@cat $<

# ---- Liu et al. Table 4: XNLI, bottom half frozen, target shifted towards English at test time ----
ifeq ($(MODEL),)
# "Fine-tune all layers" is the Table 1 Default cell; this run gives "last layers" and "+ MDS", with
# the cell's seeds and arguments (and made again when they change), so that the columns compare.
$(W)/liu/en-%/xnli-mds/results.json: $(W)/models/default/en-%/finished $(W)/liu/en-$$*/$$*-en.shift.npz \
                                     $$(call xnli_files,$$*) $$(call cell_settings,xnli)
	$(XLT) finetune xnli --model $(W)/models/default/en-$* -o $(@D) --data-dir $(T) --seeds $(SEEDS_xnli) \
	  --train en $(T)/$(XNLI_TRAIN) --dev en $(T)/xnli/dev-en.tsv \
	  --eval $* $(T)/xnli/dev-$*.tsv $(T)/xnli/test-$*.tsv --freeze-bottom $(LIU_LAYER) \
	  --shift $(W)/liu/en-$*/$*-en.shift.npz --shift-layer $(LIU_LAYER) --shift-alpha $(LIU_ALPHAS) $(ARGS_xnli)
LIU_TABLE4 := $(foreach l,$(LANGS),$(W)/liu/en-$(l)/xnli-mds/results.json $(W)/table1/default/en-$(l)/xnli/results.json)
MDS_TABLE1_DIR := --table1-dir $(W)/table1
else
# MODEL: as the paper, one fine-tuning per row evaluated on every target (MODEL_XNLI_ARGS: the scales'
# learning rates are for 64-wide models below the gpu scale); the English test set from --data-dir.
MDS_SHIFTS := $(foreach l,$(LANGS),$(MDS_DIR)/en-$(l)/$(l)-en.shift.npz)
mds_xnli = $(XLT) finetune xnli --model $(MODEL) -o $(@D) --data-dir $(T) --seeds $(FT_SEEDS) \
  --train en $(T)/$(XNLI_TRAIN) --dev en $(T)/xnli/dev-en.tsv \
  $(foreach l,$(LANGS),--eval $(l) $(T)/xnli/dev-$(l).tsv $(T)/xnli/test-$(l).tsv) $(1) $(MODEL_XNLI_ARGS)
$(MDS_DIR)/xnli-all/results.json: $(MODEL_READY) $(foreach l,$(LANGS),$(call xnli_files,$(l))) $$(call setting,langs,$(LANGS)) \
                                  $$(call train_of,xnli)
	$(call mds_xnli)
$(MDS_DIR)/xnli-mds/results.json: $(MODEL_READY) $(MDS_SHIFTS) $(foreach l,$(LANGS),$(call xnli_files,$(l))) \
                                  $$(call setting,langs,$(LANGS)) $$(call train_of,xnli)
	$(call mds_xnli,--freeze-bottom $(LIU_LAYER) $(foreach s,$(MDS_SHIFTS),--shift $(s)) \
	  --shift-layer $(LIU_LAYER) --shift-alpha $(LIU_ALPHAS))
LIU_TABLE4 := $(MDS_DIR)/xnli-all/results.json $(MDS_DIR)/xnli-mds/results.json
MDS_TABLE1_DIR :=
endif
$(MDS_REPORT)/liu-table4.md: $(LIU_TABLE4) $$(call setting,langs,$(LANGS))
	$(XLT) report liu-table4 --results-dir $(MDS_DIR) $(MDS_TABLE1_DIR) --langs $(call comma_list,$(LANGS)) \
	  -o $(MDS_REPORT) > /dev/null
reproduce-liu-table4: $(MDS_REPORT)/liu-table4.md
	@cat $<

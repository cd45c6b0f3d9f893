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

# Layers for an 8-layer model (every preset the scales use), at the papers' relative depths:
# Liu et al. freeze and shift after layer 6 of 12 (Table 4) -> 4 of 8; BLEU-1 at layer 11 and convert
# rate at layer 10 of 12 (Table 2) -> 7 and 6 of 8.
LIU_LAYER       := 4
LIU_BLEU_LAYER  := 7
LIU_CR_LAYER    := 6
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

# ---- Liu et al. Table 2: unsupervised token translation by the mean difference shift ------------
# Means of Language over held-out text; stems are <pair>/<lang> and <pair>/<src>-<tgt>.
$(W)/liu/%.means.npz: $(W)/models/default/$$(*D)/finished $(W)/raw/$$(*F).dev
	@mkdir -p $(@D)
	$(XLT) shift-decode means --device $(DEVICE) --model $(W)/models/default/$(*D) --lang $(*F) \
	  --n-sentences $(MEANS_SENTENCES) $(W)/raw/$(*F).dev -o $@
$(W)/liu/%.shift.npz: $(W)/liu/$$(*D)/$$(call src_of,$$(*F)).means.npz $(W)/liu/$$(*D)/$$(call tgt_of,$$(*F)).means.npz
	$(XLT) shift-decode shift --src $(word 1,$^) --tgt $(word 2,$^) -o $@
$(W)/liu/%.translate.json: $(W)/liu/%.shift.npz $(W)/parallel/xnli-test.$$(call src_of,$$(*F)).txt \
                           $(W)/parallel/xnli-test.$$(call tgt_of,$$(*F)).txt
	$(XLT) shift-decode translate --device $(DEVICE) --model $(W)/models/default/$(*D) --shift $< --input $(word 2,$^) \
	  --reference $(word 3,$^) --alphas 1,2,3 --n-sentences $(TRANSLATE_SENTENCES) -o $@
LIU_TRANSLATIONS := $(foreach l,$(LANGS),$(W)/liu/en-$(l)/en-$(l).translate.json $(W)/liu/en-$(l)/$(l)-en.translate.json)
$(W)/liu/table2.json: $(LIU_TRANSLATIONS) $$(call setting,langs,$(LANGS))
	$(XLT) shift-decode table $(filter %.json,$^) --layer $(LIU_BLEU_LAYER) --alpha 3 --cr-layer $(LIU_CR_LAYER) -o $(basename $@)
$(W)/report/liu-table2.md: $(W)/liu/table2.json
	$(XLT) report liu-table2 --results-dir $(W)/liu --langs $(call comma_list,$(LANGS)) -o $(W)/report > /dev/null
reproduce-liu-table2: $(W)/report/liu-table2.md
	@cat $<

# ---- Liu et al. Table 4: XNLI, bottom half frozen, target shifted towards English at test time ----
# "Fine-tune all layers" is the Table 1 Default cell; this run gives "last layers" and "+ MDS".
$(W)/liu/en-%/xnli-mds/results.json: $(W)/models/default/en-%/finished $(W)/liu/en-$$*/$$*-en.shift.npz \
                                     $$(call xnli_files,$$*)
	$(XLT) finetune xnli --model $(W)/models/default/en-$* -o $(@D) --data-dir $(T) --seeds $(FT_SEEDS) \
	  --train en $(T)/$(XNLI_TRAIN) --dev en $(T)/xnli/dev-en.tsv \
	  --eval $* $(T)/xnli/dev-$*.tsv $(T)/xnli/test-$*.tsv --freeze-bottom $(LIU_LAYER) \
	  --shift $(W)/liu/en-$*/$*-en.shift.npz --shift-layer $(LIU_LAYER) --shift-alpha $(LIU_ALPHAS) $(XNLI_ARGS)
LIU_TABLE4 := $(foreach l,$(LANGS),$(W)/liu/en-$(l)/xnli-mds/results.json $(W)/table1/default/en-$(l)/xnli/results.json)
$(W)/report/liu-table4.md: $(LIU_TABLE4) $$(call setting,langs,$(LANGS))
	$(XLT) report liu-table4 --results-dir $(W)/liu --table1-dir $(W)/table1 --langs $(call comma_list,$(LANGS)) -o $(W)/report > /dev/null
reproduce-liu-table4: $(W)/report/liu-table4.md
	@cat $<

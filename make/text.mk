# The text pipeline: corpora -> raw slices -> tokenized text -> BPE codes -> one data directory per
# (vocabulary kind, language pair) holding codes.<lang>, <lang>.{train,dev}.bpe, vocab and token
# stores. Included by the Makefile, which sets W, XLT, XLT_DATA and the scale's sizes.

# ---- corpora ------------------------------------------------------------------------------------
# A corpus name and the files it reads, in order (xz, one paragraph or sentence a line). `cc-L` is
# web/news text for Wiki-CC; no Russian web corpus was found for the mirror (data MANIFEST §8.2),
# so CORPUS_cc-ru is empty and that Table 1 cell is reported as a gap. Point any of these at full
# dumps for paper-size data: make reproduce-table1 SCALE=paper CORPUS_en=/data/enwiki.txt.xz
CORPUS_en    ?= $(XLT_DATA)/mono/en/enwiki_wikiextractor_sample_30MB.txt.xz
CORPUS_fr    ?= $(XLT_DATA)/mono/fr/frwiki_vikidia_wivico_piaf_13MB.txt.xz \
                $(XLT_DATA)/mono/fr/frwiki_wikineural_valtest_sentences.txt.xz
CORPUS_ru    ?= $(XLT_DATA)/mono/ru/ruwiki_wikineural_valtest_sentences.txt.xz
CORPUS_zh    ?= $(XLT_DATA)/mono/zh/zhwiki_drcd_devtest_wikiextractor_3.6MB.txt.xz \
                $(XLT_DATA)/mono/zh/zhwiki_cmrc2018_contexts.txt.xz \
                $(XLT_DATA)/mono/zh/zhwiki_tencentpretrain_sample.txt.xz
# LANGS="fr ru zh de" adds en-de (German is in the paper's Figure 7, not in Table 1)
CORPUS_de    ?= $(XLT_DATA)/mono/de/dewiki_klexikon_sample_40MB.txt.xz
CORPUS_cc-fr ?= $(XLT_DATA)/mono_cc/fr/orangesum_news_sample_20MB.txt.xz
CORPUS_cc-zh ?= $(XLT_DATA)/mono_cc/zh/cluecorpussmall_sampled.txt.xz \
                $(XLT_DATA)/mono_cc/zh/chnsenticorp_reviews.txt.xz
CORPUS_cc-ru ?=
GAP_cc-ru    ?= no Russian web/news corpus in the data mirror (data MANIFEST 8.2)
MUSE         := $(XLT_DATA)/muse/splits_reconstructed

# Each data file from the recipe that lays it out (xlt/data/recipe_files/*.json): `xlt data fetch`
# takes a file's path, so a new data file needs no mapping here.
$(XLT_DATA)/%: | install
	$(XLT) data fetch --data-dir $(XLT_DATA) $*

# The language of a corpus or file name: cc-fr.train -> fr, en.dev -> en.
lang_of = $(lastword $(subst -, ,$(basename $(notdir $1))))

# ---- raw slices and tokenization ----------------------------------------------------------------
# Non-blank lines, cut by size in bytes (paragraph lengths differ too much between corpora for line
# counts): the first DEV_BYTES are held out, the next TRAIN_BYTES are the training text. awk reads
# to the end (no early exit), so `pipefail` still catches a failing xz. $(call slice,START,BYTES)
slice = LC_ALL=C awk -v lo=$(1) -v hi=$$(($(1) + $(2))) 'NF { n += length($$0) + 1; if (n > lo && n <= hi) print }'
need_corpus = $(if $(CORPUS_$(1)),,$(error corpus $(1) has no files: $(or $(GAP_$(1)),set CORPUS_$(1))))

$(W)/raw/%.dev: $$(CORPUS_$$*) | install
	$(call need_corpus,$*)
	@mkdir -p $(@D)
	xz -dc $(CORPUS_$*) | $(call slice,0,$(DEV_BYTES)) > $@.tmp && mv $@.tmp $@
$(W)/raw/%.train: $$(CORPUS_$$*) | install
	$(call need_corpus,$*)
	@mkdir -p $(@D)
	xz -dc $(CORPUS_$*) | $(call slice,$(DEV_BYTES),$(TRAIN_BYTES)) > $@.tmp && mv $@.tmp $@

# Fake-English (K et al. 2020; Dufter & Schütze 2020): English with every non-whitespace character
# moved to a private-use plane by `xlt fake-english`, so the pair shares no token but has one
# structure. A model that read a sentence in both languages could align the two by matching twins,
# so its text is another stretch of English: of the same corpus, the TRAIN_BYTES right after
# English's training slice (fake.train), then DEV_BYTES (fake.dev); of CORPUS_fake, when set to
# other English text, its first TRAIN_BYTES and the DEV_BYTES after them. Lines that English's
# slices also have are dropped: Wikipedia repeats boilerplate ("He competed at the 2018 Winter
# Olympics.": 111 of the smoke scale's 6,677 fake lines).
CORPUS_fake ?= $(CORPUS_en)
bytes      = $(shell echo $$(($(1))))
FAKE_START = $(strip $(if $(filter $(firstword $(CORPUS_en)),$(firstword $(CORPUS_fake))), \
  $(call bytes,$(DEV_BYTES) + $(TRAIN_BYTES)),0))
FAKE_EMPTY = Fake-English needs English text beyond en's training slice, and its corpus ($(CORPUS_fake)) ends \
  before byte $(1) (TRAIN_BYTES=$(strip $(TRAIN_BYTES))): set CORPUS_fake to other English text of TRAIN_BYTES \
  + DEV_BYTES (make ... CORPUS_fake=/data/more-english.txt.xz), or use SCALE=smoke or SCALE=demo
# Checked before any work where LANGS has fake and the corpus is there (xz's index has its size;
# the blank lines that it also counts are few), and after slicing in any case. The size is read off
# the "file" line: for a missing file xz 5.4 still prints a "totals" line, of 0 bytes.
corpus_bytes = $(shell xz --robot --list $(1) 2>/dev/null | awk '$$1 == "file" { print $$5 }')
FAKE_DEV_START = $(call bytes,$(FAKE_START) + $(TRAIN_BYTES))
ifneq ($(filter fake fakeperm,$(LANGS)),)
$(if $(shell s='$(call corpus_bytes,$(CORPUS_fake))'; [ -n "$$s" ] && [ $(FAKE_DEV_START) -ge "$$s" ] && echo short), \
  $(error $(call FAKE_EMPTY,$(FAKE_DEV_START))))
endif
# $(call fake_slice,START,BYTES): BYTES of CORPUS_fake's non-blank lines from START on, mapped
define fake_slice
@mkdir -p $(@D)
xz -dc $(CORPUS_fake) | $(call slice,$(1),$(2)) | LC_ALL=C awk 'FILENAME != "-" { english[$$0]; next } \
  !($$0 in english)' $(W)/raw/en.dev $(W)/raw/en.train - | $(XLT) -q fake-english --format text -o $@.tmp
@[ -s $@.tmp ] || { echo "$(call FAKE_EMPTY,$(1))" >&2; rm $@.tmp; exit 1; }
mv $@.tmp $@
endef
$(W)/raw/fake.train: $(CORPUS_fake) $(W)/raw/en.dev $(W)/raw/en.train | install
	$(call fake_slice,$(FAKE_START),$(TRAIN_BYTES))
$(W)/raw/fake.dev: $(CORPUS_fake) $(W)/raw/en.dev $(W)/raw/en.train | install
	$(call fake_slice,$(FAKE_DEV_START),$(DEV_BYTES))
# K et al.'s word-order control (LANGS=fakeperm): fake's tokenized text, each sentence's tokens
# permuted (xlt/text/word_order.py). Its own pair, so the two never share a model.
$(W)/text/fakeperm.%: $(W)/text/fake.%
	$(XLT) -q permute-words $< -o $@

$(W)/text/%: $(W)/raw/%
	@mkdir -p $(@D)
	$(XLT) -q tokenize --lang $(call lang_of,$*) --workers $(THREADS) $< -o $@

# ---- BPE codes ----------------------------------------------------------------------------------
# Joint codes over English and the other corpus (Default: en-fr; Wiki-CC: en-cc-fr), and
# per-language codes (Default anchors, No anchors, the Sep rows, monolingual models).
$(W)/bpe/joint/en-%.codes: $(W)/text/en.train $(W)/text/%.train
	@mkdir -p $(@D)
	$(XLT) bpe learn --merges $(BPE_MERGES) -o $@ $^
$(W)/bpe/lang/%.codes: $(W)/text/%.train
	@mkdir -p $(@D)
	$(XLT) bpe learn --merges $(BPE_LANG_MERGES) -o $@ $<

# ---- data directories: $(W)/data/<kind>/en-<L>/ ------------------------------------------------
# $(call segment,DIR,LANG,CODES,TRAIN_TEXT,DEV_TEXT): one language's codes and BPE'd text in DIR.
define segment
cp $(3) $(1)/codes.$(2)
$(XLT) bpe apply --codes $(3) $(4) -o $(1)/$(2).train.bpe
$(XLT) bpe apply --codes $(3) $(5) -o $(1)/$(2).dev.bpe
endef
# $(call binarize,DIR,BPE_DIR,LANGS): token stores DIR/<lang>.<split> with DIR/vocab.
define binarize
for f in $(foreach l,$(3),$(l).train $(l).dev); do \
  $(XLT) -q binarize --vocab $(1)/vocab --lang $${f%%.*} $(2)/$$f.bpe -o $(1)/$$f || exit 1; done
touch $(1)/stores.stamp
endef
# Joint counts of both languages' BPE'd training text, with ownership (Default, Wiki-CC, Extra anchors).
joint_vocab = $(XLT) bpe vocab --lang en --lang $* -o $@ $(@D)/en.train.bpe $(@D)/$*.train.bpe
TEXT = $(W)/text

# Default: one joint BPE over Wikipedia text of both languages.
$(W)/data/joint/en-%/bpe.stamp: $(W)/bpe/joint/en-%.codes $(TEXT)/en.train $(TEXT)/en.dev $(TEXT)/%.train $(TEXT)/%.dev
	@mkdir -p $(@D)
	$(call segment,$(@D),en,$<,$(TEXT)/en.train,$(TEXT)/en.dev)
	$(call segment,$(@D),$*,$<,$(TEXT)/$*.train,$(TEXT)/$*.dev)
	touch $@
$(W)/data/joint/en-%/vocab: $(W)/data/joint/en-%/bpe.stamp
	$(joint_vocab)
$(W)/data/joint/en-%/stores.stamp: $(W)/data/joint/en-%/vocab
	$(call binarize,$(@D),$(@D),en $*)

# Wiki-CC: English Wikipedia + the other language's web/news text, one joint BPE.
$(W)/data/wikicc/en-%/bpe.stamp: $(W)/bpe/joint/en-cc-%.codes $(TEXT)/en.train $(TEXT)/en.dev $(TEXT)/cc-%.train $(TEXT)/cc-%.dev
	@mkdir -p $(@D)
	$(call segment,$(@D),en,$<,$(TEXT)/en.train,$(TEXT)/en.dev)
	$(call segment,$(@D),$*,$<,$(TEXT)/cc-$*.train,$(TEXT)/cc-$*.dev)
	touch $@
$(W)/data/wikicc/en-%/vocab: $(W)/data/wikicc/en-%/bpe.stamp
	$(joint_vocab)
$(W)/data/wikicc/en-%/stores.stamp: $(W)/data/wikicc/en-%/vocab
	$(call binarize,$(@D),$(@D),en $*)

# Default anchors and the Sep rows: BPE per language, then the union of the two vocabularies.
$(W)/data/union/en-%/bpe.stamp: $(W)/bpe/lang/en.codes $(W)/bpe/lang/%.codes $(TEXT)/en.train $(TEXT)/en.dev $(TEXT)/%.train $(TEXT)/%.dev
	@mkdir -p $(@D)
	$(call segment,$(@D),en,$(W)/bpe/lang/en.codes,$(TEXT)/en.train,$(TEXT)/en.dev)
	$(call segment,$(@D),$*,$(W)/bpe/lang/$*.codes,$(TEXT)/$*.train,$(TEXT)/$*.dev)
	touch $@
$(W)/data/union/en-%/vocab: $(W)/data/union/en-%/bpe.stamp
	$(XLT) bpe vocab --lang en -o $(@D)/vocab.en $(@D)/en.train.bpe
	$(XLT) bpe vocab --lang $* -o $(@D)/vocab.$* $(@D)/$*.train.bpe
	$(XLT) bpe union --vocab en $(@D)/vocab.en --vocab $* $(@D)/vocab.$* -o $@
$(W)/data/union/en-%/stores.stamp: $(W)/data/union/en-%/vocab
	$(call binarize,$(@D),$(@D),en $*)

# No anchors: the same per-language BPE'd text, every vocabulary entry prefixed with its language.
$(W)/data/prefixed/en-%/vocab: $(W)/data/union/en-%/vocab
	@mkdir -p $(@D)
	cp $(<D)/codes.en $(<D)/codes.$* $(@D)/
	$(XLT) bpe union --prefix-lang --vocab en $(<D)/vocab.en --vocab $* $(<D)/vocab.$* -o $@
$(W)/data/prefixed/en-%/stores.stamp: $(W)/data/prefixed/en-%/vocab
	$(call binarize,$(@D),$(W)/data/union/en-$*,en $*)

# Extra anchors: Default's joint codes over code-switched training text (MUSE training
# dictionaries, both directions; the paper's 30 % / 15 % settings); dev text stays as it is.
# $(call cs_dict,FROM,TO): the dictionary FROM -> TO (Fake-English's: every word -> its twin)
cs_dict = $(or $(CS_DICT_$(1)-$(2)),$(MUSE)/$(1)-$(2).0-5000.txt)
$(W)/data/codeswitch/en-%/bpe.stamp: $(W)/bpe/joint/en-%.codes $(TEXT)/en.train $(TEXT)/en.dev $(TEXT)/%.train $(TEXT)/%.dev \
                                     $$(call cs_dict,en,$$*) $$(call cs_dict,$$*,en)
	@mkdir -p $(@D)
	$(XLT) codeswitch --dict $(call cs_dict,en,$*) --ignore-case --seed 1 $(TEXT)/en.train \
	  -o $(@D)/en.train.cs --report $(@D)/en.codeswitch.json
	$(XLT) codeswitch --dict $(call cs_dict,$*,en) --ignore-case --seed 1 $(TEXT)/$*.train \
	  -o $(@D)/$*.train.cs --report $(@D)/$*.codeswitch.json
	$(call segment,$(@D),en,$<,$(@D)/en.train.cs,$(TEXT)/en.dev)
	$(call segment,$(@D),$*,$<,$(@D)/$*.train.cs,$(TEXT)/$*.dev)
	touch $@
$(W)/data/codeswitch/en-%/vocab: $(W)/data/codeswitch/en-%/bpe.stamp
	$(joint_vocab)
$(W)/data/codeswitch/en-%/stores.stamp: $(W)/data/codeswitch/en-%/vocab
	$(call binarize,$(@D),$(@D),en $*)

# Fake-English's identity dictionaries, over the English words of the en-fr MUSE training
# dictionary: the en-fr row's anchor words, so the two pairs' Extra anchors differ only in what a
# word is swapped for, and none of the punctuation and numbers a frequency list of the text would
# bring. Each word also capitalized: --ignore-case lowercases only real letters, so without these
# Fake-English's sentence-initial words would never be swapped back into English.
CS_DICT_en-fake := $(W)/dict/en-fake.txt
CS_DICT_fake-en := $(W)/dict/fake-en.txt
FAKE_DICT_WORDS ?= $(MUSE)/en-fr.0-5000.txt
$(W)/dict/en-fake.txt: $(FAKE_DICT_WORDS) | install
	@mkdir -p $(@D)
	cut -f1 $< | awk '{ print; print toupper(substr($$0, 1, 1)) substr($$0, 2) }' | LC_ALL=C sort -u \
	  | $(XLT) -q fake-english --format dictionary -o $@
$(W)/dict/fake-en.txt: $(W)/dict/en-fake.txt
	awk '{ print $$2, $$1 }' $< > $@.tmp && mv $@.tmp $@

# Monolingual models (Figure 7, alignment): one language, its own BPE; the directory is mono/<L>.
$(W)/data/mono/%/stores.stamp: $(W)/bpe/lang/%.codes $(TEXT)/%.train $(TEXT)/%.dev
	@mkdir -p $(@D)
	$(call segment,$(@D),$*,$<,$(TEXT)/$*.train,$(TEXT)/$*.dev)
	$(XLT) bpe vocab --lang $* -o $(@D)/vocab $(@D)/$*.train.bpe
	$(call binarize,$(@D),$(@D),$*)

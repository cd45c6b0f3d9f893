# A Table 1 row's zero-shot against pretraining steps, for a pair whose Table 1 targets are out of reach
# at the scale's steps (issue 28: Fake-English's parsing and XNLI at the demo scale, and whether the
# separated rows' transfer comes back with more pretraining). The row's en-<L> (CURVE_ROW, Default
# unless set) is pretrained again for CURVE_STEPS steps with a weight-only snapshot every CURVE_EVERY
# (the same seed and arguments as Table 1's model: on the same CPU kind its first STEPS_<L> steps are
# that model, bit for bit), every snapshot is fine-tuned as a Table 1 cell, and `xlt report steps`
# lays them out beside Table 1's No pretraining control and trivial baselines. Included by the Makefile.
#
#   $(W)/steps/models/en-<L>/                     Default's run, checkpoints/step-N.pt, finished-<CURVE_STEPS>
#   $(W)/steps/step-<N>/en-<L>/<task>/results.json  `xlt finetune --checkpoint step-<N>`
#   $(W)/report/steps-<L>.{md,csv,tex,json,png}   the table, the first step meeting each target, the curves
#   $(W)/steps-<row>/..., $(W)/report/steps-<L>-<row>.*   the same for another row (CURVE_ROW=<row>)

CURVE_LANG  ?= fake
CURVE_STEPS ?= 30000
CURVE_EVERY ?= 5000
# One fine-tuning seed per snapshot: the curve's shape, not a verdict (Table 1's cells carry the spread).
CURVE_SEEDS ?= $(FT_SEEDS)
CURVE_AT     = $(shell seq $(CURVE_EVERY) $(CURVE_EVERY) $(CURVE_STEPS))
CURVE_ROW   ?= default
ifeq ($(ROW_$(CURVE_ROW)),)
$(error CURVE_ROW=$(CURVE_ROW): not a Table 1 row (one of: $(TABLE1_ROWS)))
endif
ifneq ($(call cell_gap,$(CURVE_ROW),$(CURVE_LANG)),)
$(error CURVE_ROW=$(CURVE_ROW) on en-$(CURVE_LANG): $(call cell_gap,$(CURVE_ROW),$(CURVE_LANG)))
endif
# Default's curve keeps the folders it always had; another row's are named after it.
row_suffix   = $(if $(filter-out default,$(1)),-$(1))
curve_dir    = $(W)/steps$(call row_suffix,$(1))
CURVE_NAME  := $(CURVE_LANG)$(call row_suffix,$(CURVE_ROW))
SD          := $(call curve_dir,$(CURVE_ROW))

# The stem is en-<L>[-seed<k>], as Table 1's models (row_data, PRETRAIN_ARGS: make/table1.mk); the later
# --max-steps wins over PRETRAIN_ARGS's. One marker per length: a larger CURVE_STEPS resumes the run
# from its last checkpoint, and since the schedule does not depend on the last step, the run is then
# the longer one's (issue 28's curve went from 30,000 to 80,000 steps so).
$(SD)/models/%/finished-$(CURVE_STEPS): $$(call row_data,$(CURVE_ROW)/$$*)/stores.stamp
	$(PRETRAIN) --run-dir $(@D) --vocab $(<D)/vocab \
	  $(foreach l,en $(call target_of,$*),--codes $(l) $(<D)/codes.$(l) \
	    --train $(l) $(<D)/$(l).train --dev $(l) $(<D)/$(l).dev) \
	  $(call row_options,$(CURVE_ROW)) --seed $(call seed_of,$*) $(PRETRAIN_ARGS) --max-steps $(CURVE_STEPS) --snapshot-every $(CURVE_EVERY)
	touch $@

# A snapshot is there once the run is at CURVE_STEPS. The check leaves the file's time alone, so a cell
# is fine-tuned again only when its snapshot is newer, not each time the run goes on past it.
# CURVE_PRETRAIN_SEEDS: the row's pretraining seeds (Table 1's en-<L>-seed<k> names); the report reads
# each snapshot's cell as the mean over them, as Table 1's.
CURVE_PRETRAIN_SEEDS ?= 0
CURVE_PAIRS := $(foreach s,$(CURVE_PRETRAIN_SEEDS),$(call pair_dir,$(CURVE_LANG),$(s)))
$(foreach n,$(CURVE_AT),$(foreach p,$(CURVE_PAIRS),$(SD)/models/$(p)/checkpoints/step-$(n).pt)): $$(dir $$(@D))finished-$(CURVE_STEPS)
	@test -f $@ || { echo "$@: no snapshot at this step (the run saved every CURVE_EVERY it had then)" >&2; exit 2; }
snapshot_of = $(SD)/models/$(notdir $(1))/checkpoints/step-$(patsubst %/,%,$(dir $(1))).pt

# The stem is <N>/en-<L>[-seed<k>]: snapshot step-<N> of the run above, fine-tuned as Table 1's cells are.
define steps_finetune
$(XLT) finetune $(1) --model $(SD)/models/$(notdir $*) --checkpoint step-$(patsubst %/,%,$(dir $*)) -o $(@D) \
  --data-dir $(T) --seeds $(CURVE_SEEDS) --train en $(word 1,$(2)) --dev en $(word 2,$(2)) \
  --eval $(call target_of,$*) $(wordlist 4,5,$(2)) $(3)
endef
$(SD)/step-%/xnli/results.json: $$(call snapshot_of,$$*) $$(call xnli_files,$$(call target_of,$$*)) $$(call train_of,xnli)
	$(call steps_finetune,xnli,$(call xnli_files,$(call target_of,$*)),$(ARGS_xnli))
$(SD)/step-%/ner/results.json: $$(call snapshot_of,$$*) $$(call ner_files,$$(call target_of,$$*))
	$(call steps_finetune,ner,$(call ner_files,$(call target_of,$*)),$(ARGS_ner))
$(SD)/step-%/parse/results.json: $$(call snapshot_of,$$*) $$(call parse_files,$$(call target_of,$$*)) $$(call treebank_of,parse)
	$(call steps_finetune,parse,$(call parse_files,$(call target_of,$*)),$(ARGS_parse))

# A later pretraining seed's snapshots are fine-tuned on PRETRAIN_SEED_TASKS only, as Table 1's models.
curve_tasks = $(if $(filter-out 0,$(call seed_of,$(1))),$(filter $(PRETRAIN_SEED_TASKS),$(TASKS)),$(TASKS))
CURVE_CELLS := $(foreach n,$(CURVE_AT),$(foreach p,$(CURVE_PAIRS),$(foreach t,$(call curve_tasks,$(p)),$(SD)/step-$(n)/$(p)/$(t)/results.json)))
CURVE_REFERENCES := $(foreach t,$(TASKS),$(W)/table1/control/en-$(CURVE_LANG)/$(t)/results.json \
  $(W)/table1/baselines/en-$(CURVE_LANG)/$(t).json)

# The snapshots' and the pretraining seeds' lists are a setting (Makefile): a curve made longer, or with
# another seed, is a report to make again, with its new cells.
$(W)/report/steps-$(CURVE_NAME).md: $(CURVE_CELLS) $(CURVE_REFERENCES) $$(call setting,curve-$(CURVE_NAME),$(CURVE_AT) $(CURVE_PAIRS))
	$(XLT) report steps --results-dir $(SD) --table1-dir $(W)/table1 --lang $(CURVE_LANG) --row $(CURVE_ROW) -o $(@D) > /dev/null

.PHONY: reproduce-steps
reproduce-steps: $(W)/report/steps-$(CURVE_NAME).md
	@cat $<
	@echo "$(CURVE_ROW) en-$(CURVE_LANG) against pretraining steps at SCALE=$(SCALE): $(W)/report/steps-$(CURVE_NAME).{md,csv,tex,json,png}"

# ---- Table 1 at one snapshot -----------------------------------------------------------------------
# Whether Table 1's findings change with more pretraining (issue 28: the separated rows' transfer, and
# "more separation hurts more", undecided at the demo's steps): the rows whose curves were made (one
# `make reproduce-steps CURVE_ROW=<row>` each, with the snapshot in its CURVE_AT), read at snapshot
# STEPS_AT in Table 1's layout (links into their curves' folders, and to Table 1's No pretraining
# control, trivial baselines and not-applicable rows), and `xlt report table1` on them. A row of
# STEPS_ROWS without cells at STEPS_AT stops it; rows left out of STEPS_ROWS are gaps. The learned-English
# check reads each run's end, so STEPS_AT must be the runs' last step (checked).
STEPS_AT   ?= $(CURVE_STEPS)
STEPS_ROWS ?= default sep-l1-3 sep-l1-6
AT_DIR     := $(W)/steps-table1/step-$(STEPS_AT)
AT_GAPS    := $(foreach r,$(TABLE1_ROWS),$(if $(call cell_gap,$(r),$(CURVE_LANG)),$(r)))
# $(call link_pairs,DIR,ROW): link DIR's en-<L> and en-<L>-seed<k> folders into ROW's folder at AT_DIR
link_pairs = mkdir -p $(AT_DIR)/$(2) && for pair in $(1)/en-$(CURVE_LANG) $(1)/en-$(CURVE_LANG)-seed*; do \
  if [ -d "$$pair" ]; then ln -s "$$(realpath $$pair)" $(AT_DIR)/$(2)/; fi; done
.PHONY: reproduce-table1-at-steps
reproduce-table1-at-steps: $(CURVE_REFERENCES) $(foreach r,$(AT_GAPS),$(W)/table1/$(r)/en-$(CURVE_LANG)/missing.json)
	rm -rf $(AT_DIR)
	@for marker in $(foreach r,$(STEPS_ROWS),$(call curve_dir,$(r))/models/*/finished-*); do \
	  [ ! -e "$$marker" ] || [ "$${marker##*-}" -le $(STEPS_AT) ] || { echo "$$marker: that run went on past \
	STEPS_AT=$(STEPS_AT), and the learned-English check reads a run's end: give its last step" >&2; exit 2; }; done
	$(foreach r,$(STEPS_ROWS),$(call link_pairs,$(call curve_dir,$(r))/step-$(STEPS_AT),$(r)) && \
	  { ls $(AT_DIR)/$(r)/* > /dev/null 2>&1 || { echo "$(call curve_dir,$(r))/step-$(STEPS_AT): no cells of $(r) at this step (make reproduce-steps CURVE_ROW=$(r) with $(STEPS_AT) in CURVE_AT)" >&2; exit 2; }; } ;)
	$(foreach r,control baselines $(AT_GAPS),$(call link_pairs,$(W)/table1/$(r),$(r)) ;)
	$(XLT) report table1 --results-dir $(AT_DIR) --langs $(CURVE_LANG) -o $(W)/report/steps-table1-$(STEPS_AT) > /dev/null
	@cat $(W)/report/steps-table1-$(STEPS_AT)/table1.md

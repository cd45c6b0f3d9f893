# Default's zero-shot against pretraining steps, for a pair whose Table 1 targets are out of reach at
# the scale's steps (issue 28: Fake-English's parsing and XNLI at the demo scale). Default en-<L> is
# pretrained again for CURVE_STEPS steps with a weight-only snapshot every CURVE_EVERY (the same seed
# and arguments as Table 1's Default: on the same CPU kind its first STEPS_<L> steps are that model,
# bit for bit), every snapshot is fine-tuned as a Table 1 cell, and `xlt report steps` lays them out
# beside Table 1's No pretraining control and trivial baselines. Included by the Makefile.
#
#   $(W)/steps/models/en-<L>/                     the run, checkpoints/step-N.pt, finished-<CURVE_STEPS>
#   $(W)/steps/step-<N>/en-<L>/<task>/results.json  `xlt finetune --checkpoint step-<N>`
#   $(W)/report/steps-<L>.{md,csv,tex,json,png}   the table, the first step meeting each target, the curves

CURVE_LANG  ?= fake
CURVE_STEPS ?= 30000
CURVE_EVERY ?= 5000
# One fine-tuning seed per snapshot: the curve's shape, not a verdict (Table 1's cells carry the spread).
CURVE_SEEDS ?= $(FT_SEEDS)
CURVE_AT     = $(shell seq $(CURVE_EVERY) $(CURVE_EVERY) $(CURVE_STEPS))
SD          := $(W)/steps

# The stem is en-<L>, as Table 1's Default (row_data, PRETRAIN_ARGS: make/table1.mk); the later
# --max-steps wins over PRETRAIN_ARGS's. One marker per length: a larger CURVE_STEPS resumes the run
# from its last checkpoint, and since the schedule does not depend on the last step, the run is then
# the longer one's (issue 28's curve went from 30,000 to 80,000 steps so).
$(SD)/models/%/finished-$(CURVE_STEPS): $$(call row_data,default/$$*)/stores.stamp
	$(PRETRAIN) --run-dir $(@D) --vocab $(<D)/vocab \
	  $(foreach l,en $(call target_of,$*),--codes $(l) $(<D)/codes.$(l) \
	    --train $(l) $(<D)/$(l).train --dev $(l) $(<D)/$(l).dev) \
	  --sharing default --seed 0 $(PRETRAIN_ARGS) --max-steps $(CURVE_STEPS) --snapshot-every $(CURVE_EVERY)
	touch $@

# A snapshot is there once the run is at CURVE_STEPS. The check leaves the file's time alone, so a cell
# is fine-tuned again only when its snapshot is newer, not each time the run goes on past it.
CURVE_RUN := $(SD)/models/en-$(CURVE_LANG)
$(foreach n,$(CURVE_AT),$(CURVE_RUN)/checkpoints/step-$(n).pt): $(CURVE_RUN)/finished-$(CURVE_STEPS)
	@test -f $@ || { echo "$@: no snapshot at this step (the run saved every CURVE_EVERY it had then)" >&2; exit 2; }
snapshot_of = $(SD)/models/$(notdir $(1))/checkpoints/step-$(patsubst %/,%,$(dir $(1))).pt

# The stem is <N>/en-<L>: snapshot step-<N> of the run above, fine-tuned as Table 1's cells are.
define steps_finetune
$(XLT) finetune $(1) --model $(SD)/models/$(notdir $*) --checkpoint step-$(patsubst %/,%,$(dir $*)) -o $(@D) \
  --data-dir $(T) --seeds $(CURVE_SEEDS) --train en $(word 1,$(2)) --dev en $(word 2,$(2)) \
  --eval $(call target_of,$*) $(wordlist 4,5,$(2)) $(3)
endef
$(SD)/step-%/xnli/results.json: $$(call snapshot_of,$$*) $$(call xnli_files,$$(call target_of,$$*)) $$(call train_of,xnli)
	$(call steps_finetune,xnli,$(call xnli_files,$(call target_of,$*)),$(ARGS_xnli))
$(SD)/step-%/ner/results.json: $$(call snapshot_of,$$*) $$(call ner_files,$$(call target_of,$$*))
	$(call steps_finetune,ner,$(call ner_files,$(call target_of,$*)),$(ARGS_ner))
$(SD)/step-%/parse/results.json: $$(call snapshot_of,$$*) $$(call parse_files,$$(call target_of,$$*))
	$(call steps_finetune,parse,$(call parse_files,$(call target_of,$*)),$(ARGS_parse))

CURVE_CELLS := $(foreach n,$(CURVE_AT),$(foreach t,$(TASKS),$(SD)/step-$(n)/en-$(CURVE_LANG)/$(t)/results.json))
CURVE_REFERENCES := $(foreach t,$(TASKS),$(W)/table1/control/en-$(CURVE_LANG)/$(t)/results.json \
  $(W)/table1/baselines/en-$(CURVE_LANG)/$(t).json)

# The snapshots' list is a setting (Makefile): a curve made longer is a report to make again, with its new cells.
$(W)/report/steps-$(CURVE_LANG).md: $(CURVE_CELLS) $(CURVE_REFERENCES) $$(call setting,curve-$(CURVE_LANG),$(CURVE_AT))
	$(XLT) report steps --results-dir $(SD) --table1-dir $(W)/table1 --lang $(CURVE_LANG) -o $(@D) > /dev/null

.PHONY: reproduce-steps
reproduce-steps: $(W)/report/steps-$(CURVE_LANG).md
	@cat $<
	@echo "Default en-$(CURVE_LANG) against pretraining steps at SCALE=$(SCALE): $(W)/report/steps-$(CURVE_LANG).{md,csv,tex,json,png}"

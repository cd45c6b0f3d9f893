"""``xlt pretrain`` (argv as given) where only rank 1's training loss turns NaN, at its 4th step.

Run under torchrun by tests/test_distributed.py: every rank must stop with the error line, none
may be left waiting for rank 1 in the gradient all-reduce.
"""

import os

from xlt.cli import main
from xlt.model.heads import MaskedLM

real_forward = MaskedLM.forward
training_calls = 0


def poisoned_forward(self, *args, **kwargs):
    global training_calls
    loss = real_forward(self, *args, **kwargs)
    if self.training:
        training_calls += 1
        if os.environ.get("RANK") == "1" and training_calls >= 4:
            return loss * float("nan")
    return loss


MaskedLM.forward = poisoned_forward
main()

"""``xlt pretrain`` (argv as given) where rank r's training loss is the constant r + 1.

Run under torchrun by tests/test_distributed.py: the logged loss is the step's over every rank (1.5
for two), not rank 0's part of the batch (1.0).
"""

import os

from xlt.cli import main
from xlt.model.heads import MaskedLM

real_forward = MaskedLM.forward


def constant_forward(self, *args, **kwargs):
    loss = real_forward(self, *args, **kwargs)
    if self.training:   # no gradient (0 x loss): only the value changes
        return loss * 0.0 + float(os.environ.get("RANK", "0")) + 1.0
    return loss


MaskedLM.forward = constant_forward
main()

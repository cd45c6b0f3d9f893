"""One training step of a tiny MaskedLM over three one-language batches, run as one process or under
torchrun (gloo).

Each of the W ranks takes its share of each fixed global batch; the step's weights are written by
rank 0, so the test can compare W processes against one process on the combined batch.
Usage: ddp_worker.py OUT.pt [--shard]   (with --shard, rank r takes rows r::W)
"""

import sys

import torch
from torch.nn.parallel import DistributedDataParallel

from xlt.model.config import EncoderConfig, SharingSpec
from xlt.model.heads import MaskedLM
from xlt.pretrain import distributed


def main() -> None:
    out, shard = sys.argv[1], "--shard" in sys.argv
    d = distributed.setup()
    try:
        train_one_step(out, shard, d.rank, d.world_size)
        distributed.barrier(d)  # rank 0 has written; only then may the group go away under it
    finally:
        distributed.teardown(d)


def train_one_step(out: str, shard: bool, rank: int, world: int) -> None:
    torch.manual_seed(0)
    config = EncoderConfig.preset("tiny", vocab_size=40, languages=["en", "fr"],
                                  sharing=SharingSpec.preset("sep-emb"))
    config = EncoderConfig.from_dict({**config.to_dict(), "dropout": 0.0, "attention_dropout": 0.0})
    model = MaskedLM(config)
    gen = torch.Generator().manual_seed(1)
    net = DistributedDataParallel(model, find_unused_parameters=True) if world > 1 else model
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    # A --langs-per-step 3 step: each backward leaves the other language's Sep Emb table unused, and
    # English's gradient from the first batch must survive the French backward in between.
    langs = ("en", "fr", "en")
    for lang in langs:
        ids = torch.randint(5, 40, (8, 12), generator=gen)
        predict = torch.zeros(8, 12, dtype=torch.bool)
        predict[:, ::4] = True  # the same number of targets in every row, so per-rank means average exactly
        if shard:
            ids, predict = ids[rank::world], predict[rank::world]
        (net(ids, lang, None, predict, ids[predict]) / len(langs)).backward()
    opt.step()
    if rank == 0:
        torch.save(model.state_dict(), out)


if __name__ == "__main__":
    main()

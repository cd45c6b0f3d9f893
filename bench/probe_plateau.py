"""Where a small masked LM spends its first million tokens: dev perplexity against a unigram model.

The diagnosis behind docs/reproduce.md ("Why the demo learns nothing"). It trains xlt's own
``MaskedLM`` on a data directory of the pipeline (``vocab`` and ``<lang>.{train,dev}`` token
stores, e.g. ``work/demo/data/joint/en-fr``) with xlt's streams and masking, and prints, every
``--tokens / --evals`` tokens, the dev perplexity of the masked tokens (every one replaced by
``<mask>``, as xlt's evaluator does) beside that of a unigram model of the training text (add-0.5)
on the very same targets. Two probes tell a model that cannot use context from one that has not
yet learned where its context is:

* ``--probe shuffled``: after training, the dev perplexity again with every unmasked token of
  each window shuffled across the batch (a bag of words) and with every token masked (no context).
* ``--attend neighbours``: attention restricted to positions i-1 and i+1 (a band mask, a probe
  only: xlt's encoder has no such option). If this model leaves the unigram level within a few
  hundred thousand tokens while the ordinary one does not, the network, masking and data are
  sound and the ordinary model is stuck learning *where* to attend.
* ``--neighbour-mlp``: no Transformer at all, tanh(E_left + E_right) -> softmax, the floor any
  contextual model should reach.

Example (one thread, about four minutes per million tokens for the 8 x 64 model):
    .venv/bin/python bench/probe_plateau.py --data work/demo/data/joint/en-fr --tokens 2e6
    .venv/bin/python bench/probe_plateau.py --data work/demo/data/joint/en-fr --preset tiny \\
        --layers 1 --attend neighbours --tokens 8e5
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from xlt.data.masking import MaskingConfig, MaskTransform
from xlt.data.store import TokenStore
from xlt.data.streams import LanguageStream, iterate_eval
from xlt.model import encoder as encoder_module
from xlt.model.config import EncoderConfig
from xlt.model.heads import MaskedLM
from xlt.text.vocab import MASK_ID, SPECIALS, Vocabulary


def neighbour_band(T: int) -> torch.Tensor:
    i = torch.arange(T)
    return ((i[:, None] - i[None, :]).abs() == 1)[None, None]


class NeighbourMLP(torch.nn.Module):
    """logits = W tanh(E_l[x_{i-1}] + E_r[x_{i+1}]) + b: the left and right neighbours, nothing else."""

    def __init__(self, V: int, D: int):
        super().__init__()
        self.left, self.right, self.out = torch.nn.Embedding(V, D), torch.nn.Embedding(V, D), torch.nn.Linear(D, V)

    def forward(self, ids, lang, padding_mask, positions, targets, reduction="mean"):
        r, c = positions[:, 0], positions[:, 1]
        left, right = ids[r, (c - 1).clamp(min=0)], ids[r, (c + 1).clamp(max=ids.shape[1] - 1)]
        return F.cross_entropy(self.out(torch.tanh(self.left(left) + self.right(right))), targets, reduction=reduction)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="a pipeline data directory (vocab, <lang>.train, <lang>.dev)")
    p.add_argument("--langs", default="en,fr")
    p.add_argument("--preset", default="mini")
    p.add_argument("--layers", type=int, help="override the preset's number of layers")
    p.add_argument("--width", type=int, help="override d_model (d_ffn = 4 x width, heads = width / 32)")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=2e-3, help="Adam, linear warm-up then constant")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--stream-len", type=int, default=64)
    p.add_argument("--short-len", type=int, help="a curriculum: windows of this length first ...")
    p.add_argument("--short-fraction", type=float, default=0.5, help="... for this fraction of the tokens")
    p.add_argument("--device", default="cpu")
    p.add_argument("--tokens", type=float, default=2e6, help="training tokens in all")
    p.add_argument("--evals", type=int, default=6)
    p.add_argument("--attend", choices=("all", "neighbours"), default="all")
    p.add_argument("--neighbour-mlp", action="store_true")
    p.add_argument("--probe", choices=("none", "shuffled"), default="shuffled")
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    langs = a.langs.split(",")
    vocab = Vocabulary.load(f"{a.data}/vocab")
    V = len(vocab)
    if a.neighbour_mlp:
        model = NeighbourMLP(V, 64)
    else:
        overrides = {"dropout": a.dropout, "attention_dropout": a.dropout}
        if a.layers:
            overrides["n_layers"] = a.layers
        if a.width:
            overrides.update(d_model=a.width, d_ffn=4 * a.width, n_heads=max(1, a.width // 32))
        model = MaskedLM(EncoderConfig.preset(a.preset, vocab_size=V, languages=langs, **overrides))
    if a.attend == "neighbours":  # a probe, not a model option: every attention call sees the band
        sdpa = F.scaled_dot_product_attention
        encoder_module.F = type("BandF", (), {"scaled_dot_product_attention": staticmethod(
            lambda q, k, v, attn_mask=None, dropout_p=0.0: sdpa(q, k, v, attn_mask=neighbour_band(q.shape[2]),
                                                                 dropout_p=dropout_p))})
    train = {lang: TokenStore.open(f"{a.data}/{lang}.train") for lang in langs}
    dev = {lang: TokenStore.open(f"{a.data}/{lang}.dev") for lang in langs}
    log_unigram = {}
    for lang in langs:
        counts = np.bincount(np.asarray(train[lang].tokens), minlength=V).astype(np.float64) + 0.5
        counts[:len(SPECIALS)] = 0
        log_unigram[lang] = np.log(counts / counts.sum() + 1e-300)
    model.to(a.device)
    mask = MaskTransform(MaskingConfig(random_within_language=False), MASK_ID, range(len(SPECIALS)), V)

    def dev_perplexity(lang: str, context: str = "kept") -> tuple[float, float]:
        model.eval()
        generator, total, unigram, n = torch.Generator().manual_seed(1), 0.0, 0.0, 0
        for index, batch in enumerate(iterate_eval(dev[lang], stream_len=a.stream_len, batch_size=64)):
            if index >= 10:
                break
            m = mask(batch, lang, generator, eval_mode=True)
            ids = m.input_ids
            if context == "shuffled":
                ids = ids.view(-1)[torch.randperm(ids.numel(), generator=generator)].view(ids.shape).clone()
                ids[m.target_positions[:, 0], m.target_positions[:, 1]] = MASK_ID
            elif context == "none":
                ids = torch.full_like(ids, MASK_ID)
            with torch.no_grad():
                total += model(ids.to(a.device), lang, None, m.target_positions.to(a.device),
                               m.target_ids.to(a.device), reduction="sum").item()
            unigram -= log_unigram[lang][m.target_ids.numpy()].sum()
            n += len(m.target_ids)
        model.train()
        return math.exp(total / n), math.exp(unigram / n)

    def streams_of(length: int) -> dict:
        # the same number of tokens per batch whatever the window length
        batch = a.batch * a.stream_len // length
        return {lang: iter(LanguageStream(train[lang], stream_len=length, batch_size=batch, seed=i))
                for i, lang in enumerate(langs)}

    streams = streams_of(a.short_len or a.stream_len)
    optimizer = torch.optim.Adam(model.parameters(), lr=a.lr)
    steps = int(a.tokens / (a.batch * a.stream_len))
    short_steps = int(steps * a.short_fraction) if a.short_len else 0
    rng, generator, start = np.random.default_rng(0), torch.Generator().manual_seed(0), time.time()
    for step in range(steps):
        lang = langs[rng.integers(len(langs))]
        for group in optimizer.param_groups:
            group["lr"] = a.lr * min(1.0, (step + 1) / max(1, a.warmup))
        if short_steps and step == short_steps:
            streams = streams_of(a.stream_len)
        m = mask(next(streams[lang]), lang, generator)
        loss = model(m.input_ids.to(a.device), lang, None, m.target_positions.to(a.device),
                     m.target_ids.to(a.device))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        if (step + 1) % max(1, steps // a.evals) == 0 or step == steps - 1:
            seen = (step + 1) * a.batch * a.stream_len
            row = {"step": step + 1, "Mtokens": round(seen / 1e6, 2), "tokens_s": round(seen / (time.time() - start))}
            for lang in langs:
                ppl, uni = dev_perplexity(lang)
                row[lang] = {"dev_ppl": round(ppl), "unigram_ppl": round(uni)}
            print(json.dumps(row), flush=True)
    if a.probe == "shuffled":
        print(json.dumps({lang: {context: round(dev_perplexity(lang, context)[0])
                                 for context in ("kept", "shuffled", "none")} for lang in langs}))


if __name__ == "__main__":
    main()

"""One MLM training step of xlt's MaskedLM vs Hugging Face ``BertForMaskedLM`` of the same size.

Same sizes (a preset of xlt; BERT gets the same layers, width, heads, FFN, vocabulary, positions,
GELU, dropout and its own tied MLM head), same batch and sequence length, same Adam, same masked
positions; steps interleaved (xlt, BERT, xlt, ...) so that load from other processes hits both
alike. Prints the median step times, their ratio, tokens/s, MFU and peak memory.

Where the difference comes from: BERT's head projects every position onto the vocabulary
([B,T,V] logits, then cross-entropy with ignore_index); xlt gathers the ~15 % predicted positions
first and projects only those.

transformers is a bench-only extra (``pip install transformers``; it does not need a different
torch). Without it the script says so and exits 0. A throwaway install that leaves the venv alone:
    .venv/bin/pip install --target /tmp/xlt-bench-hf --no-deps transformers huggingface_hub tokenizers ...
    PYTHONPATH=/tmp/xlt-bench-hf .venv/bin/python bench/bench_vs_transformers.py

Example:
    .venv/bin/python bench/bench_vs_transformers.py                   # small preset, 8 x 256, fp32, CPU
    .venv/bin/python bench/bench_vs_transformers.py --dtype bf16 --vocab-size 80000
    python bench/bench_vs_transformers.py --preset wu2020 --batch 96  # GPU box: cuda + bf16 by default
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_model_flops import (MLMBatch, add_step_arguments, autocast, machine_note,  # noqa: E402
                               matmul_peak_tflops, mlm_batch, pick_device, synchronize, xlt_train_step)
from xlt.model import EncoderConfig, MaskedLM  # noqa: E402


def bert_train_step(config: EncoderConfig, batch: MLMBatch, device: torch.device, dtype: str):
    from transformers import BertConfig, BertForMaskedLM

    bert = BertForMaskedLM(BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.d_model, num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads, intermediate_size=config.d_ffn, hidden_act="gelu",
        hidden_dropout_prob=config.dropout, attention_probs_dropout_prob=config.attention_dropout,
        max_position_embeddings=config.max_positions, tie_word_embeddings=True)).to(device).train()
    labels = torch.full_like(batch.ids, -100)  # BERT's convention: -100 = not predicted
    labels[batch.chosen] = batch.targets
    optimizer = torch.optim.Adam(bert.parameters(), lr=1e-4, fused=device.type == "cuda")  # as xlt's

    def step() -> None:
        with autocast(device, dtype):
            loss = bert(input_ids=batch.ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step, bert


def interleaved_medians(steps: dict, device: torch.device, n: int, warmup: int) -> dict[str, float]:
    for _ in range(warmup):
        for step in steps.values():
            step()
    times = {name: [] for name in steps}
    for _ in range(n):
        for name, step in steps.items():
            synchronize(device)
            start = time.perf_counter()
            step()
            synchronize(device)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def step_memory_note(run_steps, device: torch.device) -> str:
    """GPU memory a step needs above what is resident (both models' weights and Adam states):
    activations, logits and gradients. CUDA only: a process-wide RSS cannot tell two models apart."""
    if device.type != "cuda":
        return ""
    synchronize(device)
    resident = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    run_steps()
    return f", step peak {(torch.cuda.max_memory_allocated(device) - resident) / 2 ** 30:.2f} GiB above resident"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small")
    add_step_arguments(parser)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default=None,
                        help="fp32 or bf16 autocast for both models (default: bf16 on cuda, fp32 on cpu)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        import transformers
    except ImportError:
        print("transformers is not installed, so there is nothing to compare against; install it "
              "(pip install transformers, a bench-only extra) and run again.")
        return
    device = pick_device(args.device)
    dtype = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    config = EncoderConfig.preset(args.preset, vocab_size=args.vocab_size, languages=["en", "fr"],
                                  lang_embeddings=False)  # BERT has none (its token-type table is 2 x D)
    torch.manual_seed(0)
    batch = mlm_batch(args.batch, args.seq_len, args.vocab_size, device)

    xlt_model = MaskedLM(config).to(device).train()
    # Both with the optimizer the pretraining loop uses on the device (fused Adam on CUDA).
    steps = {"xlt": xlt_train_step(xlt_model, batch, "en", device, dtype, fused=device.type == "cuda")}
    bert_step, bert = bert_train_step(config, batch, device, dtype)
    steps["transformers"] = bert_step
    medians = interleaved_medians(steps, device, args.steps, args.warmup)

    tokens = args.batch * args.seq_len
    flops = xlt_model.flops_per_token(args.seq_len)  # useful work: the same for both models
    peak = matmul_peak_tflops(device, dtype)
    print(f"== one training step, {args.preset} preset (vocabulary {args.vocab_size:,}, batch {args.batch} x "
          f"{args.seq_len}, Adam, {dtype}); {machine_note(device)}; transformers {transformers.__version__}, "
          f"BERT attention '{bert.config._attn_implementation}'")
    print(f"parameters: xlt {xlt_model.count_parameters() / 1e6:.2f} M, "
          f"transformers {sum(p.numel() for p in bert.parameters()) / 1e6:.2f} M")
    for name, seconds in medians.items():
        mfu = 100 * flops * tokens / seconds / (peak * 1e12)
        memory = step_memory_note(lambda: [steps[name]() for _ in range(2)], device)
        print(f"{name:13s} median {seconds * 1e3:8.1f} ms  {tokens / seconds:10,.0f} tokens/s  "
              f"MFU {mfu:5.1f} % of {peak * 1e3:,.0f} GFLOP/s{memory}")
    print(f"ratio xlt / transformers = {medians['xlt'] / medians['transformers']:.2f} "
          f"(median of {args.steps} interleaved steps each)")


if __name__ == "__main__":
    main()

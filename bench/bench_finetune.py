"""Fine-tuning throughput per task (sentences/s, training and evaluation) and padding waste.

Runs the real runner pieces -- :class:`xlt.finetune.trainer.RunTrainer` for one training epoch and
its evaluation path -- on the first N English examples of each task's data (the ``data/`` layout),
with a randomly initialised encoder of a size preset. Each task is measured twice:

* training with and without length bucketing (batches drawn from chunks sorted by length);
* evaluation in file order and in the runner's order (longest first).

"padding" is the share of input positions that are padding. Tokenization is memoised by the tasks,
so it is timed separately (the "encode" column: the first pass over the examples) and the training
and evaluation figures are for the model alone. The vocabulary is the data's whitespace words
padded with filler entries to --vocab-size, so the embedding table (which Adam updates whole every
step) has a realistic size; which words hit it does not change the speed.

Example:
    .venv/bin/python bench/bench_finetune.py                               # CPU, small preset
    .venv/bin/python bench/bench_finetune.py --tasks xnli --examples 256 --threads 2
    .venv/bin/python bench/bench_finetune.py --tasks parse --preset mini --threads 1 \
        --task-option arc_dim 128 --task-option label_dim 64       # the demo scale's parser
    python bench/bench_finetune.py --preset wu2020 --device cuda --examples 4096   # a GPU box
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xlt.cli.finetune import _task_value as task_value  # noqa: E402  (--task-option read as xlt finetune reads it)
from xlt.finetune.config import RunSettings, default_path  # noqa: E402
from xlt.finetune.ordering import evaluation_order, example_sizes, ordered_batches, padding_fraction  # noqa: E402
from xlt.finetune.registry import TASKS, get_task  # noqa: E402
from xlt.finetune.runner import autocast_dtype  # noqa: E402
from xlt.finetune.trainer import RunTrainer, SourceData  # noqa: E402
from xlt.model.config import EncoderConfig  # noqa: E402
from xlt.model.heads import MaskedLM  # noqa: E402
from xlt.model.xlt_run import PretrainedRun  # noqa: E402
from xlt.text.pipeline import TextPipeline  # noqa: E402
from xlt.text.tokenize import Tokenizer  # noqa: E402
from xlt.text.vocab import Vocabulary  # noqa: E402
from xlt.utils.textio import read_lines  # noqa: E402

BATCH_SIZE = {"xnli": 8, "ner": 32, "parse": 32}


def whitespace_vocabulary(path: str, lines: int, size: int) -> Vocabulary:
    counts: Counter = Counter()
    for i, line in enumerate(read_lines(path)):
        if i >= lines:
            break
        counts.update(w.split(":", 1)[-1] for w in line.split())  # WikiANN writes "en:word"
    for i in range(max(0, size - len(counts))):
        counts[f"<filler{i}>"] = 0
    return Vocabulary.from_counts(dict(counts), ["en"])


def measure(task_name: str, args: argparse.Namespace, root: str) -> dict:
    task = get_task(task_name, **{key: task_value(value) for key, value in args.task_option})
    max_len = args.max_len or TASKS[task_name].recipe.max_len
    train_path = default_path(task_name, args.data_dir, "en", "train")
    train = task.read(train_path)[:args.examples]
    dev = task.read(default_path(task_name, args.data_dir, "en", "dev"))[:args.examples]
    vocab = whitespace_vocabulary(train_path, 50 * args.examples, args.vocab_size)
    text = TextPipeline("en", vocab, Tokenizer("en"), None)
    config = EncoderConfig.preset(args.preset, vocab_size=len(vocab) + 5, languages=["en"])
    torch.manual_seed(0)
    pretrained = PretrainedRun("(random init)", MaskedLM(config).to(args.device), config, vocab, {}, 0)
    labels = task.labels(train)
    t0 = time.perf_counter()
    sizes = example_sizes(task, train, text, labels, max_len)
    lengths = sizes.lengths
    dev_lengths = example_sizes(task, dev, text, labels, max_len).lengths
    encode_rate = (len(train) + len(dev)) / (time.perf_counter() - t0)
    bs = args.batch_size or BATCH_SIZE[task_name]
    out = {"task": task_name, "examples": len(train), "batch_size": bs, "max_len": max_len,
           "mean_len": sum(lengths) / len(lengths), "encode_per_s": encode_rate}
    dev_sorted = evaluation_order(dev_lengths)
    dev_batches = [ob.batch for ob in ordered_batches(task, dev, dev_sorted, text, labels, args.eval_batch_size, max_len)]
    # The epoch's own dev evaluation is kept out of the training figure: one dev example.
    one_dev = [ob.batch for ob in ordered_batches(task, dev[:1], [0], text, labels, 1, max_len)]
    autocast = autocast_dtype(args.precision, torch.device(args.device))  # as xlt finetune decides it
    out["precision"] = "bf16" if autocast else "fp32"
    trainer = None
    for bucket in (False, True):
        settings = RunSettings(batch_size=bs, encoder_lr=2e-5, head_lr=2e-5, seed=0, epochs=1, epoch_size=None,
                               schedule="constant", warmup_fraction=0.1, max_len=max_len, dropout=None,
                               freeze_bottom=0, clip_norm=5.0, bucket=bucket)
        data = SourceData(task, pretrained, labels, "en", text, train, sizes, dev[:1], lambda: one_dev,
                          torch.device(args.device), autocast)
        run_dir = os.path.join(root, f"{task_name}-{bucket}")
        os.makedirs(run_dir)
        trainer = RunTrainer(data, settings, run_dir)
        trainer.train()
        record = json.loads(Path(run_dir, "metrics.jsonl").read_text().splitlines()[-1])
        kind = "bucket" if bucket else "random"
        out[f"train_per_s_{kind}"] = record["examples_per_s"]
        out[f"train_padding_{kind}"] = record["padding_fraction"]
    if args.profile:
        profile_steps(trainer, [ob.batch for ob in ordered_batches(task, train, list(range(len(train))), text, labels,
                                                                  bs, max_len)][:args.profile])
    model = trainer.model
    for name, order in (("file", list(range(len(dev)))), ("sorted", dev_sorted)):
        batches = dev_batches if name == "sorted" else [
            ob.batch for ob in ordered_batches(task, dev, order, text, labels, args.eval_batch_size, max_len)]
        t0 = time.perf_counter()
        trainer.evaluate_batches(model, dev, batches, "en", "en", None)
        out[f"eval_per_s_{name}"] = len(dev) / (time.perf_counter() - t0)
        out[f"eval_padding_{name}"] = padding_fraction(dev_lengths, order, args.eval_batch_size)
    return out


def profile_steps(trainer: RunTrainer, batches: list) -> None:
    """torch.profiler over ``batches`` training steps (after three unprofiled ones): where a step's
    time goes, host and device, as bench_model_flops.py --profile shows it for pretraining."""
    from torch.profiler import ProfilerActivity, profile

    for batch in batches[:3]:
        trainer.train_step(batch)
    cuda = torch.cuda.is_available() and trainer.data.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    t0 = time.perf_counter()
    with profile(activities=activities) as prof:
        for batch in batches[3:]:
            trainer.train_step(batch)
        if cuda:
            torch.cuda.synchronize()
    steps = max(1, len(batches) - 3)
    print(f"profile: {steps} training steps, {1000 * (time.perf_counter() - t0) / steps:.1f} ms a step (profiled)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default="xnli,ner,parse")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--examples", type=int, default=512, help="training (and dev) examples per task")
    ap.add_argument("--batch-size", type=int, default=None, help="default: xnli 8, ner/parse 32")
    ap.add_argument("--eval-batch-size", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=None, help="default: the task's (xnli/parse 256, ner 128)")
    ap.add_argument("--vocab-size", type=int, default=50000)
    ap.add_argument("--task-option", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                    help="as xlt finetune's (JSON when it parses, else a string), for every task measured: name one task with it")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                    help="as xlt finetune's: auto is bf16 autocast on a GPU that has it, else fp32")
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS",
                    help="after each task's figures, a torch.profiler table of STEPS training steps")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"preset {args.preset}, device {args.device}, precision {args.precision}, {torch.get_num_threads()} thread(s), "
          f"load average {os.getloadavg()[0]:.1f}"
          + (f", task options {dict(args.task_option)}" if args.task_option else ""))
    header = ("task", "bs", "mean len", "encode/s", "train/s rand", "train/s bucket", "pad rand", "pad bucket",
              "eval/s file", "eval/s sorted", "pad file", "pad sorted")
    print(" | ".join(header))
    with tempfile.TemporaryDirectory() as root:
        for name in args.tasks.split(","):
            r = measure(name, args, root)
            print(" | ".join([r["task"], str(r["batch_size"]), f"{r['mean_len']:.1f}", f"{r['encode_per_s']:.0f}",
                              f"{r['train_per_s_random']:.1f}", f"{r['train_per_s_bucket']:.1f}",
                              f"{r['train_padding_random']:.1%}", f"{r['train_padding_bucket']:.1%}",
                              f"{r['eval_per_s_file']:.1f}", f"{r['eval_per_s_sorted']:.1f}",
                              f"{r['eval_padding_file']:.1%}", f"{r['eval_padding_sorted']:.1%}"]), flush=True)


if __name__ == "__main__":
    main()

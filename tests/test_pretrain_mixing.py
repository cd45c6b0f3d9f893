"""--langs-per-step: a step sums the gradients of several one-language batches (fairseq's mixing)."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import assert_one_line_error, run_xlt
from pretrain_fixtures import build_inputs, tiny_args

from xlt.pretrain.config import PretrainConfig
from xlt.pretrain.plan import resolve
from xlt.pretrain.trainer import Pretrainer


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("mixing-inputs"))


def config(root, **overrides) -> PretrainConfig:
    settings = dict(vocab=str(root / "vocab"), train={l: str(root / f"{l}.train") for l in ("en", "fr")},
                    dev={l: str(root / f"{l}.dev") for l in ("en", "fr")}, preset="tiny", stream_len=16,
                    batch_size=4, dropout=0.0, clip_norm=0.0, warmup_steps=0, lr=1e-2, langs_per_step=3,
                    sharing="sep-emb", lang_alpha=0.0, seed=3, max_steps=1)
    return PretrainConfig(**{**settings, **overrides})


def test_a_step_over_several_languages_is_one_adam_step_on_their_mean_loss(inputs, tmp_path):
    cfg = config(inputs["root"])
    trained = Pretrainer(resolve(cfg), tmp_path / "trained")
    trained.train()

    # The textbook step, from a second trainer built the same way: one graph for the mean of the
    # three batches' losses, one backward, one Adam step.
    ref = Pretrainer(resolve(cfg), tmp_path / "reference")
    start = {k: v.clone() for k, v in ref.model.state_dict().items()}
    langs = [ref.sampler.next() for _ in range(cfg.langs_per_step)]
    assert set(langs) == {"en", "fr"}, "the seed must give a step of both languages (Sep Emb: both tables learn)"
    losses = []
    for lang in langs:
        masked = ref.masking(next(ref.streams[lang]), lang, ref.mask_generator)
        losses.append(ref.model(masked.input_ids, lang, None, masked.flat_positions, masked.target_ids))
    (sum(losses) / len(losses)).backward()
    ref.optimizer.step()

    for (name, a), b in zip(trained.model.state_dict().items(), ref.model.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5), name
    moved = [lang for lang in ("en", "fr")  # both languages' own embeddings moved in that one step
             if not torch.equal(start[f"encoder.token_embeddings.by_lang.{lang}.weight"],
                                trained.model.state_dict()[f"encoder.token_embeddings.by_lang.{lang}.weight"])]
    assert moved == ["en", "fr"]


def test_one_language_per_step_is_what_a_single_batch_gives(inputs, tmp_path):
    one = Pretrainer(resolve(config(inputs["root"], langs_per_step=1, max_steps=2)), tmp_path / "one")
    one.train()
    mixed = Pretrainer(resolve(config(inputs["root"], langs_per_step=2, max_steps=1)), tmp_path / "mixed")
    mixed.train()
    # Same two batches, but two Adam steps against one step on their mean: not the same weights.
    assert any(not torch.equal(a, b) for a, b in zip(one.model.state_dict().values(),
                                                     mixed.model.state_dict().values()))


def test_resume_equals_uninterrupted_and_the_run_records_the_languages_of_each_step(inputs, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    mixing = ["--langs-per-step", "2", "--sharing", "sep-emb"]
    run_xlt("pretrain", "--run-dir", straight, *inputs["args"], *tiny_args(8), *mixing, check=True)
    run_xlt("pretrain", "--run-dir", split, *inputs["args"], *tiny_args(4), *mixing, check=True)
    run_xlt("pretrain", "--run-dir", split, *inputs["args"], *tiny_args(8), *mixing, check=True)
    a, b = (torch.load(r / "checkpoints" / "last.pt", weights_only=False)["model"] for r in (straight, split))
    for name in a:
        assert torch.equal(a[name], b[name]), name
    steps = [json.loads(l) for l in (straight / "metrics.jsonl").read_text().splitlines() if '"loss"' in l]
    assert steps and all(len(s["lang"].split("+")) == 2 for s in steps)
    assert steps[-1]["tokens_per_s"] > 0
    assert json.loads((straight / "config.json").read_text())["config"]["langs_per_step"] == 2
    res = run_xlt("pretrain", "--run-dir", straight, *inputs["args"], *tiny_args(8), "--sharing", "sep-emb")
    assert_one_line_error(res, "other settings (langs_per_step: 2 -> 1")


def test_zero_languages_per_step_is_refused(inputs, tmp_path):
    res = run_xlt("pretrain", "--run-dir", tmp_path / "r", *inputs["args"], *tiny_args(2), "--langs-per-step", "0")
    assert_one_line_error(res, "--langs-per-step must be at least 1, got 0")
    assert not (tmp_path / "r").exists()

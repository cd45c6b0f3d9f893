"""Pretraining as plan, then run: a frozen config checked once, resolved into the PretrainPlan the
trainer builds from, and ``xlt pretrain --dry-run`` printing it."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from conftest import assert_one_line_error, run_xlt
from pretrain_fixtures import build_inputs, tiny_args

from xlt.model.config import EncoderConfig, SharingSpec
from xlt.pretrain.config import PretrainConfig
from xlt.pretrain.plan import describe, parameter_count, resolve
from xlt.pretrain.snapshots import snapshot_due
from xlt.pretrain.trainer import Pretrainer
from xlt.utils.errors import XltError


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("plan-inputs"), n_train=120, n_dev=20)


def config(root, **overrides) -> PretrainConfig:
    settings = dict(vocab=str(root / "vocab"), train={l: str(root / f"{l}.train") for l in ("en", "fr")},
                    dev={l: str(root / f"{l}.dev") for l in ("en", "fr")}, preset="tiny", stream_len=16,
                    batch_size=4, max_steps=2, eval_every=2, save_every=2, log_every=1, warmup_steps=1)
    return PretrainConfig(**{**settings, **overrides})


def test_the_config_refuses_a_change_after_construction_and_keeps_its_own_tables(inputs):
    train = {l: str(inputs["root"] / f"{l}.train") for l in ("en", "fr")}
    snapshot_at = [1]
    cfg = config(inputs["root"], train=train, snapshot_at=snapshot_at)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.max_steps = 0
    train["de"], snapshot_at[0] = "elsewhere", 99  # the caller's containers, changed after the check
    assert list(cfg.train) == ["en", "fr"] and cfg.snapshot_at == [1]
    with pytest.raises(XltError, match="--max-steps must be at least 1"):
        dataclasses.replace(cfg, max_steps=0)  # a changed copy is a new config, checked again


def test_the_config_is_checked_once_however_far_the_run_goes(inputs, tmp_path, monkeypatch):
    calls = []
    check = PretrainConfig.validate
    monkeypatch.setattr(PretrainConfig, "validate", lambda self: (calls.append(1), check(self)))
    Pretrainer(resolve(config(inputs["root"])), tmp_path / "run").train()
    assert len(calls) == 1


def test_a_bad_value_fails_at_construction_with_one_error_line_and_nothing_written(inputs, tmp_path):
    res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *inputs["args"], *tiny_args(2), "--dry-run",
                  "--warmup-init-lr", "1")
    assert_one_line_error(res, "--warmup-init-lr must be positive and at most --lr")
    # without a warm-up its first rate plays no part (it was recorded as if it had)
    res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *inputs["args"], *tiny_args(2, warmup_steps="0"),
                  "--dry-run", "--warmup-init-lr", "1e-4")
    assert_one_line_error(res, "--warmup-init-lr starts the warm-up and --warmup-steps is 0")
    assert not (tmp_path / "run").exists()


def test_the_plan_is_what_the_trainer_built_and_what_the_run_records(inputs, tmp_path):
    cfg = config(inputs["root"], sharing="sep-emb", separate_layers=(1, 1), dropout=0.0, snapshot_at=[1])
    plan = resolve(cfg)
    trainer = Pretrainer(plan, tmp_path / "run")
    trainer.train()
    # The model the trainer built: every parameter the plan counts, built from the plan's config.
    assert parameter_count(plan.model) == sum(p.numel() for p in trainer.model.parameters())
    for name in ("last.pt", "best.pt", "step-1.pt"):
        saved = torch.load(tmp_path / "run" / "checkpoints" / name, weights_only=False)
        assert saved["model_config"] == plan.model.to_dict()
        assert saved["vocab_sha256"] == plan.vocab_sha256
    # What config.json held before the plan existed: the config, and the model the trainer built from the
    # preset itself (written out here as it was, so a change in the plan's resolution shows).
    vocab = inputs["vocab"]
    model = EncoderConfig.preset("tiny", vocab_size=len(vocab), languages=["en", "fr"],
                                 sharing=SharingSpec(separate_embeddings=True, separate_layers=(1, 1)),
                                 lang_embeddings=True, dropout=0.0, attention_dropout=0.0)
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())
    assert recorded["config"] == {**cfg.to_dict(), "model": model.to_dict()} == plan.to_dict()
    assert plan.model == model and plan.vocab_size == len(vocab) and plan.languages == ("en", "fr")
    assert plan.masking.random_within_language  # separate embeddings: replacements from the language's own


def test_the_cli_records_the_plan_byte_for_byte_and_resumes_under_it(inputs, tmp_path):
    run_dir = tmp_path / "run"
    run_xlt("pretrain", "--run-dir", run_dir, *inputs["args"], *tiny_args(3), "--sharing", "sep-emb", check=True)
    recorded = json.loads((run_dir / "config.json").read_text())
    values = dict(vocab=str(inputs["root"] / "vocab"), preset="tiny", stream_len=16, batch_size=4, warmup_steps=5,
                  lr=1e-3, log_every=2, eval_every=5, save_every=3, max_steps=3, sharing="sep-emb")
    plan = resolve(config(inputs["root"], **values))
    assert json.dumps(recorded["config"], indent=2) == json.dumps(plan.to_dict(), indent=2)
    # More steps is the same run (max_steps is mutable): it resumes; another preset is not.
    res = run_xlt("pretrain", "--run-dir", run_dir, *inputs["args"], *tiny_args(4), "--sharing", "sep-emb", check=True)
    assert "resuming" in res.stderr and "at step 3" in res.stderr
    res = run_xlt("pretrain", "--run-dir", run_dir, *inputs["args"], *tiny_args(4), "--sharing", "default")
    assert_one_line_error(res, "run directory holds a run with other settings")


def test_the_curriculum_phases_tokens_and_snapshot_steps(inputs):
    plan = resolve(config(inputs["root"], max_steps=30, short_stream_len=4, short_stream_steps=10,
                          snapshot_every=7, snapshot_at=[3, 14, 30], langs_per_step=2))
    (short, long_) = plan.phases
    assert (short.first_step, short.last_step, short.stream_len, short.batch_size) == (1, 10, 4, 16)
    assert (long_.first_step, long_.last_step, long_.stream_len, long_.batch_size) == (11, 30, 16, 4)
    assert plan.tokens_per_step() == 2 * 4 * 16 and plan.tokens_per_step(world_size=8) == 8 * 2 * 4 * 16
    assert short.stream_len * short.batch_size == long_.stream_len * long_.batch_size  # the same tokens per step
    assert plan.snapshot_steps() == [s for s in range(1, 31) if snapshot_due(s, 7, [3, 14, 30])]
    cut = resolve(config(inputs["root"], max_steps=5, short_stream_len=4, short_stream_steps=10))
    assert [(p.first_step, p.last_step) for p in cut.phases] == [(1, 5)]


def test_dry_run_prints_the_plan_and_writes_nothing(inputs, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    res = run_xlt("pretrain", "--run-dir", run_dir, *inputs["args"], *tiny_args(20), "--dry-run",
                  "--short-stream-len", "4", "--short-stream-steps", "5", "--snapshot-every", "10",
                  check=True)
    assert not run_dir.exists()
    plan = resolve(config(inputs["root"], max_steps=20, short_stream_len=4, short_stream_steps=5,
                          snapshot_every=10))
    out = res.stdout
    assert f"{parameter_count(plan.model):,} parameters" in out
    assert f"tokens/step    {4 * 16:,} per process" in out
    assert "steps 1-5: 16 x 4-token windows" in out and "steps 6-20: 4 x 16-token windows" in out
    assert "snapshots      10, 20" in out
    assert f"en ({plan.sentences()['en']:,} sentences)" in out
    # under torchrun: the step's tokens over every process, printed by rank 0 alone
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank, printed in (("0", True), ("1", False)):
        monkeypatch.setenv("RANK", rank)
        res = run_xlt("pretrain", "--run-dir", run_dir, *inputs["args"], *tiny_args(20), "--dry-run", check=True)
        assert (f"{4 * 16:,} per process (1 x 4 windows x 16 tokens), {2 * 4 * 16:,} over 2 processes" in res.stdout) \
            is printed and (res.stdout == "") is not printed


def test_the_plan_says_when_equal_copies_change_nothing(inputs):
    # make passes --equal-copies-init to every row; only rows with language copies start them equal
    rows = {"default": {}, "sep-emb": {"sharing": "sep-emb"}, "sep-l1": {"separate_layers": (1, 1)}}
    said = {row: describe(resolve(config(inputs["root"], equal_copies_init=True, **options)))
            for row, options in rows.items()}
    assert "changes nothing (no language has a copy of its own)" in said["default"]
    assert all("; copies start equal" in said[r] and "changes nothing" not in said[r] for r in ("sep-emb", "sep-l1"))
    assert "copies" not in describe(resolve(config(inputs["root"], sharing="sep-emb")))


def test_planning_fails_before_the_run_directory_on_a_missing_store(inputs, tmp_path):
    args = [a if a != str(inputs["root"] / "fr.dev") else str(tmp_path / "nowhere") for a in inputs["args"]]
    res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *args, *tiny_args(2), "--dry-run")
    assert res.returncode == 2 and "nowhere" in res.stderr
    assert not (tmp_path / "run").exists()


def test_a_sentence_cut_larger_than_a_store_is_refused_by_the_plan_and_the_dry_run(inputs, tmp_path):
    with pytest.raises(XltError, match="max_sentences must be between 1 and the 120 sentences of the 'en' store"):
        resolve(config(inputs["root"], max_sentences=121))
    assert resolve(config(inputs["root"], max_sentences=120)).sentences() == {"en": 120, "fr": 120}
    res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *inputs["args"], *tiny_args(2), "--dry-run",
                  "--max-sentences", "1000")
    assert_one_line_error(res, "max_sentences must be between 1 and the 120 sentences")
    assert not (tmp_path / "run").exists()


def test_the_unigram_floor_is_counted_on_the_sentences_the_run_trains_on(inputs, tmp_path, monkeypatch):
    from xlt.data.store import TokenStore
    from xlt.pretrain import trainer as trainer_module

    counted = {}
    real = trainer_module.unigram_log_probs

    def spy(tokens, vocab_size):
        counted[len(counted)] = tokens.copy()
        return real(tokens, vocab_size)

    monkeypatch.setattr(trainer_module, "unigram_log_probs", spy)
    (tmp_path / "run").mkdir()
    Pretrainer(resolve(config(inputs["root"], max_sentences=30)), tmp_path / "run").evaluate()
    for i, lang in enumerate(("en", "fr")):
        store = TokenStore.open(inputs["root"] / f"{lang}.train")
        # the first 30 sentences' ids, not the store's 120
        assert np.array_equal(counted[i], store.tokens[:int(store.offsets[30])])


def test_replacements_within_the_language_need_the_vocabularys_owners(inputs, tmp_path):
    # Without the sidecar every token counts as every language's: Sep Emb's within-language draws
    # would come from the whole vocabulary while the plan said they did not.
    import shutil

    root = tmp_path / "no-sidecar"
    shutil.copytree(inputs["root"], root)
    (root / "vocab.langs.json").unlink()
    with pytest.raises(XltError, match="need the vocabulary's ownership sidecar") as error:
        resolve(config(root, sharing="sep-emb"))
    assert error.value.path == str(root / "vocab")
    with pytest.raises(XltError, match="ownership sidecar"):
        resolve(config(root, random_within_language=True))
    # drawn from every token, as asked, or as Default does
    assert not resolve(config(root, sharing="sep-emb", random_within_language=False)).masking.random_within_language
    assert not resolve(config(root)).masking.random_within_language

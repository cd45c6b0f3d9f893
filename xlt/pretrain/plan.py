"""Pretraining as plan, then run: a :class:`~xlt.pretrain.config.PretrainConfig` resolved once into a
complete, frozen :class:`PretrainPlan` -- the languages, the vocabulary's size and checksum, the
model's :class:`~xlt.model.config.EncoderConfig` (preset, sharing, dropout, language embeddings),
the masking rules and the window-length phases -- which :class:`xlt.pretrain.trainer.Pretrainer`
builds and trains, and ``xlt pretrain --dry-run`` prints.

Planning reads the vocabulary and the token stores' headers (to check that each holds the language it
is given as, and to count its sentences), never their tokens, and writes nothing: a run that cannot
start fails here, before its directory is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from xlt.data.masking import MaskingConfig
from xlt.data.store import StorePaths, TokenStore
from xlt.data.streams import sentences_read
from xlt.model.config import EncoderConfig, SharingSpec
from xlt.pretrain.config import PretrainConfig
from xlt.pretrain.snapshots import snapshot_due
from xlt.text.bpe import check_codes
from xlt.text.tokenize import TokenizerConfig
from xlt.text.vocab import Vocabulary
from xlt.utils.errors import XltError


@dataclass(frozen=True)
class Phase:
    """Steps ``first_step`` to ``last_step`` (1-based, inclusive) train on windows of ``stream_len``
    tokens, ``batch_size`` of them per batch and per process."""

    first_step: int
    last_step: int
    stream_len: int
    batch_size: int


@dataclass(frozen=True)
class PretrainPlan:
    """Everything a pretraining run is, resolved before it starts (no field is left to a default)."""

    config: PretrainConfig
    languages: tuple[str, ...]           # the order of the model's language ids
    vocab_size: int
    vocab_sha256: str
    train_sentences: tuple[int, ...]     # per language (in ``languages`` order), after --max-sentences
    model: EncoderConfig
    masking: MaskingConfig               # random_within_language decided

    @property
    def phases(self) -> tuple[Phase, ...]:
        """The curriculum: a short-window phase first when --short-stream-len is given."""
        cfg = self.config
        if cfg.short_stream_len is None:
            return (Phase(1, cfg.max_steps, cfg.stream_len, cfg.batch_size),)
        short_end = min(cfg.short_stream_steps, cfg.max_steps)
        phases = [Phase(1, short_end, cfg.short_stream_len, cfg.short_batch_size)]
        if short_end < cfg.max_steps:
            phases.append(Phase(short_end + 1, cfg.max_steps, cfg.stream_len, cfg.batch_size))
        return tuple(phases)

    def tokens_per_step(self, world_size: int = 1) -> int:
        """Input tokens of one optimizer step of the long-window phase, over ``world_size`` processes
        (the short phase's batches are grown to about as many)."""
        return self.config.stream_len * self.config.batch_size * self.config.langs_per_step * world_size

    def snapshot_steps(self) -> list[int]:
        """The steps after which a weight-only snapshot is written (checkpoints/step-N.pt)."""
        cfg = self.config
        every = range(cfg.snapshot_every, cfg.max_steps + 1, cfg.snapshot_every) if cfg.snapshot_every else ()
        return sorted(s for s in {*every, *cfg.snapshot_at} if snapshot_due(s, cfg.snapshot_every, cfg.snapshot_at))

    def sentences(self) -> dict[str, int]:
        """Training sentences per language, as the language sampler counts them."""
        return dict(zip(self.languages, self.train_sentences))

    def to_dict(self) -> dict[str, Any]:
        """What config.json records as the run's settings (and a resume compares): the config, and the
        model it builds under "model"."""
        return {**self.config.to_dict(), "model": self.model.to_dict()}


def resolve(cfg: PretrainConfig) -> PretrainPlan:
    """The run ``cfg`` describes, checked against its inputs -> XltError naming the bad option or file."""
    languages = tuple(cfg.train)
    check_languages(cfg, languages)
    vocab = Vocabulary.load(cfg.vocab)
    train_stores = open_stores(cfg.train, vocab)
    open_stores(cfg.dev, vocab)
    sharing = SharingSpec.preset(cfg.sharing)
    if cfg.separate_layers is not None:
        sharing = SharingSpec(separate_embeddings=sharing.separate_embeddings,
                              separate_layers=tuple(cfg.separate_layers))
    dropout = {} if cfg.dropout is None else {"dropout": cfg.dropout, "attention_dropout": cfg.dropout}
    model = EncoderConfig.preset(cfg.preset, vocab_size=len(vocab), languages=list(languages), sharing=sharing,
                                 lang_embeddings=cfg.lang_embeddings, **dropout)
    if cfg.stream_len > model.max_positions:   # else the first step fails, after the run folder is written
        raise XltError(f"--stream-len {cfg.stream_len} is longer than the {cfg.preset} model's "
                       f"{model.max_positions} positions")
    masking = MaskingConfig(random_within_language=cfg.random_within_language).resolved(
        separate_embeddings=sharing.separate_embeddings, prefix_lang=vocab.prefix_lang)
    if masking.random_within_language and not vocab.languages:
        # without it every token counts as every language's, and the replacements would come from
        # the whole vocabulary while the run's config said they did not
        raise XltError("random replacements within the language (separate embeddings' default, or "
                       "--random-within-language) need the vocabulary's ownership sidecar (VOCAB.langs.json, "
                       "written by xlt bpe vocab --lang ...); --no-random-within-language draws from every token",
                       cfg.vocab)
    # a cut larger than a store is refused here, where --dry-run sees it, not when the streams open
    counts = tuple(sentences_read(train_stores[l], cfg.max_sentences) for l in languages)
    return PretrainPlan(config=cfg, languages=languages, vocab_size=len(vocab), vocab_sha256=vocab.sha256,
                        train_sentences=counts, model=model, masking=masking)


def check_languages(cfg: PretrainConfig, languages: tuple[str, ...]) -> None:
    """Every training language has a dev set, a tokenizer and valid codes; no other language is named."""
    if not languages:
        raise XltError("no training data given (--train LANG PREFIX)")
    for lang in languages:
        if lang not in cfg.dev:
            raise XltError(f"language {lang!r} has no dev set (--dev {lang} PREFIX)")
    for option, table in (("--dev", cfg.dev), ("--codes", cfg.codes)):
        for lang in table:
            if lang not in languages:
                raise XltError(f"{option} {lang}: not a training language ({', '.join(languages)})")
    for lang in languages:
        tokenizer_config(cfg, lang)  # a language no tokenizer knows could not be fed new text later
    for path in cfg.codes.values():
        check_codes(path)  # a bad codes file would be copied into the run and fail every later stage
    if cfg.select_on != "mean" and cfg.select_on not in languages:
        raise XltError(f"--select-on {cfg.select_on!r} is not a training language "
                       f"({', '.join(languages)}) nor 'mean'")


def tokenizer_config(cfg: PretrainConfig, lang: str) -> TokenizerConfig:
    """How ``lang``'s text was tokenized (recorded in the run's text.json for later stages)."""
    return TokenizerConfig(lang, cfg.lowercase, cfg.remove_accents)


def open_stores(prefixes: Mapping[str, str], vocab: Vocabulary) -> dict[str, TokenStore]:
    """The token stores by language, each checked to hold that language's text."""
    stores = {lang: TokenStore.open(prefix, vocab=vocab) for lang, prefix in prefixes.items()}
    for lang, store in stores.items():
        if store.language != lang:  # swapped prefixes would train each language on the other's text
            raise XltError(f"the store holds {store.language!r} text, given as {lang!r}",
                           StorePaths.of(store.prefix).header)
    return stores


def parameter_count(model: EncoderConfig) -> int:
    """Parameters of the masked-LM model ``model`` describes, counted on the meta device (no memory)."""
    import torch

    from xlt.model.heads import MaskedLM

    with torch.device("meta"):
        return sum(p.numel() for p in MaskedLM(model).parameters())


def _equal_copies(asked: bool, sharing: SharingSpec) -> str:
    # make passes --equal-copies-init to every row, so a row without copies is told apart, not refused
    if not asked:
        return ""
    if sharing.has_copies:
        return "; copies start equal"
    return "; --equal-copies-init changes nothing (no language has a copy of its own)"


def describe(plan: PretrainPlan, processes: int = 1) -> str:
    """The plan as ``xlt pretrain --dry-run`` prints it: what the run would train, and for how long
    (over ``processes``, torchrun's)."""
    cfg, m = plan.config, plan.model
    sharing = ", ".join(f"{k} {v}" for k, v in m.sharing.to_dict().items())
    lines = [f"languages      {', '.join(f'{l} ({n:,} sentences)' for l, n in plan.sentences().items())}",
             f"vocabulary     {plan.vocab_size:,} ids, sha256 {plan.vocab_sha256[:12]}",
             f"model          {cfg.preset}: {parameter_count(m):,} parameters; {m.n_layers} layers, d_model "
             f"{m.d_model}, {m.n_heads} heads, dropout {m.dropout:g}, language embeddings "
             f"{'yes' if m.lang_embeddings else 'no'}",
             f"sharing        {cfg.sharing}: {sharing}" + _equal_copies(cfg.equal_copies_init, m.sharing),
             f"masking        random replacements within the language: "
             f"{'yes' if plan.masking.random_within_language else 'no'}",
             f"tokens/step    {plan.tokens_per_step():,} per process ({cfg.langs_per_step} x {cfg.batch_size} "
             f"windows x {cfg.stream_len} tokens)"
             + (f", {plan.tokens_per_step(processes):,} over {processes} processes" if processes > 1 else "")]
    for i, phase in enumerate(plan.phases):
        lines.append(f"{'phases' if i == 0 else '':<15}steps {phase.first_step:,}-{phase.last_step:,}: "
                     f"{phase.batch_size} x {phase.stream_len}-token windows per batch")
    snapshots = plan.snapshot_steps()
    shown = ", ".join(map(str, snapshots[:12])) + (f", ... ({len(snapshots)} in all)" if len(snapshots) > 12 else "")
    lines += [f"schedule       lr {cfg.lr:g}, warm-up {cfg.warmup_steps:,} steps from {cfg.warmup_init_lr:g}, "
              f"then inverse square root; {cfg.max_steps:,} steps",
              f"snapshots      {shown or 'none'}",
              f"evaluate       every {cfg.eval_every:,} steps; best by dev ppl of {cfg.select_on}"]
    return "\n".join(lines)

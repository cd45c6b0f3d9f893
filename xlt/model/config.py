"""Encoder configuration: sizes, languages, and which parameters each language gets to itself.

Two typed dataclasses, both JSON-friendly through ``to_dict()`` / ``from_dict()`` so a run
directory can carry them:

* :class:`SharingSpec` -- the parameter-sharing ablation of Wu et al. (2020) §4.3. Named presets
  (:data:`SHARING_PRESETS`) match the rows of their Table 1; anything else is spelled with the
  two fields directly.
* :class:`EncoderConfig` -- the network's sizes plus its languages and sharing spec. Named size
  presets (:data:`MODEL_PRESETS`): ``wu2020`` (the paper's model), ``small`` (CPU demo runs),
  ``mini`` (the paper's depth, narrow: every Table 1 row on a CPU), ``tiny`` (tests).

Every mistake a user can make here (unknown preset, a layer range that is not a bottom range,
heads that do not divide the width, an unknown key in a stored config) raises :class:`XltError`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from xlt.utils.errors import PathLike, XltError


@dataclass(frozen=True)
class SharingSpec:
    """Which parts of the encoder are language-specific (one copy per language).

    Everything not named here is one tensor shared by all languages. The top Transformer layer is
    always shared: it is what gives the task head language-independent inputs (Wu et al. §4.3).
    """

    separate_embeddings: bool = field(default=False, metadata={
        "help": "each language has its own token AND position embeddings, hence (the softmax being "
                "tied to them) its own output softmax and output bias"})
    separate_layers: Optional[tuple[int, int]] = field(default=None, metadata={
        "help": "1-based inclusive range (1, k) of bottom Transformer layers that each language has its "
                "own copy of; None shares every layer. Must start at 1 and leave the top layer shared"})

    def __post_init__(self) -> None:
        if self.separate_layers is not None:
            # JSON gives lists; keep the frozen dataclass hashable and comparable.
            object.__setattr__(self, "separate_layers", tuple(self.separate_layers))

    @staticmethod
    def preset(name: str) -> "SharingSpec":
        """The spec of a named Table 1 row (see :data:`SHARING_PRESETS`)."""
        if name not in SHARING_PRESETS:
            raise XltError(f"unknown sharing preset {name!r}; known: {', '.join(SHARING_PRESETS)}")
        return SHARING_PRESETS[name]

    def validate(self, n_layers: int) -> None:
        """Raise XltError unless ``separate_layers`` is a bottom range leaving the top layer shared."""
        if self.separate_layers is None:
            return
        bounds = self.separate_layers
        if len(bounds) != 2 or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
            raise XltError(f"separate_layers must be two integers (first, last), got {bounds!r}")
        first, last = bounds
        if first != 1:
            raise XltError(f"separate_layers must start at layer 1 (only bottom layers can be separated), "
                           f"got ({first}, {last})")
        if not 1 <= last < n_layers:
            raise XltError(f"separate_layers ({first}, {last}) must end between layer 1 and layer "
                           f"{n_layers - 1}: the model has {n_layers} layers and the top one stays shared")

    @property
    def has_copies(self) -> bool:
        """Whether any part of the encoder has one copy per language (False: every tensor is shared)."""
        return self.separate_embeddings or self.separate_layers is not None

    def layer_is_separate(self, layer: int) -> bool:
        """Whether Transformer layer ``layer`` (1-based) has one copy per language."""
        return self.separate_layers is not None and self.separate_layers[0] <= layer <= self.separate_layers[1]

    def to_dict(self) -> dict[str, Any]:
        return {"separate_embeddings": self.separate_embeddings,
                "separate_layers": None if self.separate_layers is None else list(self.separate_layers)}


# Name -> spec, one per parameter-sharing row of Wu et al. (2020) Table 1 ("default" is its first row).
SHARING_PRESETS: dict[str, SharingSpec] = {
    "default": SharingSpec(),
    "sep-emb": SharingSpec(separate_embeddings=True),
    "sep-l1-3": SharingSpec(separate_layers=(1, 3)),
    "sep-l1-6": SharingSpec(separate_layers=(1, 6)),
    "sep-emb+l1-3": SharingSpec(separate_embeddings=True, separate_layers=(1, 3)),
    "sep-emb+l1-6": SharingSpec(separate_embeddings=True, separate_layers=(1, 6)),
}

ACTIVATIONS = ("gelu", "relu")


@dataclass
class EncoderConfig:
    """Sizes and structure of a bidirectional Transformer encoder (BERT/XLM family, post-LN)."""

    vocab_size: int = field(metadata={"help": "number of token ids, the five specials included (len(Vocabulary))"})
    languages: list[str] = field(metadata={
        "help": "the model's languages in a fixed order; a language's index is its language-embedding id"})
    n_layers: int = field(default=8, metadata={"help": "number of Transformer layers"})
    n_heads: int = field(default=12, metadata={"help": "attention heads per layer; must divide d_model"})
    d_model: int = field(default=768, metadata={"help": "hidden size (embedding and residual stream width)"})
    d_ffn: int = field(default=3072, metadata={"help": "inner size of the feed-forward block"})
    dropout: float = field(default=0.1, metadata={
        "help": "dropout on embeddings, attention output and feed-forward output"})
    attention_dropout: float = field(default=0.1, metadata={"help": "dropout on attention probabilities"})
    max_positions: int = field(default=512, metadata={"help": "number of learned position embeddings"})
    activation: str = field(default="gelu", metadata={"help": f"feed-forward activation, one of {ACTIVATIONS}"})
    lang_embeddings: bool = field(default=True, metadata={
        "help": "add an XLM-style learned language embedding to every input position (XLM's default, "
                "and Wu et al. trained with XLM's code)"})
    sharing: SharingSpec = field(default_factory=SharingSpec, metadata={
        "help": "which parameters are language-specific (SharingSpec or a preset name)"})

    def __post_init__(self) -> None:
        if isinstance(self.sharing, str):
            self.sharing = SharingSpec.preset(self.sharing)
        self.languages = list(self.languages)
        self.validate()

    def validate(self) -> None:
        """Raise XltError on any inconsistent size or language list."""
        for name in ("vocab_size", "n_layers", "n_heads", "d_model", "d_ffn", "max_positions"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise XltError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise XltError(f"n_heads ({self.n_heads}) must divide d_model ({self.d_model})")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise XltError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if self.activation not in ACTIVATIONS:
            raise XltError(f"unknown activation {self.activation!r}; known: {', '.join(ACTIVATIONS)}")
        if not self.languages:
            raise XltError("the model needs at least one language")
        if len(set(self.languages)) != len(self.languages):
            raise XltError(f"languages must be distinct, got {self.languages}")
        for lang in self.languages:
            # Language codes become parameter names (``...by_lang.fr...``), so no dots or blanks.
            if not isinstance(lang, str) or not lang.isidentifier():
                raise XltError(f"language code {lang!r} must be a non-empty identifier such as 'en' or 'zh_hans'")
        self.sharing.validate(self.n_layers)

    @classmethod
    def preset(cls, name: str, *, vocab_size: int, languages: list[str],
               sharing: SharingSpec | str = "default", **overrides: Any) -> "EncoderConfig":
        """A named size preset (:data:`MODEL_PRESETS`) for these languages and this sharing spec.

        ``overrides`` replace single fields (``n_layers=6``); an unknown field name is an error.
        """
        if name not in MODEL_PRESETS:
            raise XltError(f"unknown model preset {name!r}; known: {', '.join(MODEL_PRESETS)}")
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise XltError(f"unknown EncoderConfig field(s): {', '.join(unknown)}")
        sizes = {**MODEL_PRESETS[name], **overrides}
        return cls(vocab_size=vocab_size, languages=list(languages), sharing=sharing, **sizes)

    def language_index(self, lang: str | int) -> int:
        """Index of ``lang`` (a code, or already an index) in :attr:`languages`."""
        if isinstance(lang, int) and not isinstance(lang, bool):
            if 0 <= lang < len(self.languages):
                return lang
            raise XltError(f"language index {lang} out of range: the model has {len(self.languages)} languages")
        if lang in self.languages:
            return self.languages.index(lang)
        raise XltError(f"language {lang!r} is not one of the model's languages {self.languages}")

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["sharing"] = self.sharing.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Optional[PathLike] = None) -> "EncoderConfig":
        """Inverse of :meth:`to_dict`; ``path`` (the file it came from) is named in errors."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise XltError(f"unknown encoder config field(s): {', '.join(unknown)}", path)
        values = dict(data)
        try:
            sharing = values.pop("sharing", {})
            if isinstance(sharing, dict):
                sharing_fields = {f.name for f in dataclasses.fields(SharingSpec)}
                if set(sharing) - sharing_fields:
                    raise XltError(f"unknown sharing field(s): {', '.join(sorted(set(sharing) - sharing_fields))}")
                sharing = SharingSpec(**sharing)
            return cls(sharing=sharing, **values)
        except XltError as err:
            raise XltError(err.message, path) from None
        except TypeError as err:  # a required field is missing
            raise XltError(f"bad encoder config: {err}", path) from None


# Size presets. ``wu2020``: Wu et al. (2020) §3.1 (8 layers, 12 heads, 768 hidden, 3072 FFN, GELU,
# dropout 0.1, learned positions up to 512); attention dropout 0.1 as in XLM's MLM recipes.
MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "wu2020": dict(n_layers=8, n_heads=12, d_model=768, d_ffn=3072, dropout=0.1, attention_dropout=0.1),
    "small": dict(n_layers=4, n_heads=4, d_model=256, d_ffn=1024, dropout=0.1, attention_dropout=0.1),
    # The paper's 8 layers (so Sep L1-6 leaves shared layers on top, as in Table 1) at a width a
    # 2-core CPU pretrains in under a minute: the reproduction's demo scale.
    "mini": dict(n_layers=8, n_heads=2, d_model=64, d_ffn=256, dropout=0.1, attention_dropout=0.1),
    "tiny": dict(n_layers=2, n_heads=2, d_model=64, d_ffn=128, dropout=0.1, attention_dropout=0.1),
}

"""Loading a pretrained run directory: the model plus everything that turns new text into its ids.
The ``xlt`` kind of :mod:`xlt.loader.kinds`, beside the transformers models of :mod:`xlt.model.hf`;
it reads what ``xlt pretrain`` wrote and needs nothing of pretraining's code.

Every later stage (``finetune``, ``extract``, ``align``, ``cka``, ``shift-decode``) starts from a
RUN DIR, never from loose pieces that could disagree::

    run = PretrainedRun.load("runs/en-fr.default")
    ids = run.text("fr").encode_lines(["Le chat dort."])          # tokenize -> BPE -> ids
    ids, starts = run.text("fr").encode_words(["Le", "chat", "dort", "."])   # CoNLL words
    hidden = run.model.encoder(torch.tensor(ids), "fr").last_hidden_state

A :class:`PretrainedRun` is also a :class:`~xlt.model.protocol.TextModel` (the seam the analyses are
written against, which Hugging Face models implement too): ``run.encode_lines(lang, lines)``,
``run.hidden_states(ids, mask, lang)``, ``run.shifted_decode(...)``, ``run.random_like(seed)``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Optional, Sequence

import torch
from torch import Tensor

from xlt.model.checkpoint_io import load_checkpoint, load_model_weights, require_keys
from xlt.model.config import EncoderConfig
from xlt.model.heads import MaskedLM
from xlt.model.weights import state_sha256
from xlt.text.pipeline import TextPipeline, model_input
from xlt.text.tokenize import Tokenizer, TokenizerConfig
from xlt.text.vocab import PAD_ID, SPECIALS, UNK_ID, Vocabulary
from xlt.utils.errors import PathLike, XltError
from xlt.utils.textio import read_json


def pad_inputs(rows: Sequence[Sequence[int]], device: torch.device | str = "cpu",
               pad_id: int = PAD_ID) -> tuple[Tensor, Optional[Tensor]]:
    """Model inputs -> (input_ids Long [B,T] right-padded with ``pad_id`` (xlt's ``<pad>``), padding_mask
    Bool [B,T] True at pads, or None when no row is padded: the encoder then runs without an attention mask)."""
    T = max(1, max((len(r) for r in rows), default=0))
    ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.as_tensor(list(row), dtype=torch.long)
    mask = torch.arange(T)[None, :] >= torch.tensor([len(r) for r in rows])[:, None]
    return ids.to(device), (mask.to(device) if bool(mask.any()) else None)


def checkpoint_path(run_dir: PathLike, checkpoint: str = "best") -> str:
    """``RUN/checkpoints/CHECKPOINT.pt`` once the run directory has what loading it needs; XltError naming
    what is missing otherwise. Reads nothing but the directory's listing."""
    run_dir = os.fspath(run_dir)
    for needed in ("config.json", "vocab", "text.json"):
        if not os.path.exists(os.path.join(run_dir, needed)):
            raise XltError(f"not a pretrained run directory (no {needed})", run_dir)
    path = os.path.join(run_dir, "checkpoints", f"{checkpoint}.pt")
    if not os.path.exists(path):
        raise XltError(f"no {checkpoint} checkpoint in this run directory", path)
    return path


def run_config(run_dir: PathLike) -> dict:
    """config.json's resolved configuration, no weights loaded; empty where the run has none readable
    (the checkpoint is then the only word)."""
    try:
        config = read_json(os.path.join(os.fspath(run_dir), "config.json"))["config"]
    except (XltError, KeyError, TypeError):
        return {}
    return config if isinstance(config, dict) else {}


def run_model_settings(run_dir: PathLike) -> dict:
    """config.json's model settings (what the checkpoints' model config was made from); empty where
    the run has none readable."""
    settings = run_config(run_dir).get("model")
    return settings if isinstance(settings, dict) else {}


def read_text_settings(run_dir: PathLike) -> dict[str, dict]:
    """text.json: language -> its text settings (a dict; ``codes``, where given, a file name in the run).
    A file of another shape is one error line here, not a TypeError where a pipeline is built."""
    path = os.path.join(os.fspath(run_dir), "text.json")
    settings = read_json(path, "run text settings")
    if not isinstance(settings, dict) or not settings:
        raise XltError("not a run's text settings (expected an object: language -> its settings)", path)
    for lang, s in settings.items():
        if not isinstance(s, dict):
            raise XltError(f"language {lang!r}: its text settings are a {type(s).__name__}, expected an object",
                           path)
        if s.get("codes") is not None and not isinstance(s["codes"], str):
            raise XltError(f"language {lang!r}: codes is a {type(s['codes']).__name__}, expected a file name",
                           path)
    return settings


def run_languages(run_dir: PathLike) -> list[str]:
    """The run's languages in its model's order, no weights loaded: config.json's model settings,
    else the languages of text.json."""
    languages = run_model_settings(run_dir).get("languages")
    if isinstance(languages, list) and all(isinstance(lang, str) for lang in languages):
        return list(languages)
    return list(read_text_settings(run_dir))


@dataclass
class PretrainedRun:
    """A pretrained model with its vocabulary and per-language text settings."""

    path: str
    model: MaskedLM
    config: EncoderConfig
    vocab: Vocabulary
    text_settings: dict[str, dict]
    step: int
    # "pretrained", or "random:SEED" for random_like(SEED): what extraction headers record.
    variant: str = "pretrained"
    # One pipeline per language: building one reads the BPE codes (a tenth of a second at 17k merges),
    # and fine-tuning tasks memoise encodings per pipeline object.
    _texts: dict[str, TextPipeline] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def languages(self) -> list[str]:
        return list(self.config.languages)

    @classmethod
    def load(cls, run_dir: PathLike, checkpoint: str = "best", device: str | torch.device = "cpu") -> "PretrainedRun":
        """Load ``RUN/checkpoints/{best,last}.pt`` with the run's vocabulary and text settings."""
        run_dir = os.fspath(run_dir)
        ckpt_path = checkpoint_path(run_dir, checkpoint)
        vocab = Vocabulary.load(os.path.join(run_dir, "vocab"))
        state = load_checkpoint(ckpt_path)
        require_keys(state, {"model": dict, "model_config": dict, "vocab_sha256": str}, ckpt_path)
        if state.get("vocab_sha256") != vocab.sha256:
            raise XltError("the run's vocabulary does not match the vocabulary its model was trained with",
                           os.path.join(run_dir, "vocab"))
        config = EncoderConfig.from_dict(state["model_config"], ckpt_path)
        model = MaskedLM(config)
        load_model_weights(model, state["model"], ckpt_path)
        model.to(device).eval()
        text_settings = read_text_settings(run_dir)
        return cls(run_dir, model, config, vocab, text_settings, state.get("step", 0))

    def text(self, lang: str) -> TextPipeline:
        """The text pipeline of one of the model's languages."""
        if lang not in self.text_settings:
            raise XltError(f"language {lang!r} is not one of this model's ({', '.join(self.text_settings)})",
                           self.path)
        if lang not in self._texts:
            s = dict(self.text_settings[lang])
            codes = s.pop("codes", None)
            # Runs written before text.json recorded "lang" and the library versions read the same.
            config = TokenizerConfig.from_dict({**s, "lang": lang}, os.path.join(self.path, "text.json"))
            self._texts[lang] = TextPipeline(lang, self.vocab, Tokenizer.from_config(config),
                                             os.path.join(self.path, codes) if codes else None)
        return self._texts[lang]

    def random_encoder_like(self, seed: int = 0) -> MaskedLM:
        """A freshly initialised model of the same architecture, initialised as the run started (its
        language copies equal where it started them so): the CKA lower bound, tracking's step 0."""
        from xlt.model.encoder import start_copies_equal

        torch.manual_seed(seed)
        model = MaskedLM(self.config).eval()
        if run_config(self.path).get("equal_copies_init") is True:   # unreadable: drawn apart
            start_copies_equal(model.encoder)
        return model

    # ---- the TextModel protocol (xlt.model.protocol) ----------------------------------------------

    @property
    def n_layers(self) -> int:
        return self.config.n_layers

    @property
    def d_model(self) -> int:
        return self.config.d_model

    @property
    def max_positions(self) -> int:
        return self.config.max_positions

    pad_id = PAD_ID
    unk_id = UNK_ID
    special_ids = frozenset(range(len(SPECIALS)))
    has_head = True  # every run is a MaskedLM (a transformers model may be a bare encoder)

    @property
    def source(self) -> str:
        return os.path.abspath(self.path)

    def describe(self) -> dict:
        return {"source": self.source, "kind": "xlt", "step": self.step, "model": self.variant}

    def check_language(self, lang: str) -> None:
        self.text(lang)

    def weights_sha256(self) -> str:
        return state_sha256(self.model)

    def with_model(self, model: MaskedLM, variant: str) -> "PretrainedRun":
        """This run's vocabulary and text pipelines around another model of its architecture."""
        return dataclasses.replace(self, model=model, variant=variant)

    def random_like(self, seed: int) -> "PretrainedRun":
        device = next(self.model.parameters()).device
        return self.with_model(self.random_encoder_like(seed).to(device), f"random:{seed}")

    def encode_lines(self, lang: str, lines: Sequence[str]) -> list[list[int]]:
        return self.text(lang).encode_lines(lines)

    def encode_words(self, lang: str, words: Sequence[str]) -> tuple[list[int], list[int]]:
        return self.text(lang).encode_words(words)

    def wrap(self, ids: Sequence[int]) -> list[int]:
        return model_input(ids)

    def split_words(self, lang: str, line: str) -> list[str]:
        """The run's Moses tokenizer (what its BPE was applied to)."""
        return self.text(lang).tokenizer.tokenize(line).split()

    def input_embeddings(self, lang: str):
        """``lang``'s token table float32 [V,D] (its own rows in a run with separate embeddings) and the
        whole-word vocabulary entries ``lang`` owns: no ``@@`` continuation mark, ``lang:`` prefix removed."""
        table = self.model.encoder.token_embedding_weight(lang).detach().float().cpu().numpy()
        prefix = f"{lang}:" if self.vocab.prefix_lang else ""
        tokens = {i: self.vocab.token(i) for i in self.vocab.language_ids(lang)}
        return table, {i: t[len(prefix):] for i, t in tokens.items() if not t.endswith("@@")}

    @torch.no_grad()
    def hidden_states(self, ids: Tensor, padding_mask: Optional[Tensor], lang: str) -> tuple[Tensor, ...]:
        """ids Long [B,T] -> n_layers + 1 states [B,T,D] (index 0: embeddings after LayerNorm)."""
        return self.model.eval().encoder(ids, lang, padding_mask, output_hidden_states=True).hidden_states

    @torch.no_grad()
    def shifted_decode(self, ids: Tensor, padding_mask: Optional[Tensor], lang: str,
                       shifts: Sequence[tuple[int, Tensor]], decode_lang: str) -> list[Tensor]:
        """Per (layer, vector [D]): argmax Long [B,T] of ``decode_lang``'s softmax after shifting layer's output.

        The unshifted states are computed once and only the layers above each shift are re-run
        (:meth:`Encoder.encode_from`), which is why this is the model's method and not the analysis'.
        """
        encoder, head = self.model.eval().encoder, self.model.head
        states = encoder(ids, lang, padding_mask, output_hidden_states=True).hidden_states
        out = []
        for layer, vector in shifts:
            top = encoder.encode_from(states[layer] + vector, lang, layer, padding_mask).last_hidden_state
            out.append(head.decode(top, decode_lang).cpu())
        return out

    def words(self, lang: str, ids: Sequence[int]) -> list[str]:
        """Ids -> words: specials dropped, ``lang:`` prefixes removed, ``@@`` subwords joined."""
        tokens = [self.vocab.token(i) for i in ids if i not in self.special_ids]
        if self.vocab.prefix_lang:
            tokens = [t.split(":", 1)[1] if ":" in t else t for t in tokens]
        return " ".join(tokens).replace("@@ ", "").removesuffix("@@").split()

    def reference_words(self, lang: str, line: str) -> list[str]:
        """The words of a reference: the language's own word tokenizer (what BPE was applied to)."""
        return self.text(lang).tokenizer.tokenize(line).split()

    def token_set(self, lang: str, path: Optional[str] = None) -> set[int]:
        """V_lang from a BPE'd text of the language (its whitespace tokens), else from the vocabulary's
        ownership sidecar (the per-language counts the vocabulary was built from)."""
        from xlt.utils.errors import require_file
        from xlt.utils.textio import read_lines

        if path is not None:
            seen = {i for line in read_lines(require_file(path, "BPE'd text"))
                    for i in self.vocab.encode(line.split(), lang)}
            return seen - {UNK_ID}
        if not self.vocab.languages:
            raise XltError("the vocabulary has no language ownership sidecar; pass --token-set LANG BPE_TEXT "
                           "for both languages", os.path.join(self.path, "vocab"))
        return set(self.vocab.language_ids(lang))

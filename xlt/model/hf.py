"""A Hugging Face model as a :class:`~xlt.model.protocol.TextModel`: mBERT, XLM-R, an exported xlt run ...

``--model hf:NAME`` loads through transformers' Auto classes (the hub cache on a user's machine);
``--model DIR`` loads a local directory written by ``save_pretrained``. The model's own tokenizer
makes the ids (WordPiece, SentencePiece, XLM's Moses + BPE); word alignment comes from the fast
tokenizer's ``word_ids`` (a slow tokenizer segments word by word, as xlt's pipeline does). The model
is loaded with its masked-LM head when the checkpoint has one (``AutoModelForMaskedLM``, every head
weight present), else as the bare encoder (``AutoModel``): extraction and CKA need only the encoder,
``shift-decode translate`` refuses a model without a head.

Language embeddings: only XLM models have them (``config.lang2id``); any other model runs without.

Shapes: B batch rows, T positions, D hidden size, V vocabulary.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Optional, Sequence

import torch
from torch import Tensor, nn
from torch.nn.attention import sdpa_kernel

from xlt.model.encoder import ATTENTION_BACKENDS
from xlt.model.hub import HF_PREFIX
from xlt.model.weights import state_sha256
from xlt.utils.errors import XltError

# Logits of at most this many positions at once: a 250k-word softmax (XLM-R) over a whole batch
# would be gigabytes.
HEAD_CHUNK = 1024


def quiet_transformers() -> None:
    """No transformers warnings or progress bars on stderr: xlt owns its logs, and a bad input must stay
    one error line ("some weights newly initialised" is decided on by the loader itself)."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def _load_error(spec: str, what: str, err: Exception) -> XltError:
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return XltError(f"cannot load the {what} ({first})", spec)


def _check_encoder(config: Any, spec: str) -> None:
    """XltError for a model that is not a bidirectional encoder: an encoder-decoder's output is its
    decoder's (BART: fine-tuning trained on the decoder), and a left-to-right model's states see no
    right context, which no analysis or task here assumes."""
    from transformers.models.auto import modeling_auto as auto

    kind = getattr(config, "model_type", None)
    if not getattr(config, "vocab_size", None):
        raise XltError(f"not a text model ({kind}: no vocabulary)", spec)
    if getattr(config, "is_encoder_decoder", False):
        raise XltError(f"an encoder-decoder model ({kind}): xlt reads encoders (BERT, XLM, XLM-R and the like)", spec)
    causal = kind in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    # XLM's and FlauBERT's left-to-right models (xlm-clm-*) are their masked models' class with `causal`
    causal = causal or getattr(config, "causal", False) or getattr(config, "is_encoder", True) is False
    if causal or getattr(config, "is_decoder", False):
        raise XltError(f"a left-to-right language model ({kind}): xlt reads bidirectional encoders "
                       "(BERT, XLM, XLM-R and the like)", spec)


class HFTextModel:
    """A transformers model and its tokenizer behind the TextModel protocol."""

    step = None

    def __init__(self, spec: str, model: nn.Module, tokenizer: Any, has_head: bool, variant: str = "pretrained"):
        self.spec, self.model, self.tokenizer, self.has_head, self.variant = spec, model.eval(), tokenizer, has_head, variant
        self.base = model.base_model if has_head else model
        config = self.base.config
        self.config = config
        self.n_layers = int(config.num_hidden_layers)
        self.d_model = int(config.hidden_size)
        limit = int(getattr(config, "max_position_embeddings", 512))
        # RoBERTa-family position ids start after the padding index: the table has two rows fewer to give.
        # (The position table's padding index: XLM's `embeddings` is its token table, padding index 2.)
        positions = getattr(getattr(self.base, "embeddings", None), "position_embeddings", None)
        offset = getattr(positions, "padding_idx", None)
        if offset is not None:
            limit -= offset + 1
        model_max = getattr(tokenizer, "model_max_length", None)
        self.max_positions = min(limit, model_max) if isinstance(model_max, int) and model_max > 0 else limit
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.special_ids = frozenset(tokenizer.all_special_ids)
        self.unk_id = tokenizer.unk_token_id if tokenizer.unk_token_id is not None else self.pad_id
        self.lang2id = dict(getattr(config, "lang2id", None) or {})
        self.uses_lang_emb = bool(getattr(config, "use_lang_emb", False)) and int(getattr(config, "n_langs", 1)) > 1
        # XLM's tokenizer runs Moses with the language's rules: it takes lang= (no other tokenizer does).
        # It becomes the export's class (xlt does not run an export's code): its words before BPE, and
        # control characters made spaces as Moses' Perl scripts (XLM's own preprocessing) make them.
        from transformers import XLMTokenizer

        from xlt.model.tokenization_xlt import XltXLMTokenizer

        if type(tokenizer) is XLMTokenizer:
            tokenizer.__class__ = XltXLMTokenizer
            tokenizer.lang = next(iter(self.lang2id), "en")
        self.tokenizer_takes_lang = isinstance(tokenizer, XltXLMTokenizer)
        self._around: Optional[tuple[list[int], list[int]]] = None
        self._pair: Optional[tuple[list[int], list[int], list[int]]] = None
        # WordPiece's decoder glues punctuation to the word before it ("garden."): keep every token a
        # word of its own, as the references that decoded output is scored against are segmented.
        decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
        if decoder is not None and hasattr(decoder, "cleanup"):
            decoder.cleanup = False

    # ---- loading -----------------------------------------------------------------------------------

    @classmethod
    def load(cls, spec: str, device: str | torch.device = "cpu") -> "HFTextModel":
        """``hf:NAME`` or a local transformers directory -> model (eval mode, on ``device``) + tokenizer."""
        import transformers

        from xlt.model.hub import hub_source

        quiet_transformers()
        name, options = hub_source(spec)
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(name, **options)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
            # The files a directory lacks are no clue to why a hub name failed (an unknown name, say).
            raise _load_error(spec, "tokenizer" if spec.startswith(HF_PREFIX) else
                              "tokenizer (a transformers model directory needs tokenizer.json or its tokenizer's "
                              "vocabulary files)", err) from None
        # transformers 5 builds an EMPTY tokenizer of the config's type when no tokenizer file is found;
        # it would map every word to the unknown token.
        if tokenizer is None or len(tokenizer) <= len(set(tokenizer.all_special_ids)):
            raise XltError("no tokenizer with this model (a transformers model directory needs tokenizer.json "
                           "or its tokenizer's vocabulary files, e.g. vocab.txt or sentencepiece.bpe.model)", spec)
        try:
            config = transformers.AutoConfig.from_pretrained(name, **options)
        except (OSError, ValueError, KeyError) as err:
            raise _load_error(spec, "model's config", err) from None
        _check_encoder(config, spec)   # before any weight is read
        # Past the config, whatever the weights' loader raises (safetensors' own error for a file cut
        # short, XLM's refusal of a config it cannot build) is the directory's fault.
        try:
            model, info = transformers.AutoModelForMaskedLM.from_pretrained(name, output_loading_info=True, **options)
            # A head whose weights are missing would be random: decode nothing with it.
            has_head = not info.get("missing_keys")
            if not has_head:
                model = model.base_model
        except ValueError:  # no masked-LM class for this architecture
            model, has_head = None, False
        except Exception as err:
            raise _load_error(spec, "model", err) from None
        if model is None:
            try:
                model = transformers.AutoModel.from_pretrained(name, **options)
            except Exception as err:
                raise _load_error(spec, "model", err) from None
        return cls(spec, model.to(device), tokenizer, has_head)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def source(self) -> str:
        return self.spec if self.spec.startswith(HF_PREFIX) else os.path.abspath(self.spec)

    def describe(self) -> dict:
        return {"source": self.source, "kind": "hf", "step": None, "model": self.variant,
                "model_type": getattr(self.config, "model_type", None)}

    def weights_sha256(self) -> str:
        return state_sha256(self.model)

    def random_like(self, seed: int) -> "HFTextModel":
        torch.manual_seed(seed)
        fresh = type(self.model)(self.model.config).to(self.device)
        return HFTextModel(self.spec, fresh, self.tokenizer, self.has_head, f"random:{seed}")

    # ---- text --------------------------------------------------------------------------------------

    def check_language(self, lang: str) -> None:
        # A config that names its languages takes no other, language embeddings or not: an XLM
        # model's tokenizer segments by them (xlt export's one-language views name one).
        if self.lang2id and lang not in self.lang2id:
            raise XltError(f"language {lang!r} is not one of this model's ({', '.join(self.lang2id)})", self.source)

    def encode_lines(self, lang: str, lines: Sequence[str]) -> list[list[int]]:
        if not lines:
            return []
        if self.tokenizer_takes_lang:
            # transformers 5's tokenize() drops its keyword arguments before XLM's _tokenize(text, lang)
            # sees them (every language would get English Moses rules), so the language goes in directly.
            tok = self.tokenizer
            with self._segmenter(lang):
                return [tok.convert_tokens_to_ids(tok._tokenize(line, lang=lang)) if line.strip() else []
                        for line in lines]
        return [list(ids) for ids in self.tokenizer(list(lines), add_special_tokens=False)["input_ids"]]

    def encode_words(self, lang: str, words: Sequence[str]) -> tuple[list[int], list[int]]:
        words = list(words)
        per_word: list[list[int]] = [[] for _ in words]
        if words and getattr(self.tokenizer, "is_fast", False):
            encoding = self.tokenizer(words, is_split_into_words=True, add_special_tokens=False)
            for token_id, word in zip(encoding["input_ids"], encoding.word_ids()):
                if word is not None:
                    per_word[word].append(token_id)
        else:  # a slow tokenizer has no word_ids: segment each word on its own
            per_word = [self.encode_lines(lang, [w])[0] if w else [] for w in words]
        ids: list[int] = []
        starts: list[int] = []
        for pieces in per_word:
            starts.append(len(ids))
            ids.extend(pieces or [self.unk_id])
        return ids, starts

    def split_words(self, lang: str, line: str) -> list[str]:
        """The tokenizer's own word segmentation: its normalizer, then its pre-tokenizer (BERT splits off
        punctuation, SentencePiece splits at spaces); XLM's words before BPE (Moses with the language's
        rules, or its zh/th/ja segmenter; lowercased where it lowercases); else spaces."""
        tok = self.tokenizer
        backend = getattr(tok, "backend_tokenizer", None)
        if backend is not None and backend.pre_tokenizer is not None:
            text = backend.normalizer.normalize_str(line) if backend.normalizer is not None else line
            # Offsets, not the pieces' strings: SentencePiece's pieces carry its "\u2581" word mark.
            words = (text[start:end].strip() for _, (start, end) in backend.pre_tokenizer.pre_tokenize_str(text))
            return [w for w in words if w]
        if self.tokenizer_takes_lang:
            with self._segmenter(lang):
                return tok.words(line, lang=lang)
        return line.split()

    @contextlib.contextmanager
    def _segmenter(self, lang: str):
        """XLM's tokenizer imports zh's, th's and ja's segmenters when first asked (packages of their own)."""
        try:
            yield
        except ImportError as err:
            raise XltError(f"the XLM tokenizer segments {lang} with {err.name or 'a package'}, which is not "
                           f"installed (pip install {err.name or '...'})", self.source) from None

    def input_embeddings(self, lang: str):
        """The input token table float32 [V,D] (one for every language) and its whole-word tokens: those
        whose spelling the tokenizer encodes back to exactly that one token (``##den`` or a bare
        ``\u2581`` is not a word; ``garden`` is)."""
        table = self.base.get_input_embeddings().weight.detach().float().cpu().numpy()
        tok = self.tokenizer
        ids = [i for i in range(min(len(tok), table.shape[0])) if i not in self.special_ids]
        spelled = [tok.convert_tokens_to_string([t]).strip() for t in tok.convert_ids_to_tokens(ids)]
        kept = [(i, w) for i, w in zip(ids, spelled) if w and len(w.split()) == 1]
        encoded = self.encode_lines(lang, [w for _, w in kept])
        return table, {i: w for (i, w), back in zip(kept, encoded) if back == [i]}

    def _specials(self) -> tuple[list[int], list[int]]:
        """The ids the tokenizer puts before and after one sentence, read off a sample encoding
        (tokenizer APIs for this differ between transformers versions and tokenizer kinds)."""
        if self._around is None:
            bare, full = self._sample("a")
            starts = [k for k in range(len(full) - len(bare) + 1) if full[k:k + len(bare)] == bare]
            if not bare or len(starts) != 1 or starts[0] != 1 or len(full) != len(bare) + 2:
                raise XltError(f"the {type(self.tokenizer).__name__} does not put one special token on each side "
                               f"of a sentence; xlt's pooling needs that layout", self.source)
            self._around = (full[:1], full[-1:])
        return self._around

    def _sample(self, text: str, pair: Optional[str] = None) -> tuple[list[int], list[int]]:
        """(``text``'s content ids, the ids of ``text`` (and ``pair``) with the tokenizer's specials).
        An XLM tokenizer called without a language takes English, and logs an error where its model
        has none (an export's one-language view): it is given one of its own."""
        if not self.tokenizer_takes_lang:
            bare = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            return bare, list(self.tokenizer(text, pair)["input_ids"] if pair else self.tokenizer(text)["input_ids"])
        lang = next(iter(self.lang2id), "en")
        first, *second = self.encode_lines(lang, [text] + ([pair] if pair else []))
        return first, list(self.tokenizer.build_inputs_with_special_tokens(first, *second))

    def wrap(self, ids: Sequence[int]) -> list[int]:
        before, after = self._specials()
        return before + list(ids) + after

    def _pair_specials(self) -> tuple[list[int], list[int], list[int]]:
        """The ids the tokenizer puts before, between and after a sentence pair, read off a sample pair as
        :meth:`_specials` reads one sentence's: ``[CLS] a [SEP] b [SEP]`` (BERT), ``<s> a </s></s> b </s>``
        (XLM-R). One special before, as for one sentence: a pair classifier reads position 0."""
        if self._pair is None:
            (a, _), (b, _) = self._sample("a"), self._sample("b")
            full = self._sample("a", "b")[1]
            before = self._specials()[0]
            start = len(before)
            rest = full[start + len(a):]
            cut = next((k for k in range(len(rest) - len(b) + 1) if rest[k:k + len(b)] == b), None)
            if full[:start] != before or full[start:start + len(a)] != a or cut is None or not rest[cut + len(b):]:
                raise XltError(f"the {type(self.tokenizer).__name__} does not lay a sentence pair out as "
                               f"SPECIAL a SEPARATOR b END; xlt's pair tasks need that layout", self.source)
            self._pair = (before, rest[:cut], rest[cut + len(b):])
        return self._pair

    def wrap_pair(self, a: Sequence[int], b: Sequence[int]) -> list[int]:
        """Content ids of two segments -> the model's own pair input (what ``tokenizer(a, b)`` gives)."""
        before, between, after = self._pair_specials()
        return before + list(a) + between + list(b) + after

    def pair_special_count(self) -> int:
        return sum(len(part) for part in self._pair_specials())

    def words(self, lang: str, ids: Sequence[int]) -> list[str]:
        kept = [int(i) for i in ids if i not in self.special_ids]
        # No clean-up: "garden ." stays two words, as the reference (same path) does.
        return self.tokenizer.decode(kept, clean_up_tokenization_spaces=False).split() if kept else []

    def reference_words(self, lang: str, line: str) -> list[str]:
        """The reference through the model's own tokenizer and back, so that it is segmented (and cased,
        and its unknown words spelled) exactly as decoded output is. An XLM tokenizer (an xlt export) reads
        it as the run does, its words before BPE (:meth:`split_words`), so that an export scores its run's
        BLEU-1: the round trip drops what the vocabulary cannot spell ("The" with no "T" read "he")."""
        if self.tokenizer_takes_lang:
            return self.split_words(lang, line)
        return self.words(lang, self.encode_lines(lang, [line])[0])

    def token_set(self, lang: str, path: Optional[str] = None) -> set[int]:
        """V_lang: ids of every token of a raw text of ``lang`` (a transformers model records no
        per-language vocabulary, so the text is required)."""
        from xlt.utils.errors import require_file
        from xlt.utils.textio import read_lines

        if path is None:
            raise XltError(f"a transformers model has no record of which tokens {lang} uses; pass --token-set "
                           f"LANG TEXT (raw text of the language) for both languages", self.source)
        lines = [line for line in read_lines(require_file(path, "text")) if line.strip()]
        return {i for ids in self.encode_lines(lang, lines) for i in ids} - self.special_ids

    # ---- the network -------------------------------------------------------------------------------

    def _inputs(self, ids: Tensor, padding_mask: Optional[Tensor], lang: str) -> dict:
        inputs: dict = {"input_ids": ids, "attention_mask": (torch.ones_like(ids) if padding_mask is None
                                                             else (~padding_mask).long())}
        if self.uses_lang_emb:
            inputs["langs"] = torch.full_like(ids, self.lang2id[lang])
        return inputs

    @torch.no_grad()
    def hidden_states(self, ids: Tensor, padding_mask: Optional[Tensor], lang: str) -> tuple[Tensor, ...]:
        with sdpa_kernel(ATTENTION_BACKENDS):   # as xlt's own encoder (a plan per shape otherwise)
            out = self.base(**self._inputs(ids, padding_mask, lang), output_hidden_states=True, return_dict=True)
        return tuple(out.hidden_states)

    def _layer_outputs(self) -> list[nn.Module]:
        return layer_output_modules(self.base, self.source)

    def _head(self) -> Callable[[Tensor], Tensor]:
        heads = [m for m in self.model.children() if m is not self.base]
        if len(heads) != 1:
            raise XltError(f"cannot tell the masked-LM head of {type(self.model).__name__} apart", self.source)
        head = heads[0]

        def logits(hidden: Tensor) -> Tensor:
            out = head(hidden)
            return out[0] if isinstance(out, (tuple, list)) else out
        return logits

    @torch.no_grad()
    def shifted_decode(self, ids: Tensor, padding_mask: Optional[Tensor], lang: str,
                       shifts: Sequence[tuple[int, Tensor]], decode_lang: str) -> list[Tensor]:
        """One forward pass per shift, the vector added by a forward hook on the layer's output module,
        then the MLM head's argmax, ``HEAD_CHUNK`` positions at a time. ``decode_lang`` is unused: a
        transformers model has one softmax for every language."""
        if not self.has_head:
            raise XltError("this model has no masked-LM head (loaded as a bare encoder): shift decoding "
                           "needs one", self.source)
        sites, head, out = self._layer_outputs(), self._head(), []
        for layer, vector in shifts:
            def add(module, inputs, output, vector=vector):
                if isinstance(output, tuple):
                    return (output[0] + vector, *output[1:])
                return output + vector
            handle = sites[layer].register_forward_hook(add)
            try:
                with sdpa_kernel(ATTENTION_BACKENDS):
                    hidden = self.base(**self._inputs(ids, padding_mask, lang), return_dict=True).last_hidden_state
            finally:
                handle.remove()
            flat = hidden.reshape(-1, hidden.shape[-1])
            best = [head(flat[s:s + HEAD_CHUNK]).argmax(-1) for s in range(0, flat.shape[0], HEAD_CHUNK)]
            out.append(torch.cat(best).view(ids.shape).cpu())
        return out


def layer_output_modules(base: nn.Module, source: str) -> list[nn.Module]:
    """The modules whose outputs are layers 0..n_layers of a transformers encoder (where a shift is added,
    and where fine-tuning's test-time layer hooks act)."""
    if hasattr(base, "embeddings") and hasattr(getattr(base, "encoder", None), "layer"):
        return [base.embeddings, *base.encoder.layer]  # BERT, RoBERTa, XLM-R, ELECTRA ...
    if hasattr(base, "layer_norm_emb") and hasattr(base, "layer_norm2"):
        return [base.layer_norm_emb, *base.layer_norm2]  # XLM: post-LN, a layer ends at its second LayerNorm
    raise XltError(f"xlt does not know where the layers of a {base.config.model_type} model end", source)

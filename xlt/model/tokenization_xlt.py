"""XLM's tokenizer with the language honoured by its normal call: ``tokenizer(text, lang="fr")``.

XLM's tokenizer runs Moses with a language's rules (French keeps the elided ``n'`` of ``n'a`` whole,
English splits ``n 'a``), but transformers 5 passes none of ``tokenize``'s keyword arguments on to
XLM's ``_tokenize``, so every call without this class gets English rules whatever ``lang`` says.

``xlt export hf`` copies this file into the export (``auto_map`` in ``tokenizer_config.json`` names
it), so it imports nothing but transformers and what transformers needs (``regex``);
``AutoTokenizer.from_pretrained(DIR, trust_remote_code=True)`` loads it. Without a ``lang``, the
export's first language applies (the only one of a one-language view). xlt's own loader gives every
XLM tokenizer this class.

Control characters (Unicode category C, by ``regex``'s Unicode tables, as xlt's) become spaces, as
Moses' remove-non-printing-char.perl makes them, where transformers' XLM deletes them by Python's
older tables: ``a<TAB>b`` was one word, and a newer emoji was dropped.
"""

from contextvars import ContextVar

import regex
from transformers import XLMTokenizer
from transformers.models.xlm.tokenization_xlm import replace_unicode_punct

# The language of the tokenize() call under way: XLM's _tokenize is called once per piece of text
# between special tokens, with no arguments to carry it. A context variable keeps threads apart.
_CALL_LANG = ContextVar("xlt_tokenizer_lang", default=None)
# Set while words() runs _tokenize: its words are wanted before BPE splits them.
_WORDS_ONLY = ContextVar("xlt_tokenizer_words_only", default=False)
_NON_PRINTING = regex.compile(r"\p{C}")


class XltXLMTokenizer(XLMTokenizer):
    def __init__(self, *args, lang=None, **kwargs):
        super().__init__(*args, lang=lang, **kwargs)
        self.lang = lang or next(iter(self.lang2id or {}), "en")

    def tokenize(self, text, lang=None, **kwargs):
        lang = lang or self.lang
        if self.lang2id and lang not in self.lang2id:
            raise ValueError(f"language {lang!r} is not one of this tokenizer's ({', '.join(self.lang2id)})")
        token = _CALL_LANG.set(lang)
        try:
            return super().tokenize(text, **kwargs)
        finally:
            _CALL_LANG.reset(token)

    def words(self, text, lang=None):
        """``text``'s words as the tokenizer segments them before BPE: Moses with the language's rules
        (or its segmenter for zh, th, ja), lowercased and accents removed where the tokenizer does."""
        token = _WORDS_ONLY.set(True)
        try:
            return [w for w in self._tokenize(text, lang=lang or self.lang) if w]
        finally:
            _WORDS_ONLY.reset(token)

    def moses_pipeline(self, text, lang):
        return _NON_PRINTING.sub(" ", self.moses_punct_norm(replace_unicode_punct(text), lang))

    def bpe(self, token):
        return token if _WORDS_ONLY.get() else super().bpe(token)

    def _tokenize(self, text, lang=None, bypass_tokenizer=False):
        return super()._tokenize(text, lang=lang or _CALL_LANG.get() or self.lang, bypass_tokenizer=bypass_tokenizer)

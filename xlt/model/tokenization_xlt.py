"""XLM's tokenizer with the language honoured by its normal call: ``tokenizer(text, lang="fr")``.

XLM's tokenizer runs Moses with a language's rules (French keeps the elided ``n'`` of ``n'a`` whole,
English splits ``n 'a``), but transformers 5 passes none of ``tokenize``'s keyword arguments on to
XLM's ``_tokenize``, so every call without this class gets English rules whatever ``lang`` says.

``xlt export hf`` copies this file into the export (``auto_map`` in ``tokenizer_config.json`` names
it), so it imports nothing but transformers; ``AutoTokenizer.from_pretrained(DIR,
trust_remote_code=True)`` loads it. Without a ``lang``, the export's first language applies (the
only one of a one-language view). Control characters become spaces, as Moses'
remove-non-printing-char.perl (and xlt) makes them, where transformers' XLM deletes them ("a<TAB>b"
would be one word).
"""

import unicodedata
from contextvars import ContextVar

from transformers import XLMTokenizer

# The language of the tokenize() call under way: XLM's _tokenize is called once per piece of text
# between special tokens, with no arguments to carry it. A context variable keeps threads apart.
_CALL_LANG = ContextVar("xlt_tokenizer_lang", default=None)


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

    def moses_punct_norm(self, text, lang):
        return spaced_control_characters(super().moses_punct_norm(text, lang))

    def _tokenize(self, text, lang=None, bypass_tokenizer=False):
        return super()._tokenize(text, lang=lang or _CALL_LANG.get() or self.lang, bypass_tokenizer=bypass_tokenizer)


def spaced_control_characters(text):
    """Every character of Unicode category C (Perl's \\p{C}) replaced by a space."""
    return "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in text)

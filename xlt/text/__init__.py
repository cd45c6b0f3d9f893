"""Text stages: tokenization, BPE (fastBPE formats), vocabularies with language ownership, code-switching."""

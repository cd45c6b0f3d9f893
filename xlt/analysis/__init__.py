"""Analyses of pretrained runs: representation extraction, CKA, language-mean shifts (and alignment)."""

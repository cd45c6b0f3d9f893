"""``xlt export hf``: an xlt run as a transformers model (thin wrapper over :mod:`xlt.pretrain.hf_export`)."""

from __future__ import annotations

from typing import Optional

import click

from xlt.cli.options import OutputPath, checkpoint_option


@click.group()
def export() -> None:
    """Export an xlt run to Hugging Face transformers (`xlt export hf`).

    \b
    Example:
      xlt export hf runs/en-fr.default -o hf/en-fr.default
    """


@export.command()
@click.argument("run_dir", metavar="RUN", type=click.Path(file_okay=False))
@click.option("--lang", "-l", default=None, metavar="LANG",
              help="Export this language's view (required for, and only for, a run with separate parameters).")
@checkpoint_option
@click.option("-o", "--output", required=True, type=OutputPath("directory"), metavar="DIR",
              help="Output directory (new or empty).")
def hf(run_dir: str, lang: Optional[str], checkpoint: str, output: str) -> None:
    """RUN as a transformers XLMWithLMHeadModel with XLM's Moses + BPE tokenizer files.

    AutoModel.from_pretrained(DIR) then gives the run's hidden states (to 1e-5) and
    AutoTokenizer.from_pretrained(DIR, trust_remote_code=True) its ids with tokenizer(text, lang=L)
    (the export's tokenization_xlt.py; transformers' own XLMTokenizer, loaded without
    trust_remote_code, ignores lang and applies English rules). Give a multilingual export's model
    langs=torch.full_like(input_ids, config.lang2id[L]) too. See docs/hf.md.

    \b
    Example (the default row; one language of the Sep Emb row):
      xlt export hf runs/en-fr.default -o hf/en-fr.default
      xlt export hf runs/en-fr.sep-emb --lang fr -o hf/en-fr.sep-emb.fr
    """
    from xlt.pretrain.hf_export import export_hf

    export_hf(run_dir, output, lang, checkpoint)

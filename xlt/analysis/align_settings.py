"""The typed settings of ``xlt align`` (:class:`AlignSettings`, :class:`WordSettings`) and their defaults.

``xlt align --help`` builds its options from them, and must not wait for numpy and torch (about 2 s),
which every other analysis module imports: nothing here imports either (nor does the package's
``__init__``); the device is resolved (torch) when a setting is built, not at import. The help of
``--device`` is the CLI's own (:data:`xlt.cli.options.SHARED_HELP`), like that of every command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from xlt.utils.checkpoint_names import CHECKPOINT_HELP, FINETUNED_HELP, check_checkpoint_name
from xlt.utils.errors import XltError, require_file
from xlt.utils.outputs import check_output_paths

# The defaults of the searches and of the normalization (xlt.analysis.retrieval and .procrustes use them).
ITERNORM_ROUNDS = 5  # Zhang et al. (2019)
CSLS_K = 10          # MUSE
BLOCK_SIZE = 8192    # rows per block of a nearest-neighbour search: block_size² scores at most at once

MAPS = ("procrustes", "none")
CANDIDATES = ("dictionary", "vocabulary")


@dataclass
class AlignSettings:
    """Options shared by every ``xlt align`` procedure."""

    iternorm_rounds: int = field(default=ITERNORM_ROUNDS, metadata={
        "help": "Iterative normalization rounds before Procrustes (Zhang et al. 2019; 0 = unit length only)."})
    csls_k: int = field(default=CSLS_K, metadata={"help": "Neighbourhood size of CSLS (MUSE: 10)."})
    block_size: int = field(default=BLOCK_SIZE, metadata={"help": "Rows per block in nearest-neighbour search."})
    batch_size: int = field(default=32, metadata={"help": "Sentences per forward pass."})
    device: str = "auto"   # help: the CLI's DEVICE_HELP
    checkpoint: str = field(default="best", metadata={
        "help": f"Checkpoint of each xlt run: {CHECKPOINT_HELP}."})
    finetuned: Optional[str] = field(default=None, metadata={
        "help": FINETUNED_HELP + " Applies to --model's side only.", "metavar": "RUN_DIR"})

    def __post_init__(self) -> None:
        from xlt.utils.device import resolve_device  # torch: only once settings are really built

        # Checked before any work: these would fail (or, csls_k=0, report CSLS as 0) after the encoding.
        for name, least in (("iternorm_rounds", 0), ("csls_k", 1), ("block_size", 1), ("batch_size", 1)):
            if getattr(self, name) < least:
                raise XltError(f"--{name.replace('_', '-')} must be at least {least}, got {getattr(self, name)}")
        check_checkpoint_name(self.checkpoint)
        self.device = str(resolve_device(self.device))  # "auto" becomes what this machine has


@dataclass
class WordSettings:
    """How word translation is measured (``xlt align word`` and ``contextual-word``)."""

    map: str = field(default="procrustes", metadata={
        "metavar": "[procrustes|none]",
        "help": "procrustes: an orthogonal map learned on --train-dict (Wu et al.); none: the joint space "
                "as it is, cosine only (Liu et al.; no --train-dict needed)."})
    candidates: str = field(default="dictionary", metadata={
        "metavar": "[dictionary|vocabulary]",
        "help": "What MRR ranks the gold translation among: dictionary = the test dictionary's target "
                "words (Liu et al., Eq. 1), vocabulary = the whole target space."})
    csls: bool = field(default=True, metadata={
        "help": "Also CSLS P@k (its r_S costs targets x the whole source space: --no-csls for big vocabularies)."})
    pos_from: Optional[str] = field(default=None, metadata={
        "metavar": "FILE",
        "help": "CoNLL-U treebank (UD English EWT): MRR broken down by each source word's most frequent UPOS."})
    drop_identical: bool = field(default=False, metadata={
        "help": "Drop dictionary pairs whose two words are the same string (in one joint space without "
                "language prefixes they are one row: rank 1 for free)."})
    pairs_from: list[str] = field(default_factory=list, metadata={
        "metavar": "FILE",
        "help": "Score only the test pairs found in every such file (e.g. each compared system's --pairs-out), "
                "so that every system is scored on the same pairs; a pair this system cannot represent is an "
                "error, not a miss."})
    pairs_out: Optional[str] = field(default=None, metadata={
        "metavar": "FILE",
        "help": "Write the test pairs scored, one 'source target' per line (a MUSE dictionary)."})
    save_map: Optional[str] = field(default=None, metadata={
        "metavar": "FILE", "help": "Write the learned W: float32 .npy, [D,D] (or [L,D,D], one per layer); "
                                   "iternorm(x_source) @ W is in the target space."})

    def __post_init__(self) -> None:
        if self.map not in MAPS:
            raise XltError(f"--map must be one of {', '.join(MAPS)}, got {self.map!r}")
        if self.candidates not in CANDIDATES:
            raise XltError(f"--candidates must be one of {', '.join(CANDIDATES)}, got {self.candidates!r}")
        if self.save_map is not None:
            if self.map == "none":
                raise XltError("--save-map needs --map procrustes (with --map none nothing is learned)")
            check_output_paths(self.save_map)
        if self.pos_from is not None:
            require_file(self.pos_from, "CoNLL-U file")
        self.pairs_from = [str(require_file(path, "pairs file")) for path in self.pairs_from]
        if self.pairs_out is not None:
            check_output_paths(self.pairs_out)

    def check(self, train_dictionary: Optional[str]) -> None:
        """Before any work: Procrustes needs training pairs."""
        if self.map == "procrustes" and train_dictionary is None:
            raise XltError("--map procrustes learns W on --train-dict: give one, or --map none (the joint space)")
        if self.map == "none" and train_dictionary is not None:
            # not inert either: its words would join the spaces searched (as xlt align sentence refuses --train)
            raise XltError("--map none learns no map: --train-dict would go unused, its words only added to the "
                           "spaces searched; leave it out")

"""``--model hf:NAME`` when the Hugging Face hub cannot be reached: the local cache, or one error line.

Left to itself, huggingface_hub retries an unreachable hub five times per file with a growing wait
(about 25 s a file, near a minute for a model), logs every retry, and transformers then blames the
failure on missing tokenizer files. One short request to the hub first tells which case it is.
"""

from __future__ import annotations

import functools
from typing import Optional

from xlt.utils.errors import XltError

# A --model value that names a model of the Hugging Face hub: hf:NAME.
HF_PREFIX = "hf:"

# Long enough for a slow link to answer, short enough that a hub which cannot be reached costs a few seconds.
PROBE_TIMEOUT_S = 3.0

USE_A_DIRECTORY = "give a local model directory instead (--model DIR, written by save_pretrained)"


# Once per endpoint and process: a command may read a model's config (xlt finetune's plan) before its
# weights, and an unreachable hub would cost its timeout each time.
@functools.lru_cache(maxsize=None)
def _hub_problem(endpoint: str) -> Optional[str]:
    """Why ``endpoint`` cannot be reached, or None when it answers (any HTTP status counts as an answer)."""
    from huggingface_hub.utils import get_session

    try:
        # The hub library's own client: the proxies, certificates and client factory its downloads would use.
        get_session().head(endpoint, timeout=PROBE_TIMEOUT_S)
    except Exception as err:  # noqa: BLE001 -- whatever stops this request would stop the download too
        return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return None


def _in_cache(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except (ValueError, OSError):  # a name that cannot be a repository id is in no cache
        return False


def hub_source(spec: str) -> tuple[str, dict]:
    """``--model`` value -> (what ``from_pretrained`` takes, its keyword arguments). A directory passes
    through; ``hf:NAME`` loads from the cache alone when the hub cannot be reached, and is one XltError
    when it is not in the cache either."""
    if not spec.startswith(HF_PREFIX):
        return spec, {}
    from huggingface_hub import constants

    name = spec[len(HF_PREFIX):]
    cached = _in_cache(name)
    if constants.HF_HUB_OFFLINE:
        if not cached:
            raise XltError(f"not in the local Hugging Face cache ({constants.HF_HUB_CACHE}), and HF_HUB_OFFLINE "
                           f"is set: {USE_A_DIRECTORY}, or unset HF_HUB_OFFLINE to download it", spec)
        return name, {}
    problem = _hub_problem(constants.ENDPOINT)
    if problem is None:
        return name, {}
    if cached:
        return name, {"local_files_only": True}
    raise XltError(f"not in the local Hugging Face cache ({constants.HF_HUB_CACHE}), and the hub "
                   f"({constants.ENDPOINT}) cannot be reached ({problem}): {USE_A_DIRECTORY}, or fill the cache "
                   f"where the hub can be reached and run with HF_HUB_OFFLINE=1", spec)

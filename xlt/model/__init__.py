"""The network: encoder with a parameter-sharing spec, and its heads (see docs/model.md)."""

from xlt.model.config import MODEL_PRESETS, SHARING_PRESETS, EncoderConfig, SharingSpec
from xlt.model.encoder import Encoder, EncoderOutput, LanguageSpecific
from xlt.model.heads import MaskedLM, MaskedLMHead

__all__ = ["EncoderConfig", "SharingSpec", "MODEL_PRESETS", "SHARING_PRESETS", "Encoder", "EncoderOutput",
           "LanguageSpecific", "MaskedLM", "MaskedLMHead"]

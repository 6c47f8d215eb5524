"""Models vLLM gets by name on the CPU tier: ``model: embedded`` is the embedded Gemma 3 270M GGUF
converted once into an HF directory by ``llmrec.serving.hf_model`` (shared with the transformers
engine and SFT); ``model: scale-llama`` is the random-weight scale model (``scale_model``)."""

from __future__ import annotations

from llmrec.serving.engines.vllm.scale_model import SCALE_MODEL, scale_model_dir
from llmrec.serving.hf_model import EMBEDDED, embedded_hf_model


def resolve_model(model: str) -> str:
    """The model argument vLLM gets: 'embedded' / 'scale-llama' → their built directories; anything else as is."""
    if model == EMBEDDED:
        return str(embedded_hf_model())
    return str(scale_model_dir()) if model == SCALE_MODEL else model

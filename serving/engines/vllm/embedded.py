"""The embedded Gemma 3 270M for vLLM (CPU tier): vLLM loads HF-format weights, so ``model:
embedded`` means the GGUF converted once into an HF directory by ``llmrec.serving.hf_model``
(shared with the transformers engine and SFT)."""

from __future__ import annotations

from llmrec.serving.hf_model import EMBEDDED, embedded_hf_model


def resolve_model(model: str) -> str:
    """The model argument vLLM gets: 'embedded' → the converted directory; anything else as is."""
    return str(embedded_hf_model()) if model == EMBEDDED else model

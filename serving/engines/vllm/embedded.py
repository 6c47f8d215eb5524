"""The embedded Gemma 3 270M as a Hugging Face model directory, for vLLM (CPU tier).

vLLM loads HF-format weights; the project ships the model only as a GGUF (the llama.cpp
engine's). transformers de-quantises the GGUF (``gguf_file=``) into a float model; its
GGUF quantizer and ``quantization_config`` are dropped so that ``save_pretrained`` writes
plain safetensors vLLM can read. Done once per user into ``cache_root()/models``; several
actors may start together, so each converts into its own folder and renames it into place.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

from llmrec.errors import EngineError, MissingDependency
from llmrec.settings import cache_root

log = logging.getLogger(__name__)

HF_DIR_NAME = "gemma3-270m-hf"


def embedded_hf_model() -> Path:
    """Directory of the converted embedded model (converted on first use, ~15 s)."""
    from llmrec.serving.engines.llamacpp import embedded_model

    gguf, sha = embedded_model()
    target = cache_root() / "models" / f"{HF_DIR_NAME}-{sha[:12]}"
    if (target / "config.json").is_file():
        return target
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise MissingDependency("converting the embedded model for vLLM", "transformers", "vllm") from e
    tmp = target.with_name(f"{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part")
    try:
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model.hf_quantizer = None  # the weights are de-quantised floats now: save them as such
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "config.json").is_file():  # not a concurrent winner: a real failure
                raise
    except (OSError, ValueError) as e:
        raise EngineError(f"could not convert the embedded model into {target}: {e}") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted the embedded model for vLLM at %s", target)
    return target


def resolve_model(model: str) -> str:
    """The model argument vLLM gets: 'embedded' → the converted directory; anything else as is."""
    return str(embedded_hf_model()) if model == "embedded" else model

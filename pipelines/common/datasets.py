"""Where benchmark data is found, and ``llmrec data fetch`` (pinned, checksummed download).

Search order: an explicit directory (``--data-dir`` / ``data.dir``), ``$LLMREC_DATA_DIR``,
then the per-user cache (``<cache>/data``). A directory "has" a benchmark when the
manifest's probe file exists under it. An explicit directory is the only place looked in: a missing
folder, a file, or a folder without the benchmark's files is an error naming it, never a fallback to
``$LLMREC_DATA_DIR`` or the cache (which could hold other data).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Callable

import httpx

from llmrec import settings
from llmrec.errors import DataError
from llmrec.pipelines.protocol import DataManifest

log = logging.getLogger(__name__)


def cache_data_dir() -> Path:
    return settings.cache_root() / "data"


def candidate_dirs(explicit: Path | None) -> list[tuple[str, Path]]:
    out = []
    if explicit is not None:
        out.append(("--data-dir", Path(explicit).expanduser()))
    env = settings.env_data_dir()
    if env is not None:
        out.append((f"${settings.DATA_DIR_ENV}", env))
    out.append(("per-user cache", cache_data_dir()))
    return out


def resolve_data_dir(explicit: Path | None, manifest: DataManifest | None) -> Path:
    """The first candidate directory holding the benchmark's probe file (``explicit``: that one only)."""
    if explicit is not None:
        where = Path(explicit).expanduser()
        if not where.exists():
            raise DataError(f"data folder {where} (--data-dir / data.dir) does not exist")
        if not where.is_dir():
            raise DataError(f"data folder {where} (--data-dir / data.dir) is a file, not a folder")
        if manifest is not None and not (where / manifest.probe).exists():
            raise DataError(f"{manifest.name} data not found in {where} (--data-dir / data.dir): no "
                            f"{where / manifest.probe}. Get it with `llmrec data fetch {manifest.name} --dest "
                            f"{where}`, or give the folder that holds {manifest.probe}")
        return where
    cands = candidate_dirs(explicit)
    if manifest is None:
        return cands[0][1]
    for _, d in cands:
        if (d / manifest.probe).exists():
            return d
    looked = "\n  ".join(f"{why}: {d / manifest.probe}" for why, d in cands)
    raise DataError(
        f"{manifest.name} data not found. Looked for:\n  {looked}\n"
        f"Get it with `llmrec data fetch {manifest.name}` (downloads from {manifest.source}), "
        f"or point ${settings.DATA_DIR_ENV} (or --data-dir) at a folder holding {manifest.probe}."
    )


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def fetch(manifest: DataManifest, dest: Path | None = None, base_url: str | None = None,
          progress: Callable[[int, int, str], None] | None = None, timeout_s: float = 60.0) -> Path:
    """Download every manifest file into ``dest`` (default: the per-user cache), verifying sha256.

    Files already present with the right checksum are kept. ``base_url`` replaces the
    manifest's URL prefix (used for mirrors and for tests against a local server).
    """
    dest = Path(dest) if dest is not None else cache_data_dir()
    total = len(manifest.files)
    for i, f in enumerate(manifest.files):
        target = dest / f.path
        if target.exists() and sha256_file(target) == f.sha256:
            continue
        url = f.url if base_url is None else base_url.rstrip("/") + "/" + f.path.split("/", 1)[1]
        try:
            resp = httpx.get(url, timeout=timeout_s, follow_redirects=True)
            resp.raise_for_status()
        except httpx.HTTPError as e:
            raise DataError(
                f"could not download {url}: {e}\nWithout network access, copy the {manifest.name} files "
                f"into a folder and set ${settings.DATA_DIR_ENV} to it (it must hold {manifest.probe})."
            ) from e
        digest = hashlib.sha256(resp.content).hexdigest()
        if digest != f.sha256:
            raise DataError(f"checksum mismatch for {url}: expected {f.sha256}, got {digest}")
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
            tmp.write(resp.content)
        os.replace(tmp.name, target)
        if progress:
            progress(i + 1, total, f.path)
    return dest

"""One small API over local folders and storage URIs (``s3://``, ``gs://``, ``hdfs://``, ``abfs://``
and any other fsspec protocol), so run directories, result stores and data can live on shared
storage that every node of a cluster (and the next driver) can reach.

Relative local paths are made absolute on the driver (:func:`resolve`) before anything is
sent to a cluster, where the working directory differs. Writes are atomic either way: a local
file is written under a hidden temporary name and renamed into place; an object store
publishes an object whole when its upload completes (a reader never sees half an object), so
remote writes go straight to their final name. Callers that need write-once semantics pick
unique names (the result store does).

S3 credentials and endpoint come from the usual AWS variables/config files (read by pyarrow;
``AWS_ENDPOINT_URL`` points at an S3-compatible server such as MinIO).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

from llmrec.errors import ConfigError, DataError


def is_uri(location: str | Path) -> bool:
    """True for ``scheme://…`` locations other than ``file://``."""
    s = str(location)
    return "://" in s and not s.startswith("file://")


def resolve(location: str | Path) -> str:
    """A URI unchanged; a local path (or ``file://`` URI) as an absolute path."""
    s = str(location)
    if is_uri(s):
        return s.rstrip("/")
    if s.startswith("file://"):
        s = s[len("file://"):]
    return str(Path(s).expanduser().resolve())


def _filesystem(uri: str):
    import pyarrow.fs as pafs

    if not is_uri(uri):
        return pafs.LocalFileSystem(), uri
    try:
        return pafs.FileSystem.from_uri(uri)
    except (pafs.ArrowInvalid, ValueError):  # not a pyarrow scheme: try fsspec
        pass
    try:
        import fsspec

        protocol = uri.split("://", 1)[0]
        fs = fsspec.filesystem(protocol)
    except (ImportError, ValueError) as e:
        raise ConfigError(f"storage location {uri!r}: no filesystem for this scheme ({e}); use a local path, "
                          f"s3://, gs://, hdfs://, abfs:// or an installed fsspec protocol") from e
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), fs._strip_protocol(uri)


class Storage:
    """A directory, local or remote. ``storage / "name"`` is a child directory."""

    def __init__(self, location: str | Path):
        self.uri = resolve(location)
        self.fs, self.path = _filesystem(self.uri)
        self.local = not is_uri(self.uri)

    @classmethod
    def of(cls, location: "str | Path | Storage") -> "Storage":
        return location if isinstance(location, Storage) else cls(location)

    def __truediv__(self, name: str) -> "Storage":
        return Storage(f"{self.uri}/{name}")

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"Storage({self.uri!r})"

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    @property
    def local_path(self) -> Path | None:
        return Path(self.uri) if self.local else None

    def _p(self, name: str) -> str:
        return f"{self.path.rstrip('/')}/{name}"

    def mkdir(self) -> None:
        self.fs.create_dir(self.path, recursive=True)

    def write_bytes(self, name: str, data: bytes) -> None:
        """Atomically publish ``name`` (see the module docstring)."""
        if self.local:
            self.mkdir()
            tmp = self._p(f".{name}.{uuid.uuid4().hex[:8]}.tmp")
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self._p(name))
            return
        with self.fs.open_output_stream(self._p(name)) as out:
            out.write(data)

    def write_text(self, name: str, text: str) -> None:
        self.write_bytes(name, text.encode("utf-8"))

    def upload(self, local: Path, name: str | None = None) -> None:
        self.write_bytes(name or Path(local).name, Path(local).read_bytes())

    def put_file(self, local: Path, rel: str) -> None:
        """Publish the local file ``local`` as ``rel`` (a name, or ``folder/name``) under this directory."""
        folder, _, name = rel.rpartition("/")
        (self / folder if folder else self).upload(local, name)

    def get_files(self, local_dir: Path) -> list[str]:
        """Copy the files directly in this directory into the local folder ``local_dir`` (each
        written under a temporary name, then renamed); returns their names."""
        names = self.list()
        for name in names:
            Storage(local_dir).write_bytes(name, self.read_bytes(name))
        return names

    def read_bytes(self, name: str) -> bytes:
        try:
            with self.fs.open_input_stream(self._p(name)) as fh:
                return fh.read()
        except FileNotFoundError as e:
            raise DataError(f"{self.uri}/{name} does not exist") from e

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode("utf-8")

    def exists(self, name: str) -> bool:
        import pyarrow.fs as pafs

        return self.fs.get_file_info(self._p(name)).type == pafs.FileType.File

    def list(self, suffix: str = "") -> list[str]:
        """Names of the files directly in this directory ending with ``suffix``, sorted."""
        import pyarrow.fs as pafs

        infos = self.fs.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(suffix))

    def delete(self, name: str) -> None:
        try:
            self.fs.delete_file(self._p(name))
        except FileNotFoundError:
            pass


def materialize(location: str | Path, cache_root: Path) -> Path:
    """A local folder holding the files under ``location``: the path itself when local, else a copy
    downloaded once into ``cache_root/remote/<hash>`` (benchmarks read data with local file APIs)."""
    if not is_uri(location):
        return Path(resolve(location))
    src = Storage(location)
    dest = cache_root / "remote" / hashlib.sha256(src.uri.encode()).hexdigest()[:16]
    if not (dest / ".complete").exists():
        dest.mkdir(parents=True, exist_ok=True)
        _copy_tree(src, dest)
        (dest / ".complete").write_text(src.uri)
    return dest


def _copy_tree(src: "Storage", dest: Path) -> None:
    import pyarrow.fs as pafs

    if not src.fs.get_file_info(src.path).type == pafs.FileType.Directory:
        raise DataError(f"{src.uri}: no such folder")
    pafs.copy_files(src.path, str(dest), source_filesystem=src.fs, destination_filesystem=pafs.LocalFileSystem())


@contextlib.contextmanager
def local_folders(locations: list[str | Path]) -> Iterator[list[Path]]:
    """Local folders to read ``locations`` from: a local path as it is; a storage URI (a run or suite directory
    on S3, …) copied fresh into a temporary folder, removed on exit (results change as runs resume, so no cache)."""
    with tempfile.TemporaryDirectory(prefix="llmrec-remote-") as tmp:
        out = []
        for i, loc in enumerate(locations):
            if not is_uri(loc):
                out.append(Path(resolve(loc)))
                continue
            src = Storage(loc)
            dest = Path(tmp) / str(i) / src.name
            dest.mkdir(parents=True)
            _copy_tree(src, dest)
            out.append(dest)
        yield out

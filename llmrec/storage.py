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

Failures are one line naming the location (:class:`StorageError`), never a filesystem library's
traceback, and never a hang: S3 connections and requests time out and GCS stops retrying after
``$LLMREC_STORAGE_TIMEOUT_S`` seconds (default 10), with a few attempts each.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

from llmrec import settings
from llmrec.errors import ConfigError, DataError

log = logging.getLogger(__name__)

S3_ATTEMPTS = 3  # tries of one S3 request (connect or read timed out, 5xx) before it fails


class StorageError(DataError):
    """A storage location cannot be reached, read or written: one line naming it (and why)."""


def one_line(text, limit: int = 400) -> str:
    """An error text on one line, shortened (filesystem libraries' messages run long)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_os_error(e: OSError) -> str:
    """What went wrong, in words, for the errors a full, read-only or misnamed location gives."""
    hints = {errno.ENOSPC: "no space left on the device; free some and re-run (finished samples are kept)",
             errno.EDQUOT: "disk quota exceeded; free some and re-run (finished samples are kept)",
             errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
             errno.EPERM: "operation not permitted", errno.ENAMETOOLONG: "file name too long",
             errno.ENOTDIR: "a path component is a file, not a folder", errno.EISDIR: "is a folder, not a file"}
    return hints.get(e.errno) or one_line(e.strerror or e)


@contextlib.contextmanager
def storage_errors(where: str, doing: str) -> Iterator[None]:
    """Turn a filesystem library's failure (pyarrow's OSError / ArrowException) into a :class:`StorageError`
    naming ``where``; a missing file stays ``FileNotFoundError`` for the caller to judge."""
    import pyarrow as pa

    try:
        yield
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as e:
        from llmrec.redact import redact_text

        why = describe_os_error(e) if isinstance(e, OSError) and e.errno else one_line(e)
        raise StorageError(f"{redact_text(where)}: cannot {doing}: {redact_text(why)}") from e


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


def _shown(text: str) -> str:
    """``text`` with the URLs in it redacted: a storage URI's query may carry credentials (``secret_key=``,
    ``session_token=``) and an error message quotes what it was given."""
    from llmrec.redact import redact_text

    return redact_text(text)


def _bounded_uri(uri: str) -> str:
    """A GCS URI with a retry time limit (pyarrow's default retries for minutes: without network, a hang)."""
    scheme = uri.split("://", 1)[0].lower()
    if scheme in ("gs", "gcs") and "retry_limit_seconds=" not in uri:
        return f"{uri}{'&' if '?' in uri else '?'}retry_limit_seconds={settings.storage_timeout_s():g}"
    return uri


def _bounded(fs):
    """An S3 filesystem with short connect / request timeouts and a few attempts (pyarrow's defaults
    take minutes on an endpoint that accepts connections and never answers); others unchanged."""
    import pyarrow.fs as pafs

    if not isinstance(fs, pafs.S3FileSystem):
        return fs
    rebuild, (kwargs,) = fs.__reduce__()
    t = settings.storage_timeout_s()
    return rebuild({**kwargs, "connect_timeout": t, "request_timeout": t,
                    "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=S3_ATTEMPTS)})


def _filesystem(uri: str):
    import pyarrow as pa
    import pyarrow.fs as pafs

    if not is_uri(uri):
        return pafs.LocalFileSystem(), uri
    try:
        fs, path = pafs.FileSystem.from_uri(_bounded_uri(uri))
        return _bounded(fs), path
    except pa.ArrowInvalid as e:  # not a pyarrow scheme: try fsspec (a pyarrow scheme's bad URI: say so)
        if "Unrecognized filesystem type" not in str(e):
            raise ConfigError(f"storage location {_shown(uri)!r}: {_shown(one_line(e))}") from e
    except (OSError, pa.ArrowException) as e:  # e.g. S3's bucket-region lookup failing
        raise StorageError(f"{_shown(uri)}: cannot open the storage location: {_shown(one_line(e))}") from e
    try:
        import fsspec

        protocol = uri.split("://", 1)[0]
        fs = fsspec.filesystem(protocol)
    except (ImportError, ValueError) as e:
        raise ConfigError(f"storage location {_shown(uri)!r}: no filesystem for this scheme ({_shown(str(e))}); use a local path, "
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
        with storage_errors(self.uri, "create the folder"):
            if self.local and os.path.isfile(self.path):
                raise NotADirectoryError(errno.ENOTDIR, "is a file", self.path)
            self.fs.create_dir(self.path, recursive=True)

    def write_bytes(self, name: str, data: bytes) -> None:
        """Atomically publish ``name`` (see the module docstring)."""
        with storage_errors(f"{self.uri}/{name}", "write"):
            self._write_bytes(name, data)

    def _write_bytes(self, name: str, data: bytes) -> None:
        if self.local:
            self.mkdir()
            tmp = self._p(f".{name}.{uuid.uuid4().hex[:8]}.tmp")
            try:
                with open(tmp, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self._p(name))
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)  # a disk-full write leaves no partial temporary file behind
                raise
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
            with storage_errors(f"{self.uri}/{name}", "read"), self.fs.open_input_stream(self._p(name)) as fh:
                return fh.read()
        except FileNotFoundError as e:
            raise DataError(f"{_shown(self.uri)}/{name} does not exist") from e

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode("utf-8")

    def exists(self, name: str) -> bool:
        import pyarrow.fs as pafs

        with storage_errors(f"{self.uri}/{name}", "look up"):
            return self.fs.get_file_info(self._p(name)).type == pafs.FileType.File

    def list(self, suffix: str = "") -> list[str]:
        """Names of the files directly in this directory ending with ``suffix``, sorted."""
        import pyarrow.fs as pafs

        with storage_errors(self.uri, "list"):
            infos = self.fs.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(suffix))

    def delete(self, name: str) -> None:
        try:
            with storage_errors(f"{self.uri}/{name}", "delete"):
                self.fs.delete_file(self._p(name))
        except FileNotFoundError:
            pass

    def check_writable(self) -> None:
        """Create the folder and write, read back and delete a small probe file there: a location that
        cannot hold the run fails now, in one line naming it, rather than after the work."""
        probe = f".llmrec-probe-{uuid.uuid4().hex[:8]}"
        self.mkdir()
        self.write_bytes(probe, b"ok")
        try:
            if self.read_bytes(probe) != b"ok":
                raise StorageError(f"{_shown(self.uri)}: a file written there reads back different")
        finally:
            self.delete(probe)


def materialize(location: str | Path, cache_root: Path) -> Path:
    """A local folder holding the files under ``location``: the path itself when local, else a copy in
    ``cache_root/remote/<hash>`` (benchmarks read data with local file APIs). The copy is kept only while it is a
    copy of what the location holds now: every call lists the location (names, sizes, modification times) and a
    listing that differs from the one the copy was made from (a file edited, added or removed) makes a new copy,
    so the run's data fingerprint is of the data as it is."""
    if not is_uri(location):
        return Path(resolve(location))
    src = Storage(location)
    dest = cache_root / "remote" / hashlib.sha256(src.uri.encode()).hexdigest()[:16]
    stamp = json.dumps(_listing(src), sort_keys=True)
    marker = dest / ".complete"
    try:
        if marker.read_text() == stamp:
            return dest
    except OSError:
        pass  # no copy yet, or an unfinished one
    if dest.exists():
        log.info("%s changed since it was copied to %s: copying it again", _shown(src.uri), dest)
    fresh = dest.with_name(f"{dest.name}.tmp-{uuid.uuid4().hex[:8]}")
    fresh.mkdir(parents=True)
    try:
        _copy_tree(src, fresh)
        (fresh / ".complete").write_text(stamp)
        old = dest.with_name(f"{dest.name}.old-{uuid.uuid4().hex[:8]}")
        if dest.exists():
            dest.rename(old)
        fresh.rename(dest)
    finally:  # an unfinished copy (a failed download) and the superseded one go
        shutil.rmtree(fresh, ignore_errors=True)
        for superseded in dest.parent.glob(f"{dest.name}.old-*"):
            shutil.rmtree(superseded, ignore_errors=True)
    return dest


def _listing(src: "Storage") -> list[list]:
    """``[relative path, size, modification time in ns]`` of every file under ``src`` (one recursive listing)."""
    import pyarrow.fs as pafs

    with storage_errors(src.uri, "list"):
        if src.fs.get_file_info(src.path).type != pafs.FileType.Directory:
            raise DataError(f"{_shown(src.uri)}: no such folder")
        infos = src.fs.get_file_info(pafs.FileSelector(src.path, recursive=True))
    root = src.path.rstrip("/") + "/"
    return sorted([i.path[len(root):] if i.path.startswith(root) else i.path, i.size, i.mtime_ns]
                  for i in infos if i.type == pafs.FileType.File)


def _copy_tree(src: "Storage", dest: Path) -> None:
    import pyarrow.fs as pafs

    with storage_errors(src.uri, "read"):
        if not src.fs.get_file_info(src.path).type == pafs.FileType.Directory:
            raise DataError(f"{_shown(src.uri)}: no such folder")
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

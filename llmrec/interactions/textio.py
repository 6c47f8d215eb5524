"""Low-level file reading for the readers: every error names the file and the line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import IO

import pandas as pd

from llmrec.errors import DataError


def require_file(path: Path, what: str) -> Path:
    """``path`` if it is a file, else a ``DataError`` saying which file of which dataset is missing."""
    if not path.is_file():
        raise DataError(f"{what}: file not found: {path}")
    return path


def open_text(path: Path, encoding: str = "utf-8") -> IO[str]:
    """Open a text file, transparently gunzipping ``*.gz``; universal newlines (CRLF ok)."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding, errors="strict")
    return open(path, encoding=encoding, errors="strict")


def read_delimited(
    path: Path,
    sep: str,
    names: list[str] | None = None,
    *,
    encoding: str = "utf-8",
    header: bool = False,
) -> pd.DataFrame:
    """Read a headerless (or one-header-line) delimited file into string columns.

    Each non-empty line must have exactly ``len(names)`` fields (or as many as the header);
    otherwise ``DataError`` names the file and line. The frame's index is the 1-based line.
    """
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        with open_text(path, encoding) as fh:
            for lineno, raw in enumerate(fh, start=1):
                line = raw.rstrip("\r\n")
                if not line.strip():
                    continue
                fields = line.split(sep)
                if names is None:
                    if not header:
                        raise ValueError("read_delimited needs names or header=True")
                    names = [f.strip() for f in fields]
                    continue
                if header and lineno == 1:
                    continue
                if len(fields) != len(names):
                    raise DataError(
                        f"{path} line {lineno}: expected {len(names)} fields separated by {sep!r}, "
                        f"got {len(fields)}: {line[:120]!r}"
                    )
                rows.append(fields)
                lines.append(lineno)
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not valid {encoding} text ({e})") from e
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: cannot read ({e})") from e
    frame = pd.DataFrame(rows, columns=names, dtype=object)
    frame.index = pd.Index(lines, name="line")
    return frame


def read_table(path: Path, sep: str | None = None, encoding: str = "utf-8") -> pd.DataFrame:
    """Read CSV(.gz) / TSV / parquet / JSON-lines / JSON-array into a frame indexed by source line.

    CSV lines count the header as line 1, so the first record is line 2; parquet and JSON
    report the 1-based record number.
    """
    name = path.name.lower()
    try:
        if name.endswith(".parquet"):
            frame = pd.read_parquet(path)
            frame.index = pd.RangeIndex(1, len(frame) + 1, name="line")
            return frame
        if name.endswith((".json", ".json.gz", ".jsonl", ".jsonl.gz")):
            return _read_json(path, encoding)
        frame = pd.read_csv(path, sep=sep or ",", dtype=str, keep_default_na=False, encoding=encoding)
    except (pd.errors.ParserError, ValueError, OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot parse ({e})") from e
    frame = frame.replace({"": None})
    frame.index = pd.RangeIndex(2, len(frame) + 2, name="line")
    return frame


def _read_json(path: Path, encoding: str) -> pd.DataFrame:
    records: list[dict] = []
    with open_text(path, encoding) as fh:
        text = fh.read()
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"{path} line {e.lineno}: invalid JSON ({e.msg})") from e
        records = [r for r in data]
    else:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DataError(f"{path} line {lineno}: invalid JSON ({e.msg})") from e
    bad = next((i for i, r in enumerate(records) if not isinstance(r, dict)), None)
    if bad is not None:
        raise DataError(f"{path} record {bad + 1}: expected a JSON object, got {type(records[bad]).__name__}")
    frame = pd.DataFrame.from_records(records)
    frame.index = pd.RangeIndex(1, len(frame) + 1, name="line")
    return frame


def rename_columns(frame: pd.DataFrame, mapping: dict[str, str], source: Path | str) -> pd.DataFrame:
    """Rename ``source column -> canonical`` given ``canonical -> source``; a missing source column fails."""
    missing = [src for src in mapping.values() if src not in frame.columns]
    if missing:
        raise DataError(f"{source}: column(s) {missing} not found; columns present: {list(frame.columns)}")
    return frame.rename(columns={src: dst for dst, src in mapping.items()})

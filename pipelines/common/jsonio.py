"""JSON-lines files: read with errors that name the file and line.

``read_predictions`` is the one reader of ``llmrec score``: every task declares its line schema as a
``PredictionLine`` model, so all tasks check types, finiteness, allowed values and repeated ids the
same way, and every error names the file and the line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, ClassVar, Iterator

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from llmrec.errors import DataError


def iter_jsonl(path: Path, what: str = "file", hint: str = "") -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line; a missing file, bad JSON or a non-object
    line raises ``DataError`` naming the file and the line. ``what``/``hint`` word the
    missing-file message (e.g. "candidates file", "write one with …")."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{what} not found: {path}" + (f" ({hint})" if hint else ""))
    for no, text in utf8_lines(path):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}: line {no} is not valid JSON: {e.msg}") from e
        if not isinstance(obj, dict):
            raise DataError(f"{path}: line {no} must be a JSON object, got {type(obj).__name__}")
        yield no, obj


def utf8_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file, read one line at a time (memory does not grow with the file); a bad
    byte raises ``DataError`` naming its offset and line."""
    offset = 0
    with open(path, "rb") as fh:
        for no, raw in enumerate(fh, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}: not UTF-8 text: byte 0x{raw[e.start]:02x} at offset {offset + e.start} "
                                f"(line {no}, {e.reason}); save the file as UTF-8") from None
            offset += len(raw)
            yield no, text.rstrip("\r\n")


def _id(value: Any) -> str | int:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError("an id must be a string or an integer")
    return value


Id = Annotated[Any, AfterValidator(_id)]  # a user, item or group id as files write it: "17" or 17


def same_id(value: Any) -> Any:
    """An id as compared across lines: ``17`` and ``"17"`` are one id (files write either)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class PredictionLine(BaseModel):
    """One line of a score task's predictions file. A task subclasses it with the fields its scoring
    reads: strict types (no ``"1"`` for 1, no ``true`` for 1), finite numbers only (no NaN/inf),
    ``Literal`` for closed sets of values. ``unique`` names the fields that identify a line: a second
    line with the same values is an error. Keys not declared are allowed (and passed on untouched)."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)
    unique: ClassVar[tuple[str, ...]] = ()


def describe_problems(e: ValidationError) -> str:
    """A line's validation errors in one sentence: ``'ranked'[1]: Input should be a valid integer (got 'x')``."""
    out = []
    for err in e.errors():
        msg = err["msg"].removeprefix("Value error, ")
        if not err["loc"]:  # a check across fields (a model validator)
            out.append(msg)
            continue
        head, *rest = err["loc"]
        where = f"'{head}'" + "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in rest)
        out.append(f"{where}: {msg} (got {err['input']!r})")
    return "; ".join(out)


def read_predictions(path: Path, schema: type[PredictionLine], what: str = "predictions file") -> list[dict]:
    """Every line of a JSON-lines file, checked against ``schema``; the lines are returned as read."""
    return list(iter_predictions(path, schema, what))


def iter_predictions(path: Path, schema: type[PredictionLine], what: str = "predictions file") -> Iterator[dict]:
    """``read_predictions`` one line at a time: each line is checked and yielded as it is read (only the
    identifying fields of the lines so far are kept, to refuse a repeated one); a file without lines raises
    ``DataError`` once it is read to its end."""
    required = [name for name, f in schema.model_fields.items() if f.is_required()]
    count = 0
    seen: dict[bytes, int] = {}
    for no, obj in iter_jsonl(path, what):
        missing = [k for k in required if k not in obj]
        if missing:
            raise DataError(f"{path}: line {no} lacks required key(s) {missing} (has {sorted(obj)})")
        try:
            schema.model_validate(obj)
        except ValidationError as e:
            raise DataError(f"{path}: line {no}: {describe_problems(e)}") from e
        if schema.unique:  # a 16-byte digest per line, not the values: flat in the values' size
            key = hashlib.blake2b(json.dumps([same_id(obj.get(k)) for k in schema.unique], sort_keys=True).encode(),
                                  digest_size=16).digest()
            if key in seen:
                ident = ", ".join(f"{k}={obj.get(k)!r}" for k in schema.unique)
                raise DataError(f"{path}: line {no}: {ident} already on line {seen[key]}; one line per "
                                f"{' + '.join(schema.unique)} (an id is one id whether written 1 or \"1\")")
            seen[key] = no
        count += 1
        yield obj
    if not count:
        raise DataError(f"{path}: no lines (an empty {what})")

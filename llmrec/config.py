"""YAML → validated pydantic config, with ``--set key=value`` overrides.

Every config model forbids unknown keys; errors name the dotted path of the key, what
was received and which keys are allowed. Sub-configs whose schema depends on a
registered name (``engine.type``, ``benchmark.name``) are validated against the
registered class, so a new engine or benchmark touches no file here.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
import types
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from llmrec.errors import ConfigError, read_utf8
from llmrec.redact import redact_text, redacted

M = TypeVar("M", bound=BaseModel)
NAME_MAX_BYTES = 255  # the longest file or folder name of common file systems (ext4, xfs, APFS, NTFS)


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, assignment is validated, and a boolean is not a number
    (``tokens: true`` is refused, not taken as 1)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name in cls.model_fields:
            kinds = _scalar_kinds(cls.model_fields[info.field_name].annotation)
            if bool not in kinds and kinds & {int, float}:
                raise ValueError(f"expected a number, got the boolean {str(value).lower()}")
        return value


def _scalar_kinds(annotation: Any) -> set:
    """The plain types an annotation admits (through Optional, unions and Annotated); ``Any`` admits bool."""
    if annotation is Any:
        return {bool}
    origin = get_origin(annotation)
    if origin is Annotated:
        return _scalar_kinds(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return set().union(*(_scalar_kinds(a) for a in get_args(annotation)))
    return {annotation} if isinstance(annotation, type) else set()


def _one_component(name: str) -> str:
    if name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        raise ValueError("must be a single folder/file name: no '/', '\\', '..' or absolute path")
    if len(name.encode("utf-8")) > NAME_MAX_BYTES:
        raise ValueError(f"is {len(name.encode('utf-8'))} bytes long; a folder or file name holds at most "
                         f"{NAME_MAX_BYTES}")
    return name


def _not_empty(value: str) -> str:
    if not str(value).strip():
        raise ValueError("must name a folder or a storage URI; it is empty (write '.' for the working directory)")
    return value


def _relative_inside(path: Path) -> Path:
    if path.is_absolute() or ".." in path.parts:
        raise ValueError("must be a relative path inside its folder: no '..' and not absolute")
    return path


# A user-given name that becomes one folder or file name (run names, labels): it cannot point
# anywhere else, so whatever the config says stays inside its parent folder.
PathName = Annotated[str, AfterValidator(_one_component)]
# A location (a folder or a storage URI) that must be given, never the empty string.
Location = Annotated[str, AfterValidator(_not_empty)]
# A user-given path relative to a configured folder, which must stay inside it.
InsidePath = Annotated[Path, AfterValidator(_relative_inside)]


def _allowed_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """Walk ``loc`` through nested models to list the keys allowed where the bad key was."""
    current: Any = model
    for part in loc[:-1]:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        ann = fields[part].annotation
        current = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        for arg in getattr(ann, "__args__", ()) or ():
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                current = arg
        if current is None:
            return []
    return sorted(getattr(current, "model_fields", {}) or {})


def format_validation_error(err: ValidationError, model: type[BaseModel], prefix: str = "") -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        path = ".".join(str(p) for p in ((prefix,) if prefix else ()) + loc)
        if e["type"] == "extra_forbidden":
            allowed = _allowed_keys(model, loc)
            lines.append(f"unknown key '{path}'. Allowed keys here: {', '.join(allowed)}")
        else:
            got = e.get("input")
            got_s = "" if isinstance(got, dict) else f" (got {redact_text(repr(got))})"  # no credentials echoed
            lines.append(f"'{path}': {e['msg']}{got_s}")
    return "Invalid configuration:\n  " + "\n  ".join(lines)


def validate(model: type[M], data: dict, prefix: str = "") -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, model, prefix)) from e


_INDEXED = re.compile(r"^(?P<name>[^\[\]]*)(?P<index>(?:\[\s*-?\d+\s*\])+)$")


def _key_parts(key: str) -> list[str]:
    """``benchmarks[0].execution.concurrency`` / ``benchmarks.0.execution.concurrency`` → the parts
    ``["benchmarks", "0", "execution", "concurrency"]`` (a list entry is addressed by its index)."""
    parts: list[str] = []
    for part in key.split("."):
        m = _INDEXED.match(part)
        if m is None:
            parts.append(part)
            continue
        if m["name"]:
            parts.append(m["name"])
        parts += re.findall(r"-?\d+", m["index"])
    return parts


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b=value`` → (["a","b"], parsed YAML value); ``a.0.b=value`` and ``a[0].b=value`` address entry 0 of
    the list ``a``."""
    if "=" not in text:
        raise ConfigError(f"--set expects key=value, got {text!r}")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not p for p in key.split(".")):
        raise ConfigError(f"--set expects key=value, got {text!r}")
    try:
        value = yaml.load(raw, Loader=BoundedLoader) if raw.strip() else ""
    except AliasError as e:
        raise ConfigError(f"--set {text!r}: {e.problem}") from e
    except yaml.YAMLError:
        value = raw
    return _key_parts(key), value


def _list_index(item: str, where: str, part: str, node: list) -> int:
    """The entry of list ``where`` that ``part`` addresses, or an error naming how to address one."""
    try:
        i = int(part)
    except ValueError:
        raise ConfigError(f"--set {item!r}: '{where}' is a list of {len(node)} entries; address an entry by its "
                          f"index, e.g. --set {where}.0.{part}=… (or {where}[0].{part}=…)") from None
    if not -len(node) <= i < len(node):
        have = f"indexes 0 to {len(node) - 1}" if node else "no entries"
        raise ConfigError(f"--set {item!r}: '{where}' has {len(node)} entries ({have}); to add one, give the "
                          f"whole list: --set {where}=[…]")
    return i


def apply_overrides(data: dict, overrides: list[str] | None) -> dict:
    """``--set`` overrides applied to a copy of ``data``. A dotted key walks mappings, and lists by index
    (``benchmarks.0.execution.concurrency=2`` or ``benchmarks[0].execution.concurrency=2``); a missing mapping
    on the way is created."""
    data = json.loads(json.dumps(data))  # deep copy of plain data
    for item in overrides or []:
        path, value = parse_override(item)
        node: Any = data
        for depth, part in enumerate(path):
            where = ".".join(path[:depth]) or "the config"
            last = depth == len(path) - 1
            if isinstance(node, list):
                i = _list_index(item, where, part, node)
                if last:
                    node[i] = value
                    break
                nxt = node[i]
                if nxt is None:
                    nxt = node[i] = {}
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                    break
                nxt = node.get(part)
                if nxt is None:
                    nxt = node[part] = {}
            else:
                raise ConfigError(f"--set {item!r}: '{where}' is {type(node).__name__} {node!r}, not a mapping "
                                  "or a list")
            node = nxt
    return data


def yaml_problem(path: Path, e: yaml.MarkedYAMLError) -> str:
    """``FILE, line L, column C: not valid YAML: <problem>`` and PyYAML's snippet with its caret."""
    mark = e.problem_mark or e.context_mark
    head = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
    what = e.problem or e.context
    if e.problem and e.context:
        what += f" ({e.context}" + (f" at line {e.context_mark.line + 1}" if e.context_mark else "") + ")"
    snippet = mark.get_snippet() if mark else None
    return f"{head}: not valid YAML: {what}" + (f"\n{snippet}" if snippet else "")


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping names one key twice (PyYAML keeps the last value without a word)."""


class AliasError(yaml.MarkedYAMLError):
    """An alias that refers to the node holding it (no finite value), or aliases that expand past ``MAX_VALUES``."""


MAX_VALUES = 100_000  # values a config may hold once its aliases are expanded (a real config holds a few hundred)


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses, before building anything, a document whose aliases make it infinite
    (``x: &r [*r]``) or huge (a "billion laughs": a kilobyte of nested aliases that expand to 10^9 values, which
    every consumer of plain data, a deep copy or JSON, would walk until killed)."""

    def construct_document(self, node):
        expanded_size(node)
        return super().construct_document(node)


def expanded_size(root, limit: int = MAX_VALUES) -> int:
    """The number of values the YAML node graph ``root`` holds once its aliases are expanded (an alias is the node
    it names, shared); raises :class:`AliasError` for a cycle or a total over ``limit``."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise AliasError(None, None, "an alias refers to a node that contains it (a recursive alias: "
                                         "no finite value)", node.start_mark)
        open_.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(n) for n in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        open_.discard(key)
        if total > limit:
            raise AliasError(None, None, f"its aliases expand to more than {limit:,} values (nested aliases "
                                         "that multiply, a \"billion laughs\"); write the values out or use "
                                         "fewer aliases", node.start_mark)
        sizes[key] = total
        return total

    return size(root)


class UniqueKeyLoader(BoundedLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping, naming it and its line."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<: *base``: its keys may be overridden here
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not key_node:
                raise DuplicateKeyError(f"first given at line {first.start_mark.line + 1}", None,
                                        f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | Path) -> dict:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"Config file not found: {p}")
    try:
        data = yaml.load(read_utf8(p), Loader=UniqueKeyLoader) or {}
    except yaml.MarkedYAMLError as e:
        raise ConfigError(yaml_problem(p, e)) from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping, got {type(data).__name__}")
    return data


def load_config(model: type[M], path: str | Path, overrides: list[str] | None = None) -> M:
    """Read YAML, apply ``--set`` overrides, validate against ``model``."""
    return validate(model, apply_overrides(read_yaml(path), overrides))


def dump_yaml(model: BaseModel) -> str:
    """The config as recorded (a run directory's ``RunDir.CONFIG``): URLs in it lose their credentials (``llmrec.redact``)."""
    return yaml.safe_dump(redacted(model.model_dump(mode="json")), sort_keys=False)


def fingerprint(obj: Any, length: int = 12) -> str:
    """Stable short hash of JSON-able data (sorted keys)."""
    blob = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def semantic_conflicts(now: dict, stored: dict) -> list[str]:
    """``key: stored → now`` for each result-determining key (``now``: a config's ``semantic()``) whose value
    differs in ``stored`` (the config stored results were produced under). A key only one side has (an option
    added or removed by an llmrec upgrade) is not compared, unless the other side holds a value where it has a
    mapping (``judge: null`` → a judge)."""
    now_flat = flatten(now)
    before = flatten({k: stored.get(k) for k in now})
    out: dict[str, tuple[str, str]] = {}
    for key in before.keys() | now_flat.keys():
        if key in before and key in now_flat:
            if before[key] != now_flat[key]:
                out[key] = (repr(before[key]), repr(now_flat[key]))
            continue
        parts = key.split(".")
        other = now_flat if key in before else before
        parent = next((p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in other), None)
        if parent is not None:
            value = repr(other[parent])
            out[parent] = (value, "a mapping") if other is before else ("a mapping", value)
    return [f"{k}: {a} → {b}" for k, (a, b) in sorted(out.items())]


class OutputBase(StrictModel):
    """The ``output:`` section of every run stack (``run``/``suite``, ``train``/``tune``, ``sft``): ``dir``, the
    parent of run directories, and ``run_name``, one folder name inside it. Each stack sets its default ``dir`` and
    adds its own keys."""

    dir: Location = Field("runs", description="where run directories (result store, metrics) go: a local folder "
                                         "(relative: to the driver's working directory) or a storage URI "
                                         "(s3://bucket/runs, gs://…)")
    run_name: PathName | None = Field(None, description="run directory name (one folder name inside output.dir); "
                                                        "default: derived from the config hash")

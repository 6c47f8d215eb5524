"""The ``llmrec score beyond-utility`` file contract: read and check P.jsonl and ITEMS.jsonl.

Every error names the file and the 1-based line, what was received and what is allowed, so a
baseline exporter or a hand-written predictions file can be fixed without reading code.
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmrec.errors import ConfigError, DataError
from llmrec.pipelines.common.jsonio import PredictionLine, describe_problems, iter_jsonl
from llmrec.pipelines.benchmarks.beyond_utility.metrics import METRIC_KEYS, Catalog, UserLine, compute


class ContractLine(PredictionLine):
    """One user's line of P.jsonl (``base_candidates``, when given, replaces ``candidates`` as B_u)."""

    unique = ("user_id",)
    user_id: str
    target: int = Field(ge=0)
    candidates: list[int]
    ranked: list[int]
    history_len: int = Field(ge=0)
    base_candidates: list[int] = Field(None, validate_default=False)  # absent: = candidates; never null


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def user_line(obj: dict, where: str) -> UserLine:
    """One P.jsonl object → UserLine; ``where`` ("FILE: line N") prefixes every error."""
    try:
        line = ContractLine.model_validate(obj)
    except ValidationError as e:
        raise DataError(f"{where}: {describe_problems(e)}") from e
    base = line.candidates if line.base_candidates is None else line.base_candidates
    return UserLine(line.user_id, line.target, tuple(line.candidates), tuple(line.ranked), line.history_len,
                    tuple(base))


def check_predictions(numbered, k: int, path: str, unique: bool = True) -> list[UserLine]:
    """(line number, object) pairs → UserLines, all with the same ranked length L >= k (one per user
    unless ``unique`` is False: pooled settings, e.g. accuracy by position over several prompts)."""
    users: list[UserLine] = []
    first_len = None
    seen: dict[str, int] = {}
    for no, obj in numbered:
        u = user_line(obj, f"{path}: line {no}")
        if unique and u.user_id in seen:
            raise DataError(f"{path}: line {no}: user_id {u.user_id!r} already on line {seen[u.user_id]}; "
                            "one line per evaluated user")
        seen[u.user_id] = no
        if first_len is None:
            first_len = (len(u.ranked), no)
        if len(u.ranked) != first_len[0]:
            raise DataError(f"{path}: line {no}: 'ranked' has {len(u.ranked)} ids but line {first_len[1]} has "
                            f"{first_len[0]}; every line must have the same length L >= k")
        if len(u.ranked) < k:
            raise DataError(f"{path}: line {no}: 'ranked' has {len(u.ranked)} ids, fewer than k={k}")
        users.append(u)
    if not users:
        raise DataError(f"{path}: no predictions")
    return users


def read_items(path: Path) -> Catalog:
    freq: dict[int, int] = {}
    cats: dict[int, tuple[str, ...]] = {}
    header = None
    for no, obj in iter_jsonl(path):
        where = f"{path}: line {no}"
        if "n_users" in obj:
            if header is not None:
                raise DataError(f"{where}: a second n_users line (the first is line {header[0]}); exactly one allowed")
            n, med = obj["n_users"], obj.get("history_len_median")
            if not _is_int(n) or n < 1:
                raise DataError(f"{where}: 'n_users' must be an integer >= 1, got {n!r}")
            if med is not None and (isinstance(med, bool) or not isinstance(med, (int, float))):
                raise DataError(f"{where}: 'history_len_median' must be a number, got {med!r}")
            header = (no, n, med)
            continue
        _item(obj, where, freq, cats)
    if header is None:
        raise DataError(f"{path}: no line with 'n_users' (one is required: {{\"n_users\": int}})")
    return Catalog(freq, cats, header[1], None if header[2] is None else float(header[2]))


def _item(obj: dict, where: str, freq: dict, cats: dict) -> None:
    for key in ("item_id", "train_freq"):
        if not _is_int(obj.get(key)) or obj[key] < 0:
            raise DataError(f"{where}: '{key}' must be an integer >= 0, got {obj.get(key)!r}")
    categories = obj.get("categories", [])
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise DataError(f"{where}: 'categories' must be a list of strings, got {categories!r}")
    item = obj["item_id"]
    if item in freq:
        raise DataError(f"{where}: item_id {item} is listed twice")
    if item == 0 and categories:
        raise DataError(f"{where}: item_id 0 (a hallucinated title) cannot have categories")
    freq[item] = obj["train_freq"]
    cats[item] = tuple(categories)


def to_json_metrics(metrics: dict[str, float]) -> dict:
    """NaN → the string "NaN" (M.json keeps undefined values visible, JSON stays strict)."""
    return {k: ("NaN" if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}


class ScoreOptions(BaseModel):
    """``llmrec score beyond-utility --items ITEMS.jsonl --k 5``."""

    model_config = ConfigDict(extra="forbid")
    items: str = Field(min_length=1, description="the item catalog ITEMS.jsonl: train_freq and categories per "
                                                 "item, plus one n_users line")
    k: int = Field(ge=1, description="the cut-off K of the top-K metrics, an integer >= 1")


def parse_k(value) -> int:
    try:
        k = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"beyond-utility needs --k (an integer >= 1), got {value!r}") from None
    if k < 1:
        raise ConfigError(f"--k must be >= 1, got {k}")
    return k


def score_task(lines: list[dict], options: dict) -> dict:
    """ScoreTask entry: ``lines`` as ``read_predictions`` checked them (one per user); options carry
    ``items`` (path), ``k`` and ``predictions`` (the file path, for messages)."""
    if not options.get("items"):
        raise ConfigError("beyond-utility needs --items ITEMS.jsonl (item train_freq/categories plus n_users)")
    k = parse_k(options.get("k"))
    users = check_predictions(enumerate(lines, 1), k, options.get("predictions") or "predictions")
    metrics = compute(users, read_items(Path(options["items"])), k)
    return to_json_metrics({key: metrics[key] for key in METRIC_KEYS})

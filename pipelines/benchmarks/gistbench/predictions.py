"""The predictions file of ``llmrec score gistbench`` (issue 6 contract), both directions.

One JSON line per predicted interest: ``model, user_id, interest, category_id`` (int, 0 =
other), ``dataset`` (a name with known signal flags), ``evidence`` (``[{object_id,
engagement_type}]`` that survived the judge filter), ``correct`` and ``backing`` (IS;
0 and 0 when IS was not run). A line whose ``interest`` is empty marks a user the model
was evaluated on but for whom it produced no interest (scored 0). Verification is
recomputed from ``evidence`` with the dataset's flags and the default thresholds.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmrec.errors import ConfigError, DataError
from llmrec.pipelines.benchmarks.gistbench import schema as S
from llmrec.pipelines.benchmarks.gistbench import scoring
from llmrec.pipelines.benchmarks.gistbench.config import Thresholds
from llmrec.pipelines.benchmarks.gistbench.verification import count_evidence, failure_modes, verify
from llmrec.pipelines.common.jsonio import Id, PredictionLine

Key = tuple[str, str]  # (dataset, user_id)


class Evidence(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    object_id: Id
    engagement_type: Literal[S.ENGAGEMENT_TYPES]


class ContractLine(PredictionLine):
    """One predicted interest of one user by one model (``interest`` empty or null: the user was
    evaluated and got no interest). A repeated interest is ``read_lines``'s check: it compares
    names with their spacing normalized."""

    model: str
    user_id: Id
    interest: str | None
    category_id: int
    dataset: str
    evidence: list[Evidence]
    correct: int = Field(ge=0)
    backing: int = Field(ge=0)
    chunk_size: int | None = None

    @model_validator(mode="after")
    def _correct_within_backing(self):
        if self.correct > self.backing:
            raise ValueError(f"correct ({self.correct}) exceeds backing ({self.backing})")
        return self


def _dataset(line: dict, where: str) -> S.DatasetSpec:
    name = S.ALIASES.get(str(line["dataset"]), str(line["dataset"]))
    if name not in S.KNOWN_FLAGS:
        raise DataError(f"{where}: dataset {line['dataset']!r} has no known signal flags. "
                        f"Allowed: {', '.join(S.KNOWN_FLAGS)}")
    return S.DATASETS[name]


def _evidence(line: dict) -> list[dict]:
    return [{S.OBJECT_ID: str(e["object_id"]), S.ENGAGEMENT_TYPE: e["engagement_type"]} for e in line["evidence"]]


def interest_record(name: str, category_id, evidence: list[dict], correct: int, backing: int,
                    signals, t: Thresholds) -> dict:
    """The scoring record of one interest, verification recomputed from its evidence."""
    counts = count_evidence(evidence)
    ok = verify(counts, signals, t)
    rec = {"interest": name, "category_id": category_id, "verified": ok, "correct": correct, "backing": backing}
    if not ok:
        rec.update(failure_modes(counts, signals, t))
    return rec


def read_lines(lines: list[dict], t: Thresholds | None = None) -> dict[str, dict[Key, list[dict]]]:
    """``model → (dataset, user) → interest records`` of lines that match ``ContractLine`` (a file
    is read by ``read_predictions``); every problem names the prediction's number."""
    t = t or Thresholds()
    out: dict[str, dict[Key, list[dict]]] = defaultdict(lambda: defaultdict(list))
    seen: set[tuple] = set()
    for n, line in enumerate(lines, 1):
        where = f"prediction {n}"
        spec = _dataset(line, where)
        key = (spec.name, str(line["user_id"]))
        user = out[str(line["model"])][key]
        name = " ".join(str(line["interest"] or "").split())
        if not name:
            continue  # the user was evaluated; no interest
        if (line["model"], key, name) in seen:
            raise DataError(f"{where}: interest {name!r} appears twice for model {line['model']!r}, user {key[1]!r}")
        seen.add((line["model"], key, name))
        user.append(interest_record(name, line["category_id"], _evidence(line), line["correct"], line["backing"],
                                    spec.signals, t))
    return {m: dict(users) for m, users in out.items()}


def _pick_model(models: list[str], wanted: str | None) -> str:
    if wanted is None:
        if len(models) == 1:
            return models[0]
        raise ConfigError(f"the predictions hold several models; pick one with --model. Available: {', '.join(models)}")
    if wanted not in models:
        raise ConfigError(f"model {wanted!r} is not in the predictions. Available: {', '.join(models)}")
    return wanted


def supplied_oracle(path: str, keys: list[Key]) -> dict[Key, set]:
    """A bundled-format oracle file, keyed like the predictions; its dataset must match theirs."""
    dataset, oracle = scoring.load_oracle(path)
    names = {k[0] for k in keys}
    if dataset is not None:
        want = S.ALIASES.get(dataset, dataset)
        if names - {want}:
            raise DataError(f"oracle {path} is for dataset {dataset!r}, the predictions hold {sorted(names)}")
    return {(d, u): oracle[u] for d, u in keys if u in oracle}


def score_predictions(lines: list[dict], options: dict) -> dict[str, float]:
    """``llmrec score gistbench``: metrics of ``options['model']`` (union oracle unless ``options['oracle']``)."""
    per_model = read_lines(lines)
    model = _pick_model(sorted(per_model), options.get("model"))
    users = per_model[model]
    if options.get("oracle"):
        oracle, supplied = supplied_oracle(options["oracle"], list(users)), True
    else:
        oracle = scoring.union_oracle((k, recs) for m in per_model.values() for k, recs in m.items())
        supplied = False
    out = scoring.metrics(users, oracle, supplied)
    out["n_models"] = float(len(per_model))
    return out


def lines_from_rows(rows: list[dict]) -> list[dict]:
    """A run's finished samples → prediction lines (what ``llmrec score`` reads back)."""
    out = []
    for r in rows:
        if r.get("status", "ok") != "ok" or "interests_scored" not in r:
            continue
        base = {"model": r.get("model_label", "subject"), "user_id": r["user_id"], "dataset": r["dataset"]}
        recs = r["interests_scored"]
        if not recs:
            out.append({**base, "interest": "", "category_id": 0, "evidence": [], "correct": 0, "backing": 0})
        for rec in recs:
            out.append({**base, "interest": rec["interest"], "category_id": rec["category_id"],
                        "evidence": rec["evidence"], "correct": rec["correct"], "backing": rec["backing"],
                        "chunk_size": r.get("chunk_size")})
    return out

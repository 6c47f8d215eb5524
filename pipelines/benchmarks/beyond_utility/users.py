"""User sampling as the paper: n test users whose statistic matches the full set (two-sample K-S).

Draw ``i`` is a seeded sample without replacement (seed ``users.seed + i``); the first draw
whose ``scipy.stats.ks_2samp`` p-value exceeds ``alpha`` is kept, and its seed and p-value are
recorded in every sample (``user_draw``) and the run's metrics.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.stats import ks_2samp

from llmrec.pipelines.common.jsonio import iter_jsonl
from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.beyond_utility.config import UserSampling


def read_values(path: Path, column: str = "value") -> dict[str, float]:
    """user → value from JSONL ``{"user_id", <column>}`` or a parquet table with ``user_id`` and ``column``
    (e.g. a `llmrec train` run's ``per_user_test.parquet`` with ``column: ndcg@10``)."""
    out: dict[str, float] = {}
    if not Path(path).is_file():
        raise DataError(f"users.values_path not found: {path}")
    if str(path).endswith(".parquet"):
        import pandas as pd

        frame = pd.read_parquet(path)
        if "user_id" not in frame.columns or column not in frame.columns:
            raise DataError(f"{path}: needs columns user_id and {column!r}; has {list(frame.columns)}")
        return dict(zip(frame["user_id"].astype(str), frame[column].astype(float)))
    for no, obj in iter_jsonl(path, "users.values_path"):
        try:
            out[str(obj["user_id"])] = float(obj[column])
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"{path}: line {no} must be {{\"user_id\": str, \"{column}\": number}} ({e})") from e
    return out


def sample_users(stat: dict[str, float], cfg: UserSampling) -> tuple[list[str], dict]:
    """(chosen users sorted, record {method, seed, p_value, draws, n_users, n_population})."""
    population = sorted(stat)
    n = cfg.n_users
    record = {"method": cfg.method, "statistic": cfg.statistic, "n_population": len(population)}
    if n is None or n >= len(population):
        return population, dict(record, n_users=len(population), seed=None, p_value=1.0, draws=0)
    if cfg.method == "first":
        return population[:n], dict(record, n_users=n, seed=None, p_value=None, draws=0)
    values = np.array([stat[u] for u in population])
    best = (-1.0, None, None)
    for draw in range(cfg.max_draws if cfg.method == "ks" else 1):
        seed = cfg.seed + draw
        pick = np.sort(np.random.default_rng(seed).choice(len(population), size=n, replace=False))
        p = float(ks_2samp(values[pick], values).pvalue)
        if p > best[0]:
            best = (p, seed, pick)
        if cfg.method == "random" or p > cfg.alpha:
            chosen = [population[i] for i in pick]
            return chosen, dict(record, n_users=n, seed=seed, p_value=p, draws=draw + 1)
    raise DataError(f"user sampling: no draw of {n} users in {cfg.max_draws} had K-S p > {cfg.alpha} "
                    f"(best p={best[0]:.4g} at seed {best[1]}); raise users.max_draws or n_users")

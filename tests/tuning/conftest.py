"""A tiny interaction CSV shared by the tuning tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest


@pytest.fixture()
def tiny_csv(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    rows = []
    for u in range(24):
        pool = range(15) if u % 2 == 0 else range(15, 30)
        for t, i in enumerate(rng.choice(list(pool), size=8, replace=False)):
            rows.append((f"u{u}", f"i{i}", 1.0, t))
    path = tmp_path / "data" / "inter.csv"
    path.parent.mkdir()
    pd.DataFrame(rows, columns=["uid", "iid", "r", "ts"]).to_csv(path, index=False)
    return path

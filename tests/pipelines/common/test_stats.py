"""Bootstrap confidence intervals (mean and median)."""

import numpy as np

from llmrec.pipelines.common.stats import bootstrap_ci, mean_with_ci

def test_bootstrap_ci_brackets_mean_and_is_seeded():
    x = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1] * 5
    lo, hi = bootstrap_ci(x)
    assert lo < np.mean(x) < hi
    assert 0.45 < lo < 0.7 and 0.6 < hi < 0.85
    assert bootstrap_ci(x) == (lo, hi)  # same seed, same interval
    assert bootstrap_ci([1, 1, 1]) == (1.0, 1.0)
    assert all(np.isnan(bootstrap_ci([])))
    m = mean_with_ci(x, "acc")
    assert set(m) == {"acc", "acc_ci_low", "acc_ci_high", "acc_ci_clusters"}
    assert m["acc_ci_clusters"] == len(x)  # each value is its own cluster


def test_bootstrap_ci_of_the_median():
    x = [1, 2, 3, 4, 100] * 4
    lo, hi = bootstrap_ci(x, statistic=np.median)
    assert lo <= np.median(x) <= hi and hi < 100
    assert bootstrap_ci(x, statistic=np.median) == (lo, hi)


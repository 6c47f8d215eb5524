"""The paired statistics of `llmrec compare` against scipy / statsmodels on constructed data: a known effect is
found and a null effect is not, at the stated rates over many seeds; the cluster bootstrap widens with
intra-cluster correlation; McNemar and Holm equal statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from llmrec.pipelines.common import paired

SEEDS = 200


def binary_pairs(rng, n: int, p_a: float, p_b: float, rho: float = 0.5):
    """Correlated binary pairs: with prob. rho B copies A, else B is drawn on its own."""
    a = rng.random(n) < p_a
    b = np.where(rng.random(n) < rho, a, rng.random(n) < (p_b - rho * p_a) / (1 - rho))
    return a.astype(float), b.astype(float)


def clustered(rng, k: int, m: int, effect: float, icc: float):
    """k clusters of m pairs; differences = effect + cluster effect (share icc of the variance) + noise."""
    cl = np.repeat(np.arange(k), m)
    d = effect + np.sqrt(icc) * rng.normal(size=k)[cl] + np.sqrt(1 - icc) * rng.normal(size=k * m)
    a = rng.normal(size=k * m)
    return a, a + d, cl


def test_mcnemar_equals_statsmodels_on_a_table():
    a = np.array([1] * 30 + [1] * 5 + [0] * 15 + [0] * 50, float)
    b = np.array([1] * 30 + [0] * 5 + [1] * 15 + [0] * 50, float)
    want = mcnemar([[30, 5], [15, 50]], exact=True).pvalue
    assert paired.mcnemar_exact(a, b) == pytest.approx(want)
    r = paired.paired_compare(a, b, np.arange(100), n_resamples=200)
    assert r.test == "mcnemar-exact" and r.p == pytest.approx(want) and r.diff == pytest.approx(0.10)


def test_holm_equals_statsmodels_and_skips_nan():
    p = [0.01, 0.04, 0.03, 0.20, 0.002]
    assert paired.holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))
    got = paired.holm([0.01, float("nan"), 0.04])
    assert np.isnan(got[1]) and got[0] == pytest.approx(0.02) and got[2] == pytest.approx(0.04)


def test_permutation_equals_scipy_paired_test_with_singleton_clusters():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=12), rng.normal(0.5, 1, size=12)
    want = stats.permutation_test((a, b), lambda x, y, axis: np.mean(y - x, axis=axis), vectorized=True,
                                  permutation_type="samples", n_resamples=10_000).pvalue  # exact: 2^12 < 10^4
    assert paired.cluster_permutation_p(a, b, np.arange(12), n_resamples=10_000) == pytest.approx(want)


def test_binary_null_is_rejected_at_most_at_alpha_and_an_effect_nearly_always():
    rng = np.random.default_rng(0)
    null = effect = 0
    for seed in range(SEEDS):
        a, b = binary_pairs(rng, 200, 0.6, 0.6)
        null += paired.paired_compare(a, b, np.arange(200), n_resamples=200, seed=seed).p < 0.05
        a, b = binary_pairs(rng, 200, 0.5, 0.7)
        effect += paired.paired_compare(a, b, np.arange(200), n_resamples=200, seed=seed).p < 0.05
    assert null / SEEDS <= 0.08, null
    assert effect / SEEDS >= 0.90, effect


def test_clustered_permutation_test_and_bootstrap_ci_hold_their_rates():
    """Continuous differences in 30 clusters of 5 with ICC 0.5: the cluster-level test and CI keep
    their 5% error under the null and find a clear effect."""
    rng = np.random.default_rng(1)
    p_null = p_eff = ci_null_misses = ci_eff_excludes = 0
    for seed in range(SEEDS):
        a, b, cl = clustered(rng, 30, 5, 0.0, 0.5)
        r = paired.paired_compare(a, b, cl, n_resamples=400, n_permutations=400, seed=seed)
        assert r.test == "permutation-cluster" and r.n_clusters == 30
        p_null += r.p < 0.05
        ci_null_misses += not (r.ci_low <= 0 <= r.ci_high)
        a, b, cl = clustered(rng, 30, 5, 0.6, 0.5)
        r = paired.paired_compare(a, b, cl, n_resamples=400, n_permutations=400, seed=seed)
        p_eff += r.p < 0.05
        ci_eff_excludes += r.ci_low > 0
    assert p_null / SEEDS <= 0.08 and ci_null_misses / SEEDS <= 0.10, (p_null, ci_null_misses)
    assert p_eff / SEEDS >= 0.90 and ci_eff_excludes / SEEDS >= 0.90, (p_eff, ci_eff_excludes)


def test_treating_clustered_pairs_as_independent_would_reject_the_null_far_too_often():
    """Why clusters matter: the same null data with every pair its own cluster (the naive test) rejects
    well above 5%, the cluster test does not."""
    rng = np.random.default_rng(2)
    naive = clustered_rejects = 0
    for seed in range(100):
        a, b, cl = clustered(rng, 20, 10, 0.0, 0.6)
        naive += paired.cluster_permutation_p(a, b, np.arange(a.size), n_resamples=400, seed=seed) < 0.05
        clustered_rejects += paired.cluster_permutation_p(a, b, cl, n_resamples=400, seed=seed) < 0.05
    assert naive >= 25 and clustered_rejects <= 10, (naive, clustered_rejects)


def test_cluster_bootstrap_ci_widens_with_intra_cluster_correlation():
    rng = np.random.default_rng(4)
    ratios = []
    for icc in (0.0, 0.3, 0.8):
        a, b, cl = clustered(rng, 40, 10, 0.0, icc)
        lo, hi = paired.cluster_bootstrap_ci(a, b, cl, n_resamples=1000)
        nlo, nhi = paired.cluster_bootstrap_ci(a, b, np.arange(a.size), n_resamples=1000)
        ratios.append((hi - lo) / (nhi - nlo))
    assert ratios[0] == pytest.approx(1, abs=0.25)  # no correlation: same width as the naive CI
    assert ratios[0] < ratios[1] < ratios[2] and ratios[2] > 2, ratios  # design effect sqrt(1+(m-1)icc) ≈ 2.9


def test_naive_bootstrap_matches_scipy_bootstrap_of_the_mean_difference():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=300), rng.normal(0.2, 1, size=300)
    lo, hi = paired.cluster_bootstrap_ci(a, b, np.arange(300), n_resamples=4000)
    ref = stats.bootstrap((b - a,), np.mean, method="percentile", n_resamples=4000,
                          random_state=np.random.default_rng(0)).confidence_interval
    assert lo == pytest.approx(ref.low, abs=0.02) and hi == pytest.approx(ref.high, abs=0.02)


def test_median_metrics_compare_medians_by_cluster():
    rng = np.random.default_rng(6)
    a, b, cl = clustered(rng, 25, 4, 1.0, 0.3)
    r = paired.paired_compare(a, b, cl, "median", n_resamples=300, n_permutations=300)
    assert r.diff == pytest.approx(np.median(b) - np.median(a)) and r.test == "permutation-cluster"
    assert r.ci_low > 0 and r.p < 0.01
    same = paired.paired_compare(a, a, cl, "median", n_resamples=100)
    assert same.diff == 0 and same.p == 1.0 and same.ci_low == same.ci_high == 0


def test_empty_input_gives_nan_not_an_error():
    r = paired.paired_compare([], [], [])
    assert r.n_pairs == 0 and r.test == "none" and np.isnan(r.p)


def test_group_difference_is_the_difference_of_means_with_a_clustered_ci():
    rng = np.random.default_rng(1)
    flags = rng.random(400) < 0.5
    values = np.where(flags, rng.random(400) < 0.7, rng.random(400) < 0.3).astype(float)
    clusters = [f"u{i // 2}" for i in range(400)]
    g = paired.group_difference(values, flags, clusters)
    assert (g.n_in, g.n_out, g.n_clusters) == (int(flags.sum()), int((~flags).sum()), 200)
    assert g.diff == pytest.approx(values[flags].mean() - values[~flags].mean())
    assert 0.2 < g.ci_low < g.diff < g.ci_high < 0.5
    # a Welch interval on the same data is of the same width (the clusters of two carry little correlation here)
    welch = stats.ttest_ind(values[flags], values[~flags], equal_var=False).confidence_interval()
    assert (g.ci_high - g.ci_low) == pytest.approx(welch.high - welch.low, rel=0.25)


def test_group_difference_with_one_side_empty_is_nan_not_a_number_that_looks_sure():
    g = paired.group_difference([1.0, 0.0], [True, True], ["a", "b"])
    assert (g.n_in, g.n_out) == (2, 0) and np.isnan(g.diff) and np.isnan(g.ci_low) and np.isnan(g.ci_high)
    # one cluster: the difference, a zero-width interval
    g = paired.group_difference([1.0, 0.0], [True, False], ["a", "a"])
    assert g.diff == 1.0 and g.ci_low == g.ci_high == 1.0

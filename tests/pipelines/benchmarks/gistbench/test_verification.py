"""The verification predicate: every branch, negative limits, dataset flags, thresholds, closed loop."""

from __future__ import annotations

import pytest

from llmrec.pipelines.benchmarks.gistbench import schema as S
from llmrec.pipelines.benchmarks.gistbench.config import Thresholds
from llmrec.pipelines.benchmarks.gistbench.prompts import extraction_instructions
from llmrec.pipelines.benchmarks.gistbench.verification import count_evidence, evidence_for, failure_modes, verify

SYN = S.DATASETS["synthetic"].signals      # exp+, imp+, imp−
MUSIC = S.DATASETS["amazon_music"].signals  # exp+, imp+, exp−
MIND = S.DATASETS["mind"].signals          # exp+, imp−
T = Thresholds()


def c(exp_pos=0, imp_pos=0, imp_neg=0, exp_neg=0) -> dict[str, int]:
    return {S.EXP_POS: exp_pos, S.IMP_POS: imp_pos, S.IMP_NEG: imp_neg, S.EXP_NEG: exp_neg}


@pytest.mark.parametrize("counts,expected", [
    (c(imp_pos=3), True),              # imp+ ≥ 3
    (c(imp_pos=2), False),
    (c(exp_pos=2), True),              # exp+ ≥ 2
    (c(exp_pos=1), False),
    (c(exp_pos=1, imp_pos=2), True),   # hybrid
    (c(exp_pos=1, imp_pos=1), False),
    (c(), False),                      # no evidence
    (c(exp_pos=2, imp_neg=3), True),   # imp− ≤ 3 tolerated
    (c(exp_pos=5, imp_neg=4), False),  # imp− > 3
    (c(exp_pos=5, exp_neg=9), True),   # synthetic has no exp−: not checked
])
def test_synthetic_branches(counts, expected):
    assert verify(counts, SYN, T) is expected


def test_explicit_negative_limit_where_the_dataset_has_it():
    assert verify(c(exp_pos=2, exp_neg=2), MUSIC, T) is True
    assert verify(c(exp_pos=2, exp_neg=3), MUSIC, T) is False
    assert verify(c(exp_pos=2, imp_neg=9), MUSIC, T) is True  # no imp− in this dataset


def test_rules_need_every_type_they_name():
    # MIND has no implicit positives: only "exp+ ≥ 2" can verify
    assert verify(c(imp_pos=5), MIND, T) is False
    assert verify(c(exp_pos=1, imp_pos=2), MIND, T) is False
    assert verify(c(exp_pos=2), MIND, T) is True


def test_thresholds_are_configurable():
    strict = Thresholds(exp_pos_min=3, imp_pos_min=4, hybrid_imp_pos_min=3, imp_neg_max=0)
    assert verify(c(exp_pos=2), SYN, strict) is False
    assert verify(c(exp_pos=1, imp_pos=2), SYN, strict) is False
    assert verify(c(exp_pos=1, imp_pos=3), SYN, strict) is True
    assert verify(c(exp_pos=3, imp_neg=1), SYN, strict) is False


def test_unique_objects_per_type():
    types = {"a": [S.EXP_POS], "b": [S.EXP_POS, S.IMP_NEG], "c": [S.IMP_POS]}
    ev = evidence_for(["a", "a", "b", "zz"], types)  # repeats counted once; unknown ids ignored
    assert count_evidence(ev) == c(exp_pos=2, imp_neg=1)


def test_failure_modes_only_for_types_the_dataset_has():
    assert failure_modes(c(exp_pos=1, imp_neg=4), SYN, T) == {
        "insufficient_imp_pos": True, "insufficient_exp_pos": True, "excessive_neg": True}
    assert failure_modes(c(exp_pos=1), MIND, T)["insufficient_imp_pos"] is False


def test_closed_loop_prompt_states_the_same_rules():
    syn = extraction_instructions("videos", SYN, T)
    assert "at least 3 implicit_positive engagements" in syn
    assert "at least 2 explicit_positive engagements" in syn
    assert "at least 1 explicit_positive engagement and 2 implicit_positive engagements" in syn
    assert "not have more than 3 implicit_negative engagements" in syn
    assert "explicit_negative" not in syn and "videoss" not in syn
    mind = extraction_instructions("news articles", MIND, T)
    assert "implicit_positive" not in mind and "at least 2 explicit_positive" in mind
    music = extraction_instructions("songs", MUSIC, Thresholds(exp_neg_max=1))
    assert "not have more than 1 explicit_negative engagement." in music

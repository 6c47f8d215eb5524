"""The Benchmark contract: what a benchmark supplies to the generic runner, by capability.

The core (``pipelines/core.py``, six members): ``name``, ``config_cls``, ``payload``, and (a) ``build_samples`` —
data → samples (JSON-able dicts with a stable ``sample_id``); (b)+(c) ``stages`` — ordered LLM stages, each
rendering a request from a sample and folding the engine's result back into it (multi-stage tasks chain them);
(d) ``score`` — per-sample score fields.

Opt-in capabilities (``pipelines/capabilities.py``), each a mixin carrying its defaults: ``Aggregates`` (rows →
metrics, ``group_keys``), ``HasScoreTasks`` (``llmrec score``), ``Presents`` (headline metrics, protocol keys,
plots, leaderboard labels), ``Judged`` (judge stages and what is read of them), ``HasBaselines``, ``Explains``
(one sample as people read it), ``PairedOutcomes`` (what ``llmrec compare`` pairs), ``HasAssets``, ``HasData``,
``HasCli``, ``HasTransient``. Callers reach a capability's members through the accessors of
``pipelines.capabilities``, so a benchmark without it gets the default. ``pipelines/conformance.py`` checks
all of it at registration. All plain functions: they run without Ray.

This module re-exports the contract's names, so benchmarks and the runner import them from one place.
"""

from __future__ import annotations

from llmrec.pipelines.capabilities import (CAPABILITIES, DRILLDOWN_FIELDS, Aggregates, Explains, HasAssets,
                                           HasBaselines, HasCli, HasData, HasScoreTasks, HasTransient, Judged,
                                           PairedOutcomes, Presents, outcomes_from_fields, setting_label, setting_of)
from llmrec.pipelines.conformance import (check_benchmark, check_stages, judge_stage_names, protocol_record,
                                          record_schema, stage_problems)
from llmrec.pipelines.core import Benchmark
from llmrec.pipelines.explanation import (Explanation, Verdict, as_words, choice_verdict, failed_explanation,
                                          last_output)
from llmrec.pipelines.parts import (UNREADABLE, BenchmarkConfig, DataFile, DataManifest, JudgeDecision, LLMStage,
                                    LoopStage, Outcome, Ranker, RankingBaselines, Sample, Stage, attach_assets,
                                    sample_assets)
from llmrec.pipelines.record import ASSETS_KEY, Payload
from llmrec.pipelines.score_task import ScoreTask, prediction_lines

__all__ = ["ASSETS_KEY", "CAPABILITIES", "DRILLDOWN_FIELDS", "UNREADABLE", "Aggregates", "Benchmark",
           "BenchmarkConfig", "DataFile", "DataManifest", "Explains", "Explanation", "HasAssets", "HasBaselines",
           "HasCli", "HasData", "HasScoreTasks", "HasTransient", "JudgeDecision", "Judged", "LLMStage", "LoopStage",
           "Outcome", "PairedOutcomes", "Payload", "Presents", "Ranker", "RankingBaselines", "Sample", "ScoreTask",
           "Stage", "Verdict", "as_words", "attach_assets", "check_benchmark", "check_stages", "choice_verdict",
           "failed_explanation", "judge_stage_names", "last_output", "outcomes_from_fields", "prediction_lines",
           "protocol_record", "record_schema", "sample_assets", "setting_label", "setting_of", "stage_problems"]

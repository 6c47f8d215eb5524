"""Which figures are drawn: one with no data or a single x value is left out with one line saying why (logged
once, recorded beside the figures and shown by the report); a suite report overlays every subject per metric."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from llmrec.pipelines.benchmarks.lrworld.plots import all_plots, factor_radar
from llmrec.pipelines.benchmarks.prefeval.plots import accuracy_by_turns, run_plots
from llmrec.pipelines.common.plotting import overlay, read_left_out, why_left_out
from llmrec.pipelines.results.report_plots import overlays, run_figures
from llmrec.pipelines.results.stored import StoredRun
from llmrec.rundir import RunDir


def test_why_left_out_names_no_data_and_a_single_x():
    assert why_left_out({"a": {}, "b": {2: math.nan}}) == "no data"
    assert why_left_out({"a": {2: 0.5}, "b": {2: 0.7}}, "turns") == "one turns value (2): nothing to draw a line through"
    assert why_left_out({"a": {2: 0.5}, "b": {10: 0.7}}, "turns") is None
    assert why_left_out({"a": [0.5]}, line=False) is None  # points, not a line: one value is a figure


def _prefeval_rows(turns: list[int]) -> list[dict]:
    return [{"status": "ok", "correct": i % 2 == 0, "form": "mcq", "method": "zero-shot", "turns": t,
             "position": "start", "extra_prefs": 0, "conflict": False} for i, t in enumerate(turns)]


def test_a_line_over_one_x_value_is_left_out_once_and_recorded(tmp_path, caplog):
    from llmrec.pipelines.common import plotting

    plotting._logged.clear()  # once per process: another test may have left this figure out already
    caplog.set_level(logging.INFO, logger="llmrec.pipelines.common.plotting")
    path = tmp_path / "plots" / "accuracy_by_turns.png"
    assert accuracy_by_turns(_prefeval_rows([2, 2, 2]), path) is None
    assert accuracy_by_turns(_prefeval_rows([2, 2]), path) is None
    assert not path.exists()
    said = [r.getMessage() for r in caplog.records if "accuracy_by_turns.png" in r.getMessage()]
    assert said == ["plot accuracy_by_turns.png left out: one turns value (2): nothing to draw a line through"]
    assert read_left_out(tmp_path / "plots") == {"accuracy_by_turns.png": said[0].split(": ", 1)[1]}
    assert (tmp_path / "plots" / RunDir.PLOTS_LEFT_OUT).is_file()
    # two turn counts: drawn
    made = run_plots("mcq", _prefeval_rows([2, 10, 2, 10]), tmp_path / "two")
    assert [p.name for p in made] == ["accuracy_by_turns.png"] and made[0].stat().st_size > 5000


def test_lrworld_radar_and_bars_without_data_are_left_out(tmp_path):
    # one factor scored, the others absent or NaN: no radar (it would draw a missing value as a measured 0)
    m = {"base/factor/genre/accuracy": 0.5, "base/factor/year/accuracy": math.nan}
    assert factor_radar({"this run": m}, tmp_path / "r.png") is None
    assert "radar needs 3" in read_left_out(tmp_path)["r.png"]
    assert all_plots({"this run": {}}, tmp_path / "empty") == []
    assert set(read_left_out(tmp_path / "empty")) == {"lrworld_factors.png", "lrworld_radar.png"}


def _entry(subject: str, entry: str, metrics: dict, run_dir: Path) -> StoredRun:
    return StoredRun.held(run_dir, subject, "prefeval", entry, listed_headline=("accuracy", "failed"),
                          metrics=metrics, config={})


def test_suite_report_overlays_every_subject_per_metric(tmp_path):
    run = tmp_path / "a" / "prefeval"
    (run / "plots").mkdir(parents=True)
    (run / "plots" / RunDir.PLOTS_LEFT_OUT).write_text(json.dumps({"accuracy_by_turns.png": "one turns value (2)"}))
    entries = [_entry("gemma", "prefeval", {"accuracy": 0.4, "accuracy_ci_low": 0.2, "accuracy_ci_high": 0.6,
                                            "failed": 0}, run),
               _entry("gemma-grammar", "prefeval", {"accuracy": 0.6, "failed": 1}, run),
               _entry("gemma", "lrworld", {"accuracy": math.nan}, run),
               _entry("gemma-grammar", "lrworld", {}, run)]
    groups = overlays(entries)
    assert [g.title for g in groups] == ["prefeval: every subject", "lrworld: every subject"]
    # one figure per non-count headline metric (failed is a count), both subjects on it
    assert [f["name"] for f in groups[0].figures] == ["prefeval · accuracy"]
    assert groups[0].figures[0]["uri"].startswith("data:image/png;base64,")
    assert groups[1].figures == [] and groups[1].left_out == ["accuracy: no data"]
    assert overlays(entries[:1]) == []  # one subject: its run's figures say it all
    assert run_figures("gemma · prefeval", StoredRun.held(run, "gemma", "prefeval")).left_out == ["accuracy_by_turns.png: one turns value (2)"]


def test_overlay_draws_lines_over_a_setting(tmp_path):
    series = {"a": {2: (0.5, 0.4, 0.6), 10: (0.3, 0.2, 0.4)}, "b": {2: (0.6, math.nan, math.nan)}}
    assert overlay(series, tmp_path / "x.png", metric="accuracy", x_name="turns").stat().st_size > 5000
    assert overlay({"a": {2: (0.5, 0.4, 0.6)}}, tmp_path / "y.png", metric="accuracy", x_name="turns") is None

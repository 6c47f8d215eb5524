"""`llmrec prefeval ...`: benchmark-specific verbs (mounted by the llmrec CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from llmrec.cli_options import data_dir_option
from llmrec.rundir import RunDir, dumps_json, refuse_inside_runs

app = typer.Typer(no_args_is_help=True, help="PrefEval extras: SFT data export, MCQ-vs-generation comparison.")


@app.command("export-sft")
def export_sft_cmd(
    run: list[Path] = typer.Option(..., "--run", help="Run directory of a generation run (reminder, explicit, 0 turns). Repeatable."),
    out: Path = typer.Option(Path("sft"), "--out", help="Output folder for train.jsonl and test.jsonl."),
    data_dir: Optional[Path] = data_dir_option(),
    turns: list[int] = typer.Option([0, 5, 10], "--turns", help="Inserted inter-turn pairs per record. Repeatable."),
    test_topic: list[str] = typer.Option([], "--test-topic", help="Held-out topic (repeatable; default: the reference's 4)."),
) -> None:
    """Write the supervised set of the paper: reminder-method answers with 0/5/10 inserted turns, 80/20 topic split."""
    from llmrec.pipelines.common.datasets import resolve_data_dir
    from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
    from llmrec.pipelines.benchmarks.prefeval.sft import REFERENCE_TEST_TOPICS, export_sft

    refuse_inside_runs(out, "--out")
    root = resolve_data_dir(data_dir, BENCHMARK.data)
    counts = export_sft(run, root, out, tuple(turns), tuple(test_topic) or REFERENCE_TEST_TOPICS)
    typer.echo(f"wrote {counts['train']} train and {counts['test']} test records to {out}")


@app.command("compare")
def compare_cmd(
    mcq: list[Path] = typer.Option(..., "--mcq", help=f"MCQ run directory (or its {RunDir.METRICS}). Repeatable."),
    gen: list[Path] = typer.Option(..., "--gen", help=f"Generation run directory (or its {RunDir.METRICS}). Repeatable."),
    plot: Path = typer.Option(Path("mcq_vs_gen.png"), "--plot", help="Scatter plot to write."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the points and Pearson r as JSON here."),
) -> None:
    """Pearson r between MCQ and generation accuracy per (model, form, method, turns), with a scatter plot."""
    from llmrec.paths import refuse_overwriting_inputs
    from llmrec.pipelines.benchmarks.prefeval.compare import compare

    for flag, target in (("--out", out), ("--plot", plot)):
        refuse_overwriting_inputs(target, [*mcq, *gen], flag)
    result = compare(mcq, gen, plot)
    if out is not None:
        out.write_text(dumps_json(result) + "\n")
    typer.echo(f"{result['n']} settings, Pearson r = {result['pearson_r']:.3f}; plot: {result['plot']}")

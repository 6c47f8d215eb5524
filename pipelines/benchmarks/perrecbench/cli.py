"""`llmrec perrecbench ...`: benchmark-specific verbs (mounted by the llmrec CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from llmrec.cli_options import data_dir_option

app = typer.Typer(no_args_is_help=True, help="PerRecBench extras: SFT data export.")


@app.callback()
def _group() -> None:
    """PerRecBench extras (a group, so verbs are named even while there is one)."""


@app.command("export-sft")
def export_sft_cmd(
    config: Path = typer.Argument(..., help="Run config (YAML) of the evaluation; its `benchmark:` section is used."),
    out: Path = typer.Option(Path("sft/perrecbench"), "--out", help="Output folder (point/ pair/ list/ mixed/ "
                             "with train.jsonl, valid.jsonl; manifest.json)."),
    per_level: int = typer.Option(50, "--per-level", min=1, help="Training query items (groups) per level."),
    valid_fraction: float = typer.Option(0.1, "--valid-fraction", help="Share of training query items kept "
                                         "for the validation loss."),
    shared_users: bool = typer.Option(False, "--shared-users", help="Allow evaluation users in training groups "
                                      "(query items stay disjoint). Default: users are disjoint too."),
    data_dir: Optional[Path] = data_dir_option(),
) -> None:
    """Write SFT data from user groups disjoint from the evaluation groups of CONFIG, rendered with the
    evaluation's own prompts and the gold answers as targets, per format (point/pair/list) and mixed.

    Example: llmrec perrecbench export-sft configs/sft_perrecbench_eval.yaml --out sft/perrecbench --per-level 40
    """
    from llmrec.config import read_yaml, validate
    from llmrec.pipelines.benchmarks.perrecbench.config import PerRecBenchConfig
    from llmrec.pipelines.benchmarks.perrecbench.sft import export_sft
    from llmrec.pipelines.common.datasets import resolve_data_dir
    from llmrec.rundir import refuse_inside_runs

    refuse_inside_runs(out, "--out")
    raw = read_yaml(config)
    cfg = validate(PerRecBenchConfig, raw.get("benchmark") or {}, "benchmark")
    run_dir = (raw.get("data") or {}).get("dir")
    root = resolve_data_dir(data_dir or (Path(run_dir) if run_dir else None), None)
    manifest = export_sft(cfg, root, out, per_level, valid_fraction, not shared_users)
    counts = ", ".join(f"{k}={v}" for k, v in manifest["counts"].items())
    typer.echo(f"wrote {counts} to {out} (evaluation: {len(manifest['eval_groups'])} groups avoided)")

"""`llmrec beyond_utility ...`: export the candidates and item files without calling any model."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from llmrec.cli_options import data_dir_option

app = typer.Typer(no_args_is_help=True, help="Beyond Utility extras: export the candidates baselines rank.")


@app.command("candidates")
def candidates_cmd(
    config: Path = typer.Argument(..., help="A run config with a `benchmark: {name: beyond_utility, ...}` section."),
    out: Path = typer.Option(Path("runs/beyond_utility_candidates"), "--out", help="Folder for candidates.jsonl "
                             "and items.jsonl."),
    set_: list[str] = typer.Option([], "--set", help="Override a key, e.g. --set benchmark.users.n_users=50."),
    data_dir: Optional[Path] = data_dir_option(),
) -> None:
    """Write the sampled users' candidates (target + negatives, as every LLM sees them) and ITEMS.jsonl.

    The same files an LLM run writes into its run directory; `llmrec baselines rank` ranks them.
    Example: llmrec beyond_utility candidates configs/beyond_utility_demo.yaml --out runs/bu-cands
    """
    from llmrec.config import apply_overrides, read_yaml, validate
    from llmrec.pipelines.benchmarks.beyond_utility import BENCHMARK, plots
    from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig
    from llmrec.pipelines.common.datasets import resolve_data_dir
    from llmrec.rundir import refuse_inside_runs

    refuse_inside_runs(out, "--out")
    raw = apply_overrides(read_yaml(config), list(set_))
    cfg = validate(BeyondUtilityConfig, dict(raw.get("benchmark") or {}), "benchmark")
    root = resolve_data_dir(data_dir or (raw.get("data") or {}).get("dir"), None)
    samples = BENCHMARK.build_samples(cfg, Path(root))
    assets = BENCHMARK.assets(cfg, Path(root))
    cands = plots.write_candidates(samples, out / "candidates.jsonl", assets)
    items = assets["dataset"].write_items(out / "items.jsonl")
    typer.echo(f"wrote {cands} ({len({s['user_id'] for s in samples})} users) and {items}")

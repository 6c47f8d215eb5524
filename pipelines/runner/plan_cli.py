"""``llmrec plan CONFIG``: a run's KV budget, placement, KV-sized slices and their expected dispatch, without
starting an engine.

Engine-neutral: the subject engine states its capacity through the Engine protocol's optional
hooks (``kv_capacity`` before start = its planned figure, ``capacity_lines`` = how it comes
about; ``execution.kv_budget_tokens`` overrides the tokens). Prompt sizes come from a dry run of
the benchmark's own stages (``prompt_sizes``), counted with the engine's ``prompt_tokenizer``
when the model's tokenizer is installed, else at 4 characters per token. Planned, not measured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from llmrec.cli_options import data_dir_option
from llmrec.errors import ConfigError
from llmrec.packing import GroupNeed, dispatch_slices, expected_dispatch
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.runner.placement import judge_placement, replica_placement
from llmrec.pipelines.runner.prompt_sizes import DISPATCH_WAVES, TokenCount, dry_run_needs, run_capacity


def group_needs(cfg, max_groups: int, block_tokens: int, count: TokenCount,
                data_dir: Path | None = None) -> tuple[list[GroupNeed], int]:
    """(needs of up to ``max_groups`` evenly spread prefix groups, number of groups in the run)."""
    from llmrec.pipelines.runner.execution import data_root
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.runner.worker import group_by_prefix

    bench = get_benchmark(cfg.benchmark.name)
    root = data_root(cfg, bench, data_dir)
    samples = bench.build_samples(cfg.benchmark, root)
    assets = caps.assets(bench, cfg.benchmark, root)
    groups = group_by_prefix(samples)
    step = max(1, len(groups) // max_groups)
    return dry_run_needs(bench, cfg.benchmark, groups[::step][:max_groups], block_tokens, assets, count), len(groups)


def plan_lines(cfg, gpus_per_node: int, max_groups: int, data_dir: Path | None = None) -> list[str]:
    from llmrec.serving.engine import build_engine

    engine, ex = build_engine(cfg.engine), cfg.execution
    cap = run_capacity(engine, ex)
    if cap.tokens is None:
        raise ConfigError(f"the {cfg.engine.type} engine's KV budget is unknown before start ({cap.source}); "
                          f"set execution.kv_budget_tokens")
    count = TokenCount(engine.prompt_tokenizer())
    lines = engine.capacity_lines(cap) or [f"KV budget per replica: {cap.tokens:,} tokens ({cap.source})"]
    lines += [replica_placement(cfg.engine, ex, gpus_per_node), judge_placement(cfg.judge, ex)]
    needs, n_groups = group_needs(cfg, max_groups, cap.block_tokens, count, data_dir)
    slices = dispatch_slices(needs, cap, ex.concurrency, DISPATCH_WAVES)  # as the run cuts its rows
    prompt = sum(sum(g.prompt_tokens) for g in needs)
    saved = sum(g.prefill_saved() for g in needs)
    longest = max((max(g.prompt_tokens) for g in needs), default=0)
    fullest = max((bt.kv_tokens for bt in slices), default=0)
    over = sum(bt.oversize for bt in slices)
    lines += [
        f"prefix groups planned: {len(needs)} of {n_groups} (evenly spread; --max-groups), "
        f"longest prompt ~{longest:,} tokens ({count.describe()})",
        f"slices: {len(slices)}; fullest needs {fullest:,} of {cap.tokens:,} KV tokens "
        f"({fullest / max(cap.tokens, 1):.0%}); {over} group(s) larger than the budget"
        + ("" if over else " -> every slice fits, no preemption"),
        f"dispatch: slices queued largest first; each of {ex.concurrency} replica(s) runs one at a time and pulls "
        "the next as it finishes (expected, a slice's time taken as its KV need):",
        *dispatch_lines(slices, ex.concurrency),
        f"prefill tokens: {prompt:,} as separate prompts, {prompt - saved:,} with prefix sharing "
        f"(saved {saved:,}, {saved / max(prompt, 1):.0%})",
    ]
    return lines


def dispatch_lines(slices, replicas: int) -> list[str]:
    """One line per replica: the slices (1-based, in pull order) it is expected to pull, its groups and KV work."""
    total = sum(b.kv_tokens for b in slices) or 1
    return [f"  replica {i}: slice(s) {', '.join(str(j + 1) for j in r.slices) or '-'}; {r.groups} group(s), "
            f"{r.kv_tokens:,} KV tokens of work ({r.kv_tokens / total:.0%})"
            for i, r in enumerate(expected_dispatch(slices, replicas), 1)]


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_cmd(
        config: Path = typer.Argument(..., help="run config (YAML) whose engine states a KV budget, or with "
                                                "execution.kv_budget_tokens"),
        set_: list[str] = typer.Option([], "--set", help="override a key, e.g. --set engine.kv_cache_dtype=fp8"),
        gpus_per_node: int = typer.Option(8, min=1, help="GPUs per node, for replicas per node"),
        max_groups: int = typer.Option(24, min=1, help="prefix groups to dry-run (evenly spread over the run; each dry run renders every stage, RAG included)"),
        data_dir: Optional[Path] = data_dir_option(),
    ) -> None:
        """Print a run's plan without starting an engine: the engine's KV budget per replica (and how it
        comes about), placement, the KV-sized slices of prefix groups, which replica is expected to pull which
        (each runs one slice at a time and takes the next queued one when it finishes) and the prefill saved by
        prefix sharing.

        Planned, not measured (the engine's arithmetic from its config, e.g. weights from the model
        config's shapes; tokens from the model's tokenizer when installed, else 4 chars per token).
        Example: llmrec plan configs/prefeval_gen_gpu.yaml --set engine.kv_cache_dtype=fp8
        """
        from llmrec.pipelines.runner.run_config import load_run_config

        typer.echo("\n".join(plan_lines(load_run_config(config, set_), gpus_per_node, max_groups, data_dir)))

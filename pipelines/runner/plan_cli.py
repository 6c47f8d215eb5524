"""``llmrec plan CONFIG``: KV budget, placement and packed batches of a vLLM run, without an engine.

Prompt sizes come from a dry run of the benchmark's own stages (``prompt_sizes``); the figures
are planned, not measured.
"""

from __future__ import annotations

from pathlib import Path

import typer

from llmrec.errors import ConfigError
from llmrec.pipelines.runner.packing import GroupNeed, pack_groups
from llmrec.pipelines.runner.placement import judge_placement
from llmrec.pipelines.runner.planning import ModelShape, ReplicaBudget, load_model_config, replica_budget
from llmrec.pipelines.runner.prompt_sizes import dry_run_needs

def group_needs(cfg, max_groups: int, block_size: int) -> tuple[list[GroupNeed], int]:
    """(needs of up to ``max_groups`` evenly spread prefix groups, number of groups in the run)."""
    from llmrec.pipelines.common.datasets import resolve_data_dir
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.runner.worker import group_by_prefix

    bench = get_benchmark(cfg.benchmark.name)
    root = resolve_data_dir(cfg.data.dir, bench.data)
    samples = bench.build_samples(cfg.benchmark, root)
    assets = bench.assets(cfg.benchmark, root)
    groups = group_by_prefix(samples)
    step = max(1, len(groups) // max_groups)
    return dry_run_needs(bench, cfg.benchmark, groups[::step][:max_groups], block_size, assets), len(groups)


def budget_for(engine, ex) -> tuple[ModelShape, ReplicaBudget]:
    if getattr(engine, "gpus_per_replica", None) is None or not hasattr(engine, "gpu_memory_gib"):
        raise ConfigError(f"llmrec plan sizes vLLM engines (engine.type: vllm); this config's engine is "
                          f"'{engine.type}'")
    shape = ModelShape.from_config(load_model_config(engine.model_config_path, engine.model))
    budget = replica_budget(shape, engine.gpus_per_replica, engine.gpu_memory_gib, engine.gpu_memory_utilization,
                            engine.kv_cache_dtype, engine.block_size or 16)
    if ex.kv_budget_tokens:
        budget = ReplicaBudget(budget.gpus, budget.weight_bytes, ex.kv_budget_tokens * budget.kv_bytes_per_token,
                               budget.kv_bytes_per_token, budget.block_size)
    return shape, budget


def plan_lines(cfg, gpus_per_node: int, max_groups: int) -> list[str]:
    engine, ex = cfg.engine, cfg.execution
    shape, b = budget_for(engine, ex)
    context = engine.max_model_len or engine.context_length or 0
    per_node = gpus_per_node // b.gpus
    lines = [
        f"model {engine.model}: {shape.layers} layers, {shape.kv_heads} KV heads x {shape.head_dim}, "
        f"~{shape.params / 1e9:.1f}B params",
        f"KV bytes per token: {b.kv_bytes_per_token:,} (kv_cache_dtype {engine.kv_cache_dtype})",
        f"replica: {b.gpus} GPU(s) x {engine.gpu_memory_gib:g} GiB x {engine.gpu_memory_utilization:g}; weights "
        f"{b.weight_bytes / 2**30:.1f} GiB; KV budget {b.kv_tokens:,} tokens ({b.kv_bytes / 2**30:.1f} GiB, "
        f"block {b.block_size})",
        f"sequences that fit per replica at {context:,} tokens: {b.sequences_at(context)}",
        f"placement: {b.gpus} bundle(s) {{GPU: 1, CPU: 1}} per replica; {per_node} replica(s) per "
        f"{gpus_per_node}-GPU node; {ex.concurrency} replica(s) -> {-(-ex.concurrency // max(per_node, 1))} node(s)",
        judge_placement(cfg.judge, ex),
    ]
    needs, n_groups = group_needs(cfg, max_groups, b.block_size)
    batches = pack_groups(needs, b.kv_tokens, b.block_size, engine.max_num_seqs)
    prompt = sum(sum(g.prompt_tokens) for g in needs)
    saved = sum(g.prefill_saved() for g in needs)
    longest = max((max(g.prompt_tokens) for g in needs), default=0)
    fullest = max((bt.kv_tokens for bt in batches), default=0)
    over = sum(bt.oversize for bt in batches)
    lines += [
        f"prefix groups planned: {len(needs)} of {n_groups} (evenly spread; --max-groups), "
        f"longest prompt ~{longest:,} tokens (4 chars/token)",
        f"batches: {len(batches)}; fullest needs {fullest:,} of {b.kv_tokens:,} KV tokens "
        f"({fullest / max(b.kv_tokens, 1):.0%}); {over} group(s) larger than the budget"
        + ("" if over else " -> every batch fits, no preemption"),
        f"prefill tokens: {prompt:,} as separate prompts, {prompt - saved:,} with prefix sharing "
        f"(saved {saved:,}, {saved / max(prompt, 1):.0%})",
    ]
    return lines


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_cmd(
        config: Path = typer.Argument(..., help="run config (YAML) with engine.type: vllm"),
        set_: list[str] = typer.Option([], "--set", help="override a key, e.g. --set engine.kv_cache_dtype=fp8"),
        gpus_per_node: int = typer.Option(8, help="GPUs per node, for replicas per node"),
        max_groups: int = typer.Option(24, help="prefix groups to dry-run (evenly spread over the run; each dry run renders every stage, RAG included)"),
    ) -> None:
        """Print a vLLM run's plan without starting an engine: KV bytes per token, sequences per replica
        at the configured context, placement, the KV-packed batches and the prefill saved by prefix sharing.

        Planned, not measured (weights from the config's shapes, 2 GiB reserve per GPU, 4 chars per token).
        Example: llmrec plan configs/prefeval_gen_gpu.yaml --set engine.kv_cache_dtype=fp8
        """
        from llmrec.pipelines.runner.run_config import load_run_config

        for line in plan_lines(load_run_config(config, set_), gpus_per_node, max_groups):
            typer.echo(line)

"""`llmrec sft ...` verbs (registered through ``llmrec.cli.EXTRA_VERBS``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperGroup


class _TrainByDefault(TyperGroup):
    """``llmrec sft CONFIG.yaml`` means ``llmrec sft train CONFIG.yaml``."""

    def parse_args(self, ctx, args):
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["train", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=_TrainByDefault, no_args_is_help=True, help=(
    "LoRA fine-tuning (Ray Train, peft), sweeps (Ray Tune) and weight merging. "
    "`llmrec sft CONFIG.yaml` trains one adapter (or sweeps, if the config has `tune:`); "
    "`llmrec sft merge` merges adapters/models. Evaluate a result with `engine: {type: transformers, "
    "model: BASE, adapter: DIR}` in any run config. See docs/sft.md."))


@app.command("train")
def train_cmd(
    config: Path = typer.Argument(..., help="SFT config (YAML): base_model, data, lora, train, scaling, "
                                  "tracking, output[, tune]."),
    set_: list[str] = typer.Option([], "--set", help="Override a config key, e.g. --set train.max_steps=5. "
                                   "Repeatable."),
) -> None:
    """Train one LoRA adapter as a Ray Train job (rerun the same config to resume after a kill), or run a
    Ray Tune sweep when the config has a `tune:` section. Writes <output.dir>/<run_name>/adapter.

    Example: llmrec sft configs/sft_point.yaml --set scaling.num_workers=2 --set train.max_steps=10
    """
    from llmrec.config import load_config
    from llmrec.tuning.sft.config import SFTConfig

    cfg = load_config(SFTConfig, config, set_)
    if cfg.tune is not None:
        from llmrec.tuning.sft.sweep import sweep_from_config

        out = sweep_from_config(cfg)
    else:
        from llmrec.tuning.sft.api import sft_from_config

        out = sft_from_config(cfg)
    typer.echo(json.dumps(out, indent=2, default=str))


def _default_base(inputs: list[Path]) -> Path | None:
    """The base model recorded in the first adapter's adapter_config.json."""
    for p in inputs:
        cfg = Path(p) / "adapter_config.json"
        if cfg.is_file():
            base = json.loads(cfg.read_text()).get("base_model_name_or_path")
            if base:
                return Path(base)
    return None


@app.command("merge")
def merge_cmd(
    input_: list[Path] = typer.Option(..., "--input", help="Adapter dir (peft) or full HF model dir. Repeatable."),
    weight: list[float] = typer.Option(..., "--weight", help="Coefficient of the matching --input. Repeatable."),
    out: Path = typer.Option(..., "--out", help="Output HF model directory."),
    base: Optional[str] = typer.Option(None, "--base", help="Base model dir ('embedded' = the embedded Gemma); "
                                       "default: the one the first adapter records."),
) -> None:
    """Linear weight merging: theta = (1 - sum w)*theta_base + sum_i w_i*theta_i, where an adapter input
    counts as its base with the adapter merged in. One adapter with --weight 1 merges it into its base.

    Example (the paper's alpha = beta = 1/3):
      llmrec sft merge --input runs/sft/point/adapter --weight 0.3333 --input runs/sft/pair/adapter
        --weight 0.3333 --input runs/sft/list/adapter --weight 0.3334 --out runs/sft/merged
    """
    from llmrec.rundir import refuse_inside_runs

    refuse_inside_runs(out, "--out")
    from llmrec.serving.hf_model import resolve_model_dir
    from llmrec.tuning.sft.merge import merge

    base_dir = resolve_model_dir(base) if base else _default_base(input_)
    recipe = merge(list(input_), list(weight), out, base_dir)
    typer.echo(json.dumps(recipe, indent=1))


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="sft")

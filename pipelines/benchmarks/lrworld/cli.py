"""`llmrec lrworld ...`: build a versioned sample set; plot several models' predictions."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from llmrec.cli_options import data_dir_option
from llmrec.errors import ConfigError

app = typer.Typer(no_args_is_help=True, help="LRWorld extras: build the sample set, compare models in plots.")

# Named sources for the datasets llmrec's data folder holds (paths relative to the data dir).
PRESETS = {
    "ml-100k": {"format": "movielens-100k", "path": "ml-100k"},
    "ml-1m": {"format": "movielens-1m", "path": "ml-1m"},
    "lastfm": {"format": "hetrec-lastfm", "path": "hetrec2011-lastfm-2k"},
    "amazon-beauty": {"format": "amazon", "path": "amazon-all-beauty-2023/All_Beauty(1).csv.gz",
                      "items_path": "amazon-all-beauty-2023/filterd_meta_items.csv"},
}


def _pairs(values: list[str], what: str) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep:
            raise typer.BadParameter(f"{what} must be NAME=PATH, got {v!r}")
        out[name] = path
    return out


def _build_config(config: Optional[Path], sets: list[str], source: list[str], embeddings: list[str],
                  images: list[str]):
    from llmrec.config import apply_overrides, read_yaml, validate
    from llmrec.pipelines.benchmarks.lrworld.config import BuildConfig

    raw = read_yaml(config) if config else {}
    if "benchmark" in raw:
        raw = raw["benchmark"].get("build", {})
    elif "build" in raw:
        raw = raw["build"]
    if source:
        unknown = [s for s in source if s not in PRESETS]
        if unknown:
            raise typer.BadParameter(f"unknown source(s) {unknown}; presets: {sorted(PRESETS)}")
        emb, img = _pairs(embeddings, "--embeddings"), _pairs(images, "--image-descriptions")
        raw["sources"] = [{"name": s, "data": PRESETS[s], "embeddings": emb.get(s), "image_descriptions": img.get(s)}
                          for s in source]
    return validate(BuildConfig, apply_overrides(raw, sets))


@app.command("build")
def build_cmd(
    config: Optional[Path] = typer.Argument(None, help="YAML with a BuildConfig (or a run config: its "
                                            "benchmark.build is used). Default: ML-100K only, 200 per measure."),
    source: list[str] = typer.Option([], "--source", help=f"Preset dataset (repeatable): {', '.join(PRESETS)}. "
                                     "Replaces the config's sources."),
    embeddings: list[str] = typer.Option([], "--embeddings", help="NAME=DIR: embedding export of a model "
                                         "trained by `llmrec train` for source NAME (repeatable)."),
    images: list[str] = typer.Option([], "--image-descriptions", help="NAME=FILE: JSON lines {item_id, "
                                     "description} for the multimodal factor of source NAME."),
    sets: list[str] = typer.Option([], "--set", help="Override a build field, e.g. --set per_measure=50."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output folder (default runs/lrworld/lrworld-v<schema>-"
                                       "<config hash>)."),
    data_dir: Optional[Path] = data_dir_option(),
) -> None:
    """Build LRWorld samples and write samples.jsonl + manifest.json (counts per measure, measures not built).

    Example: llmrec lrworld build --source ml-100k --source lastfm --source amazon-beauty
    --embeddings ml-100k=runs/baselines/neumf-ml100k/embeddings --set per_measure=200
    """
    from llmrec.config import fingerprint
    from llmrec.pipelines.benchmarks.lrworld.builders.common import SCHEMA_VERSION
    from llmrec.pipelines.benchmarks.lrworld.samples import build_sample_set, write_sample_set
    from llmrec.pipelines.common.datasets import resolve_data_dir
    from llmrec.rundir import refuse_inside_runs

    refuse_inside_runs(out, "--out")
    build = _build_config(config, sets, source, embeddings, images)
    root = resolve_data_dir(data_dir, None)
    result = build_sample_set(build, root, progress=lambda msg: typer.echo(f"  built {msg}", err=True))
    name = f"lrworld-v{SCHEMA_VERSION}-{fingerprint(build.model_dump(mode='json'), 8)}"
    out = out or Path("runs/lrworld") / name
    refuse_inside_runs(out, "--out")
    path = write_sample_set(result, build, out)
    for measure, n in sorted(result["counts"].items()):
        typer.echo(f"{measure}\t{n}")
    for measure, why in sorted(result["not_built"].items()):
        typer.echo(f"{measure}\tnot built: {why}")
    typer.echo(f"{len(result['samples'])} samples in {len(result['counts'])} measures -> {path}")


@app.command("plot")
def plot_cmd(
    predictions: list[Path] = typer.Argument(..., help="predictions.jsonl of runs (one per model)."),
    label: list[str] = typer.Option([], "--label", help="Model label per file, in order (default: parent folder)."),
    out: Path = typer.Option(Path("lrworld_plots"), "--out", help="Folder for the figures and the table."),
) -> None:
    """Factor bars and radar, position-bias table and noisy-profile drop for several models.

    Example: llmrec lrworld plot runs/a/predictions.jsonl runs/b/predictions.jsonl --label gemma --label qwen
    """
    from llmrec.pipelines.benchmarks.lrworld.metrics import ContractLine, score_predictions
    from llmrec.pipelines.benchmarks.lrworld.plots import all_plots
    from llmrec.pipelines.common.jsonio import read_predictions
    from llmrec.rundir import refuse_inside_runs

    refuse_inside_runs(out, "--out")
    labels = label or [p.parent.name for p in predictions]
    if len(labels) != len(predictions):
        raise ConfigError(f"{len(predictions)} files but {len(labels)} labels")
    models = {lab: score_predictions(read_predictions(p, ContractLine), {}) for lab, p in zip(labels, predictions)}
    for path in all_plots(models, out):
        typer.echo(str(path))

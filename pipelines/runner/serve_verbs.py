"""`llmrec serve-cleanup`: remove Serve apps that runs left behind (mounted via EXTRA_VERBS)."""

from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    app.command("serve-cleanup")(serve_cleanup)


def serve_cleanup(
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: $RAY_ADDRESS, "
                                                                     "else 'auto': the cluster on this machine)."),
    run: Optional[str] = typer.Option(None, "--run", help="Only this run's apps (its run directory name); "
                                                          "default: every app a run created (llmrec-<run>-<role>)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be deleted, delete nothing."),
) -> None:
    """Delete the Ray Serve apps that `llmrec run` (execution.mode: serve) created and a crashed
    driver left running, holding their CPUs/GPUs. A run removes its own leftovers when it is run
    again; this cleans up without re-running. Example: llmrec serve-cleanup --address auto --run prefeval-3f2a"""
    from llmrec import settings
    from llmrec.pipelines.runner.execution import app_name
    from llmrec.pipelines.runner.ray_env import ensure_ray
    from llmrec.pipelines.runner.run_config import RayConfig
    from llmrec.serving.serve_app import remove_apps, running_apps

    ensure_ray(RayConfig(address=address or settings.env_ray_address() or "auto"))
    prefix = app_name(run, "") if run else "llmrec-"
    mine = [a for a in running_apps() if a.startswith(prefix) and a != "llmrec"]  # "llmrec": `llmrec serve`'s app
    if dry_run:
        typer.echo("\n".join(mine) or "no run apps are running")
        return
    gone = remove_apps(mine, reason="llmrec serve-cleanup")
    typer.echo(f"deleted {len(gone)} Serve app(s)" + (": " + ", ".join(gone) if gone else ""))

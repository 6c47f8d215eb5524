"""A flag means the same in every verb: one help text and default for --data-dir and --tracking-uri, and every verb
that reads benchmark data or writes to MLflow has them."""

from __future__ import annotations

import pytest
import typer

from llmrec.cli_options import DATA_DIR_HELP


@pytest.fixture(scope="module")
def verbs() -> dict:
    from llmrec.cli import _mount_benchmark_clis, _mount_extra_verbs, app

    _mount_extra_verbs()
    _mount_benchmark_clis()
    out: dict = {}

    def walk(cmd, path: str) -> None:  # typer's own click: groups have .commands
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}".strip())
        else:
            out[path] = cmd

    walk(typer.main.get_command(app), "")
    return out


def options(cmd) -> dict:
    return {flag: p for p in cmd.params if p.param_type_name == "option" for flag in [*p.opts, *p.secondary_opts]}


def test_data_dir_is_one_option(verbs):
    having = {name: options(cmd)["--data-dir"] for name, cmd in verbs.items() if "--data-dir" in options(cmd)}
    assert {"run", "suite", "plan", "compare", "data where"} <= set(having)
    for name, opt in having.items():
        assert opt.help == DATA_DIR_HELP and opt.default is None, name


def test_tracking_uri_is_one_option(verbs):
    having = {name: options(cmd)["--tracking-uri"] for name, cmd in verbs.items() if "--tracking-uri" in options(cmd)}
    # every verb that writes to or reads from MLflow
    assert {"run", "suite", "compare", "leaderboard", "runs", "ui"} <= set(having)
    for name, opt in having.items():
        assert opt.help.startswith("MLflow store") and opt.default is None, name
    assert "--no-tracking" in options(verbs["compare"]) and "--no-tracking" in options(verbs["leaderboard"])

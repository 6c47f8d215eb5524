"""Numeric options with a range: a value outside it is a usage error (exit 2) naming the option, before any work."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from llmrec.cli import app

runner = CliRunner()


def _text(res) -> str:
    return " ".join(res.output.split())


@pytest.fixture(scope="module", autouse=True)
def _extra_verbs():
    from llmrec.cli import _mount_extra_verbs

    if not any(c.name == "plan" for c in app.registered_commands):
        _mount_extra_verbs()


@pytest.mark.parametrize("args, option", [
    (["plan", "configs/prefeval_mcq_demo.yaml", "--max-groups", "-3"], "--max-groups"),
    (["plan", "configs/prefeval_mcq_demo.yaml", "--max-groups", "0"], "--max-groups"),
    (["plan", "configs/prefeval_mcq_demo.yaml", "--gpus-per-node", "0"], "--gpus-per-node"),
    (["runs", "--limit", "0"], "--limit"),
    (["serve", "configs/prefeval_mcq_demo.yaml", "--replicas", "0"], "--replicas"),
    (["serve", "configs/prefeval_mcq_demo.yaml", "--port", "70000"], "--port"),
    (["ui", "--port", "-1"], "--port"),
])
def test_a_value_out_of_range_is_a_usage_error(args, option):
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert f"Invalid value for '{option}'" in _text(res), res.output

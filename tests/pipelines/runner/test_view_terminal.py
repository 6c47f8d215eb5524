"""`llmrec view RUN --sample ID` on a real run: a fake-engine PrefEval MCQ run of travel_restaurant on a local Ray
stores each call's request; the terminal view prints that sample's conversation — its preference statement and
question as the data file has them — and the raw output."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import load_run_config
from tests.pipelines.conftest import config

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_the_terminal_view_prints_the_conversation_from_the_data_file(tmp_path, data_root, local_ray):
    from llmrec.cli import _mount_extra_verbs, app

    cfg = load_run_config(config(tmp_path, topics=["travel_restaurant"], forms=["explicit"], turns=[2],
                                 methods=["zero-shot"], per_topic=1,
                                 engine={"type": "fake", "default": "<choice>D</choice>"}))
    out = run_evaluation(cfg, data_root)
    pair = json.loads((data_root / "prefeval/benchmark_dataset/explicit_preference/travel_restaurant.json")
                      .read_text())[0]
    sid = "travel_restaurant/explicit/0000/t002/zero-shot"
    if not any(c.name == "view" for c in app.registered_commands):
        _mount_extra_verbs()
    res = CliRunner().invoke(app, ["view", str(out.run_dir), "--sample", sid, "--full"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.replace("│", " ").split())  # Rich wraps long lines inside its panels' borders
    for line in (pair["preference"], pair["question"]):
        assert " ".join(line.split()) in text, line
    assert "<choice>D</choice>" in text and "raw output" in text
    assert "written before llmrec stored transcripts" not in text
    # the viewer's list over the same run
    bad = CliRunner().invoke(app, ["view", str(out.run_dir), "--sample", "no/such/sample"])
    assert bad.exit_code != 0 and "no sample 'no/such/sample'" in bad.output

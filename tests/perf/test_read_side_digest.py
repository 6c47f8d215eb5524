"""perf/read_side_digest.py: it builds its inputs without a model, digests every read verb's outputs, agrees with
itself on a second rendering (timestamps removed) and names the output that differs from a stored digest."""

from __future__ import annotations

import json

import pytest

from perf.read_side_digest import main


@pytest.mark.slow
@pytest.mark.integration  # ~35 s: the fake-engine inputs and every verb rendered twice
def test_the_digest_renders_every_verb_and_names_a_difference(tmp_path, capsys):
    inputs, before = tmp_path / "inputs", tmp_path / "before.json"
    assert main([str(inputs), "--make-inputs", "--out", str(before)]) == 0
    got = json.loads(before.read_text())
    assert {"leaderboard.md", "leaderboard.csv", "report.text", "viewer/samples"} <= set(got)
    assert any(k.startswith("compare[") for k in got) and any(k.startswith("viewer/sample?") for k in got)
    assert main([str(inputs), "--compare", str(before)]) == 0  # a second rendering: the same bytes
    assert "identical" in capsys.readouterr().out
    before.write_text(json.dumps({**got, "leaderboard.md": "0" * 64}))
    assert main([str(inputs), "--compare", str(before)]) == 1
    assert "differs: leaderboard.md: differs" in capsys.readouterr().err

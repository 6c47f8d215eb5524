"""Serve apps per run: two concurrent runs in serve mode keep to their own apps; an app left by a
crashed driver of the same run is removed by the next run; nothing is left running after."""

from __future__ import annotations

import threading

import pytest

from llmrec.pipelines.runner.execution import app_name
from llmrec.pipelines.runner.run_config import load_run_config
from tests.pipelines.conftest import config

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ENGINE = {"type": "fake", "rules": [{"contains": "Las Vegas", "reply": "<choice>C</choice>"}],
          "default": "<choice>A</choice>", "delay_s": 0.05}


def test_concurrent_serve_runs_keep_to_their_apps(tmp_path, data_root, local_ray):
    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.serving.serve_app import deploy, running_apps

    path = config(tmp_path, engine=ENGINE, forms=["explicit"])
    sets = ["execution.mode=serve", "output.cache=false", "tracking.enabled=false",
            "execution.num_cpus_per_worker=0.25", "execution.serve_backoff_s=0.5"]
    # a crashed earlier driver of run "b" left its app running (with a different engine reply)
    stale = app_name("b", "subject")
    deploy({**ENGINE, "default": "<choice>D</choice>"}, app_name=stale, num_cpus=0.25, http=False)
    assert stale in running_apps()
    outs: dict = {}
    # configs are loaded here: the benchmark registry's first discovery is not thread-safe
    cfgs = {n: load_run_config(path, sets + [f"output.run_name={n}"]) for n in ("a", "b")}

    def go(name: str) -> None:
        try:
            outs[name] = run_evaluation(cfgs[name], data_root)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            outs[name] = e

    threads = [threading.Thread(target=go, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    for name in ("a", "b"):
        assert not isinstance(outs[name], BaseException), outs[name]
        m = outs[name].metrics
        assert m["n_samples"] == 16 and m["n_answered"] == 16
    assert outs["a"].metrics == outs["b"].metrics  # b answered with its own app, not the stale one
    assert not [a for a in running_apps() if a.startswith("llmrec-")]

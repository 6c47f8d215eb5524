"""Where a run's engines live: one strategy per role, chosen from the config in one place; the configs travel to
the map actors as the validated objects (pickled), never as dicts validated again there. No Ray needed."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from llmrec.pipelines.runner.provision import (Borrowed, EnginePool, InActor, RunEngines, ServeApp, SharedSubject,
                                               provision_for)
from llmrec.pipelines.runner.run_config import RunConfig, load_run_config
from llmrec.serving.engine import EngineConfig
from tests.pipelines.toy.benchmark import NAME

FAKE = {"type": "fake", "default": "yes"}
OPENAI = {"type": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def run_config(tmp_path, judge=None, **execution) -> RunConfig:
    return RunConfig.model_validate({
        "benchmark": {"name": NAME, "judged": judge is not None}, "engine": FAKE, "judge": judge,
        "execution": execution, "output": {"dir": str(tmp_path)}})


@pytest.mark.parametrize("execution, judge, subject_kind, judge_kind, thin", [
    ({}, None, InActor, None, False),
    ({}, FAKE, InActor, EnginePool, False),  # the judge's own engine actors (judge_replicas 1)
    ({"judge_replicas": 0}, FAKE, InActor, InActor, False),
    ({}, OPENAI, InActor, InActor, False),  # a remote judge stays a client inside the map actors
    ({"mode": "serve"}, FAKE, ServeApp, ServeApp, True),
])
def test_one_place_picks_each_roles_strategy(tmp_path, execution, judge, subject_kind, judge_kind, thin):
    engines = RunEngines(run_config(tmp_path, judge, **execution), "r1")
    assert type(engines.roles["subject"]) is subject_kind
    assert type(engines.roles.get("judge")) is (judge_kind or type(None))
    assert engines.thin is thin
    if judge_kind is EnginePool:
        assert engines.roles["judge"].replicas == 1 and engines.roles["judge"].name == "llmrec-r1-judge"
    if subject_kind is ServeApp:
        assert engines.roles["subject"].app == "llmrec-r1-subject"


def test_a_shared_subject_is_a_pool_in_actors_mode_and_borrowed_by_each_run(tmp_path):
    cfg = run_config(tmp_path, concurrency=2)
    shared = SharedSubject(cfg.engine, cfg.execution, cfg.ray, "suite-s")
    assert type(shared.provision) is EnginePool and shared.provision.replicas == 2
    engines = RunEngines(cfg, "r1", shared)
    assert type(engines.roles["subject"]) is Borrowed and engines.thin  # the map actors hold no engine
    remote = SharedSubject(RunConfig.model_validate({**cfg.model_dump(), "engine": OPENAI}).engine, cfg.execution,
                           cfg.ray, "suite-o")
    assert type(remote.provision) is InActor  # nothing to start: each run's actors connect
    assert not RunEngines(cfg, "r2", remote).thin
    serve = cfg.execution.model_copy(update={"mode": "serve"})
    assert type(provision_for(cfg.engine, "subject", serve, "suite-s", shared=True)) is ServeApp


def test_the_in_actor_client_travels_pickled_and_builds_the_validated_config(tmp_path):
    cfg = run_config(tmp_path)
    opener = pickle.loads(pickle.dumps(RunEngines(cfg, "r1").clients()["subject"]))
    engine = opener()
    assert engine.config == cfg.engine and type(engine.config) is type(cfg.engine)


@pytest.mark.parametrize("name", ["beyond_utility_demo", "gistbench_demo", "lrworld_demo", "perrecbench_demo",
                                  "prefeval_mcq_demo", "prefeval_gen_demo", "prefeval_gen_gpu"])
def test_demo_configs_cross_ray_as_the_validated_objects(name, monkeypatch, tmp_path):
    monkeypatch.chdir(CONFIGS.parent)
    cfg = load_run_config(CONFIGS / f"{name}.yaml")
    for section in (cfg.engine, cfg.judge, cfg.benchmark):
        if section is None:
            continue
        back = pickle.loads(pickle.dumps(section))
        assert type(back) is type(section) and back == section
    assert isinstance(cfg.engine, EngineConfig)

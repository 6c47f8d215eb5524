"""Template files named in a config are read on the driver (``build_samples`` / ``assets``) and
travel to the workers: each benchmark's override files are moved away after planning, and the
stages (the runner's ``process_samples``, as a worker runs it) still render them."""

from __future__ import annotations

import shutil
from pathlib import Path

from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.registry import get_benchmark
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engines.fake import FakeEngine, FakeEngineConfig
from tests.conftest import require_data
from tests.pipelines.benchmarks.lrworld.conftest import sim_catalog  # noqa: F401 - fixture


class Recorder(FakeEngine):
    def __init__(self, **cfg):
        super().__init__(FakeEngineConfig(**cfg))
        self.requests = []

    def generate(self, requests):
        self.requests += requests
        return super().generate(requests)


def plan_then_move(bench, cfg, data_dir: Path | None, folder: Path, samples=None) -> list[dict]:
    """The driver's part (samples, assets), then the override folder disappears, then the worker's part."""
    samples = samples if samples is not None else bench.build_samples(cfg, data_dir)
    assets = caps.assets(bench, cfg, data_dir)
    shutil.move(str(folder), str(folder.parent / "moved-away"))
    engine = Recorder(default="<choice>A</choice>")
    rows = process_samples(bench, cfg, samples, lambda role: engine, retries=0, backoff_s=0, assets=assets)
    assert rows and all(r["status"] == "ok" for r in rows), rows[0].get("error")
    assert not folder.exists()
    return engine.requests


def test_prefeval_template_overrides(tmp_path):
    data = require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "q.txt").write_text("OVERRIDDEN-Q {question}{reminder}\n{options}")
    (tpl / "r.txt").write_text(" OVERRIDDEN-REMINDER")
    bench = get_benchmark("prefeval")
    cfg = bench.config_cls(topics=["travel_hotel"], per_topic=1, turns=[1], methods=["zero-shot", "reminder"],
                           templates={"mcq_question": str(tpl / "q.txt"), "reminder": str(tpl / "r.txt")})
    reqs = plan_then_move(bench, cfg, data, tpl)
    finals = [r.messages[-1].content for r in reqs if r.messages[-1].content.startswith("OVERRIDDEN-Q")]
    assert len(finals) == 2 and sum("OVERRIDDEN-REMINDER" in f for f in finals) == 1


def test_gistbench_extraction_template(tmp_path):
    data = require_data("gistbench/gistbench/assets/mock_dataset.json").parents[3]
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "x.txt").write_text("OVERRIDDEN {object_name}\n{instructions}\n{history}")
    bench = get_benchmark("gistbench")
    cfg = bench.config_cls(name="gistbench", path="gistbench/gistbench/assets/mock_dataset.json",
                           judge={"enabled": False}, taxonomy={"mapper": "none"},
                           extraction={"template": str(tpl / "x.txt")})
    reqs = plan_then_move(bench, cfg, data, tpl)
    assert len(reqs) == 3 and all(r.messages[0].content.startswith("OVERRIDDEN videos\n1. ") for r in reqs)


def test_lrworld_templates_dir(tmp_path, sim_catalog):  # noqa: F811 - fixture
    from llmrec.pipelines.benchmarks.lrworld.builders.memory import build_memory
    from llmrec.pipelines.benchmarks.lrworld.samples import expand

    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "system.txt").write_text("OVERRIDDEN SYSTEM")
    bench = get_benchmark("lrworld")
    cfg = bench.config_cls(templates_dir=tpl)
    rows = expand(cfg, build_memory(sim_catalog, "item", 2, 0))
    reqs = plan_then_move(bench, cfg, None, tpl, samples=rows)
    assert len(reqs) == 2 and all(r.messages[0].content == "OVERRIDDEN SYSTEM" for r in reqs)
    assert all("candidate" in r.messages[1].content.lower() for r in reqs)  # the rest: the package's files


def test_perrecbench_reference_templates(tmp_path):
    from tests.pipelines.benchmarks.perrecbench.test_perrecbench_stages import config, tables
    from llmrec.pipelines.benchmarks.perrecbench.samples import build_from_frames

    code = tmp_path / "code"
    shutil.copytree(require_data("perrecbench", "code", "templates_point"), code / "templates_point")
    shutil.copytree(require_data("perrecbench", "code", "template_profile"), code / "template_profile")
    system = (code / "templates_point/0ours/0ours0_sys.txt").read_text()
    cfg = config(prompt={"templates": "reference", "reference_templates": str(code), "shots": 0}, modes=["point"])
    inter, items = tables()
    reqs = plan_then_move(get_benchmark("perrecbench"), cfg, None, code, samples=build_from_frames(cfg, inter, items))
    points = [r for r in reqs if r.messages[0].role == "system" and r.messages[0].content == system]
    assert points and "<|The Start of User Data|>" in points[0].messages[1].content

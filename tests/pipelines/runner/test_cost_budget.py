"""The cost ledger (cost/ keys in metrics.json and MLflow) and execution.budget, on the real runner: fake engines,
the toy benchmark, local Ray. The ledger is checked against the run's request log (every call in samples.parquet,
read with llmrec.transcripts.calls) and against what the fake engine's own token rule makes of the toy's prompts."""

from __future__ import annotations

import io
import re
import sqlite3
import time

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from llmrec import costs
from llmrec.config import validate
from llmrec.errors import EXIT_BUDGET, BudgetReached, ConfigError
from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.record import read_rows
from llmrec.pipelines.runner.cost import Price, Usage, usd
from llmrec.pipelines.runner.placement import role_reservations
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.rundir import RunDir
from llmrec.transcripts import calls
from tests.pipelines.toy.benchmark import NAME

PRICES = {"subject": {"input_per_million": 1000.0, "cached_input_per_million": 500.0, "output_per_million": 2000.0,
                      "cpu_hour": 3.6},
          "judge": {"input_per_million": 100.0, "output_per_million": 400.0}}


def _cfg(tmp_path, execution: dict | None = None, judge: dict | None = None, **bench) -> dict:
    return {"benchmark": {"name": NAME, **bench},
            "engine": {"type": "fake", "default": "yes"},
            **({"judge": judge} if judge else {}),
            "execution": {"batch_size": 2, "backoff_s": 0.01, "retries": 1, **(execution or {})},
            "ray": {"num_cpus": 2},
            "output": {"dir": str(tmp_path / "runs")},
            "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art")}}


# ---- no Ray ---------------------------------------------------------------------------------------------------

def test_reservations_follow_the_placement():
    def run(engine, judge=None, **ex):
        return validate(RunConfig, {"benchmark": {"name": NAME}, "engine": engine, "judge": judge, "execution": ex})

    c = run({"type": "vllm", "model": "m", "tensor_parallel_size": 2}, {"type": "vllm", "model": "j"},
            concurrency=3, num_gpus_per_worker=2, num_cpus_per_worker=4, judge_replicas=2,
            judge_num_gpus_per_worker=1, judge_num_cpus_per_worker=2)
    # a TP=2 replica: bundles {GPU 1, CPU 4} + {GPU 1, CPU 1}; the judge's own two actors
    assert role_reservations(c.engine, c.judge, c.execution) == {"subject": (15.0, 6.0), "judge": (4.0, 2.0)}
    inside = run({"type": "fake"}, {"type": "fake"}, judge_replicas=0, concurrency=2)
    assert role_reservations(inside.engine, inside.judge, inside.execution) == {"subject": (2.0, 0.0)}
    served = run({"type": "fake"}, {"type": "fake"}, mode="serve", concurrency=2, num_gpus_per_worker=1)
    assert role_reservations(served.engine, served.judge, served.execution) == {"subject": (2.2, 2.0),
                                                                                "judge": (2.0, 2.0)}


@pytest.mark.parametrize("execution, where", [
    ({"budget": {"tokens": 0}}, "execution.budget.tokens"),
    ({"budget": {"usd": -1.0}, "prices": PRICES}, "execution.budget.usd"),
    ({"budget": {"gpu_hours": 0}}, "execution.budget.gpu_hours"),
    ({"budget": {}}, "give at least one of tokens, usd, gpu_hours"),
    ({"budget": {"usd": 1.0}}, "execution.budget.usd needs execution.prices"),
    ({"prices": {"subject": {"gpu_hour": -2}}}, "execution.prices.subject.gpu_hour"),
    ({"prices": {"subject": {"node_hour": 2}}}, "node_hour needs cpus_per_node"),
    ({"prices": {"subject": {"input_per_milion": 2}}}, "execution.prices.subject.input_per_milion"),
])
def test_budget_and_prices_are_validated(tmp_path, execution, where):
    with pytest.raises(ConfigError, match=where.replace(".", r"\.")):
        validate(RunConfig, _cfg(tmp_path, execution))


def test_usd_of_tokens_and_held_resources():
    u = Usage(prompt_tokens=3_000_000, cached_tokens=1_000_000, completion_tokens=500_000,
              reserved_cpu_seconds=7200.0, reserved_gpu_seconds=1800.0)
    p = Price(input_per_million=2.0, cached_input_per_million=0.5, output_per_million=8.0, gpu_hour=4.0,
              cpu_hour=0.1, node_hour=1.6, cpus_per_node=16)
    # 2M uncached x 2 + 1M cached x 0.5 + 0.5M x 8 + 0.5 GPU-h x 4 + 2 CPU-h x 0.1 + 2/16 node-h x 1.6
    assert usd(u, p) == pytest.approx(4.0 + 0.5 + 4.0 + 2.0 + 0.2 + 0.2)
    assert usd(u, Price(input_per_million=2.0)) == pytest.approx(6.0)  # cached input at the input price


def test_per_1k_cells():
    assert costs.per_1k_text({costs.USD_PER_1K: 0.01234, costs.TOKENS_PER_1K: 9e5}) == "$0.0123"
    assert costs.per_1k_text({costs.TOKENS_PER_1K: 35_210.0}) == "35.2k tok"
    assert costs.per_1k_text({}) == costs.MISSING == "—"


# ---- the runner ------------------------------------------------------------------------------------------------

def _request_log(run_dir) -> dict[str, Usage]:
    """role → the counts of the run's calls, read from samples.parquet through the transcript reader."""
    out: dict[str, Usage] = {}
    for row in read_rows(run_dir / RunDir.SAMPLES):
        for c in calls(row):
            u = out.setdefault(c.role, Usage())
            if c.result.get("from_cache"):
                u.requests_from_cache += 1
                continue
            u.requests += 1
            u.prompt_tokens += c.result["prompt_tokens"]
            u.cached_tokens += c.result["cached_prompt_tokens"]
            u.completion_tokens += c.result["completion_tokens"]
            u.engine_seconds += c.result["latency_s"]
    return out


def test_fake_run_ledger_matches_its_request_log(tmp_path, local_ray):
    from llmrec.pipelines.runner.api import run_evaluation

    cfg = validate(RunConfig, _cfg(tmp_path, {"judge_replicas": 0, "prices": PRICES},
                                   {"type": "fake", "default": "fine"}, n=6, judged=True))
    out = run_evaluation(cfg)
    m = RunDir(out.run_dir).metrics()
    assert {k: v for k, v in m.items() if k.startswith("cost/")} == out.cost and not set(out.cost) & set(out.metrics)
    log = _request_log(out.run_dir)
    for role in ("subject", "judge"):
        for key in ("requests", "requests_from_cache", "prompt_tokens", "cached_tokens", "completion_tokens"):
            assert m[f"cost/{role}/{key}"] == getattr(log[role], key), (role, key)
        assert m[f"cost/{role}/engine_seconds"] == pytest.approx(log[role].engine_seconds, rel=1e-12, abs=1e-12)
    # the fake engine counts words + 2 per message: "question i" (4), "follow-up r of toy-i" (6) x 2; replies: 1 word
    assert (m["cost/subject/requests"], m["cost/subject/prompt_tokens"], m["cost/subject/completion_tokens"]) == \
        (18, 6 * 16, 18)
    # every judge prompt is the same ("judge the answer 'yes'": 6 tokens): the request cache answers all but one
    assert m["cost/judge/requests"] + m["cost/judge/requests_from_cache"] == 6 and m["cost/judge/requests_from_cache"]
    assert m["cost/judge/prompt_tokens"] == 6 * m["cost/judge/requests"]
    assert m["cost/prompt_tokens"] == m["cost/subject/prompt_tokens"] + m["cost/judge/prompt_tokens"]
    # held: one subject actor of 1 CPU (the judge lives in it), from placing it to tearing it down
    held = out.stats["time_setup_s"] + out.stats["time_stream_s"] + out.stats["time_teardown_s"]
    assert m["cost/subject/reserved_cpu_seconds"] == pytest.approx(held) and held > 0
    assert m["cost/judge/reserved_cpu_seconds"] == 0 and m["cost/reserved_gpu_seconds"] == 0
    subject_usd = (96 * 1000 + 18 * 2000) / 1e6 + held * 3.6 / 3600
    judge_usd = (m["cost/judge/prompt_tokens"] * 100 + m["cost/judge/completion_tokens"] * 400) / 1e6
    assert m["cost/subject/usd"] == pytest.approx(subject_usd) and m["cost/judge/usd"] == pytest.approx(judge_usd)
    assert m["cost/usd"] == pytest.approx(subject_usd + judge_usd)
    assert m["cost/usd_per_1k_samples"] == pytest.approx(m["cost/usd"] / 6 * 1000) and m["cost/samples"] == 6

    # MLflow holds the same ledger
    from llmrec import tracking

    client = tracking.client(cfg.tracking.uri)
    logged = client.get_run(out.mlflow_run_id).data.metrics
    assert {k: logged[k] for k in m if k.startswith("cost/")} == pytest.approx(
        {k: v for k, v in m.items() if k.startswith("cost/")})

    # the ledger counts the whole run: a resumed run with nothing left holds the same numbers
    again = run_evaluation(cfg)
    assert again.stats["samples_new"] == 0
    assert {k: v for k, v in RunDir(again.run_dir).metrics().items() if k.startswith("cost/")} == \
        {k: v for k, v in m.items() if k.startswith("cost/")}

    # tables show the cost per 1,000 samples beside the headline
    from llmrec.pipelines.results.leaderboard import leaderboard, wide
    from llmrec.pipelines.results.runs_table import runs_csv, runs_table

    cell = costs.usd_text(m["cost/usd_per_1k_samples"])
    board = wide(leaderboard([out.run_dir]), primary_only=True)
    assert list(board.columns) == ["subject", "kind", "toy: accuracy", "toy: cost/1k"]
    assert board.iloc[0]["toy: cost/1k"] == cell
    console = Console(file=io.StringIO(), width=160)
    console.print(runs_table(cfg.tracking.uri, "toy", [], 10, width=160))
    text = console.file.getvalue()
    assert "cost/1k" in text and cell in text
    assert f"{m['cost/usd_per_1k_samples']}" in runs_csv(cfg.tracking.uri, "toy", [], 10)


def _cli(args: list[str]):
    from llmrec.cli import app

    return CliRunner().invoke(app, args)


def test_budget_stops_cleanly_and_a_larger_budget_resumes(tmp_path, local_ray):
    import ray

    data = _cfg(tmp_path, {"batch_size": 1, "concurrency": 1, "budget": {"tokens": 12}}, n=8, rounds=0)
    data["engine"]["delay_s"] = 0.2  # the driver writes a batch long before the actor answers the next
    data["output"]["run_name"] = "budgeted"
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "runs" / "budgeted"
    store = ResultStore(run_dir / RunDir.RESULTS)

    res = _cli(["run", str(path)])
    # each sample asks "question i": 4 prompt + 1 completion tokens. Ray Data hands the driver a block at a time
    # (8 rows in 4 blocks here), so the loop stops after the batch holding the third sample: 3 or 4 samples
    assert res.exit_code == EXIT_BUDGET == 3, res.output
    said = [line for line in res.output.splitlines() if "budget reached" in line]
    stored = len(store.finished_ids())
    assert 3 <= stored <= 4 and not RunDir(run_dir).has_metrics()
    # the rest never started: the request cache saw at most the block in flight when the loop stopped
    with sqlite3.connect(tmp_path / "runs" / "request_cache.sqlite") as db:
        asked = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        abandoned = db.execute("SELECT COUNT(*) FROM unsettled").fetchone()[0]  # answered, never stored
    assert stored <= asked <= stored + 2 and abandoned == asked - stored
    # what the engine processed: the stored samples and the answered calls of the abandoned batch
    assert len(said) == 1 and f"tokens {5 * asked} of 12" in said[0], res.output
    assert f"{stored} of 8 samples stored, {8 - stored} not run" in said[0]
    # every actor of the run is gone (Ray Data's pool, the cache service): their CPUs are free again
    total, deadline = ray.cluster_resources()["CPU"], time.monotonic() + 30
    while ray.available_resources().get("CPU", 0.0) < total and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU", 0.0) == total

    shards = store.shards()
    again = _cli(["run", str(path)])  # the same budget: spent already, nothing starts
    assert again.exit_code == 3 and f"{stored} of 8 samples stored, {8 - stored} not run" in again.output
    assert store.shards() == shards

    more = _cli(["run", str(path), "--set", "execution.budget.tokens=1000"])
    assert more.exit_code == 0, more.output
    assert re.search(r"cost/1k\s+│\s+[\d.]+k? tok", more.output), more.output  # the summary: tokens per 1,000 samples
    assert len(store.finished_ids()) == 8
    m = RunDir(run_dir).metrics()
    assert m["n_samples"] == 8 and m["cost/requests"] + m["cost/requests_from_cache"] == 8
    assert m["cost/prompt_tokens"] == 4 * m["cost/requests"] and m["cost/completion_tokens"] == m["cost/requests"]
    invocations = RunDir(run_dir).cost_invocations()  # the stopped run and the resumed one held engines
    assert len(invocations) == 2
    assert m["cost/reserved_cpu_seconds"] == pytest.approx(sum(i["held_s"] for i in invocations))


def test_a_stopped_run_redone_fresh_starts_its_ledger_afresh(tmp_path, local_ray):
    from llmrec.pipelines.runner.api import run_evaluation

    data = _cfg(tmp_path, {"budget": {"tokens": 5}}, n=4, rounds=0)
    first = pytest.raises(BudgetReached, run_evaluation, validate(RunConfig, data))
    assert first.value.exit_code == 3 and "samples stored" in str(first.value)
    data["execution"]["budget"] = {"tokens": 10_000}
    data["output"]["resume"] = False  # --fresh: the stored results and their ledger go together
    done = run_evaluation(validate(RunConfig, data))
    assert done.cost["cost/samples"] == 4 and len(RunDir(done.run_dir).cost_invocations()) == 1


def test_each_batch_is_written_when_it_finishes_not_with_the_next(tmp_path, local_ray):
    """A finished batch reaches the driver's loop (store, budget, progress bar) while the next one still runs: two
    batches of two samples, one 0.5-second request each, so the second batch ends a second after the first."""
    from llmrec.pipelines.runner.api import run_evaluation

    data = _cfg(tmp_path, {"batch_size": 2, "concurrency": 1}, n=4, rounds=0)
    data["engine"]["delay_s"] = 0.5
    seen: list[tuple[int, float]] = []
    out = run_evaluation(validate(RunConfig, data), progress=lambda done, total: seen.append((done, time.monotonic())))
    assert out.metrics["n_samples"] == 4
    assert [done for done, _ in seen] == [2, 4], seen
    # handed over one batch late (Ray Data's default prefetch), both would arrive together at the end
    assert seen[1][1] - seen[0][1] >= 0.5, seen


COUNTS = ("requests", "requests_from_cache", "prompt_tokens", "cached_tokens", "completion_tokens")


def test_a_budget_stop_and_its_resume_count_what_one_run_counts(tmp_path, local_ray):
    """Two actors answer at once; the budget stops the loop after the first batch it wrote, so the other actor's
    batch, half answered (its first call's answer in the request cache), is abandoned. The stopped run's ledger
    counts that call, and the resumed run stores it as the run's own engine call, not as a free cache hit: stop +
    resume record what one run in one go records. Each sample makes two calls of ``delay_s`` each, so the other actor's
    first call is answered before the first batch is written as long as the two actors start within ``delay_s`` of each
    other (with one call each and no delay, the other answer often came too late on a loaded machine)."""
    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.runner.cost import call_usage, merged, record_usage
    from llmrec.serving.cache import RequestCache

    delay_s = 3.0

    def cfg(where: str, budget: int | None) -> RunConfig:
        data = _cfg(tmp_path / where, {"batch_size": 1, "concurrency": 2, **({"budget": {"tokens": budget}}
                                                                             if budget else {})}, n=4, rounds=1)
        data["engine"]["delay_s"] = delay_s
        data["output"]["run_name"] = "r"
        return validate(RunConfig, data)

    one = run_evaluation(cfg("one", None)).cost
    assert one["cost/requests"] == 8 and one["cost/requests_from_cache"] == 0  # four questions, a follow-up each

    stopped = pytest.raises(BudgetReached, run_evaluation, cfg("two", 5))
    run_dir = tmp_path / "two" / "runs" / "r"
    records = ResultStore(run_dir / RunDir.RESULTS).load()
    cache = RequestCache(tmp_path / "two" / "runs" / "request_cache.sqlite")
    abandoned = call_usage(cache.unsettled(str(run_dir)))
    cache.close()
    # the work of the abandoned batches is the run's: counted in the stop's line, then once more nowhere
    assert len(records) < 4 and abandoned.get("subject", Usage()).requests >= 1, (len(records), abandoned)
    spent = merged(record_usage(records.values(), {}), abandoned)
    assert f"tokens {sum(u.tokens for u in spent.values())} of 5" in str(stopped.value)

    resumed = run_evaluation(cfg("two", 10_000)).cost
    assert {k: resumed[f"cost/{k}"] for k in COUNTS} == {k: one[f"cost/{k}"] for k in COUNTS}
    cache = RequestCache(tmp_path / "two" / "runs" / "request_cache.sqlite")
    assert cache.unsettled(str(run_dir)) == []  # all of it stored now: counted from the records
    cache.close()

"""Readers never write, run directories never steer: no verb but the run itself writes inside a run directory, one
process writes a run directory at a time, a fresh start leaves no earlier numbers, a run's MLflow record belongs to
its directory, reading a store changes nothing in it, and a reader logs to its own tracking store, never to the one
a directory's config names. Runs are the real runner's on the fake engine and the toy benchmark (local Ray: the
tests marked slow), or built by hand."""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from llmrec.config import validate
from llmrec.errors import BudgetReached, ConfigError, DataError
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.rundir import RunDir
from tests.pipelines.toy.benchmark import NAME


def _cfg(root: Path, run_name: str | None = None, execution: dict | None = None, **bench) -> dict:
    return {"benchmark": {"name": NAME, "n": 3, "rounds": 0, **bench},
            "engine": {"type": "fake", "default": "yes"},
            "execution": {"batch_size": 2, "backoff_s": 0.01, "retries": 1, **(execution or {})},
            "ray": {"num_cpus": 2},
            "output": {"dir": str(root / "runs"), "run_name": run_name},
            "tracking": {"uri": f"sqlite:///{root}/mlruns.db", "artifact_root": str(root / "art")}}


def _hashes(d: Path) -> dict[str, str]:
    return {str(f.relative_to(d)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.rglob("*"))
            if f.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, local_ray) -> Path:
    """A finished toy run: config, metrics, samples, predictions, result and transcript shards, cost ledger, MLflow
    run id, lock file."""
    from llmrec.pipelines.runner.api import run_evaluation

    root = tmp_path_factory.mktemp("finished")
    out = run_evaluation(validate(RunConfig, _cfg(root, "R1")))
    return Path(out.run_dir)


@pytest.fixture()
def hand_run(tmp_path) -> Path:
    """A run directory built without Ray: config, metrics, samples, a result shard, a transcript shard, a cost
    ledger, an MLflow run id."""
    from llmrec.pipelines.common.store import ResultStore
    from llmrec.transcripts import TextStore
    from tests.pipelines.results_fixtures import prefeval_rows, write_run

    d = write_run(tmp_path / "hand", "prefeval", "m", {"accuracy": 0.5}, prefeval_rows(2))
    rd = RunDir(d)
    ResultStore(rd.results).write([{"sample_id": "a", "status": "ok"}, {"sample_id": "b", "status": "ok"}])
    TextStore(rd.transcripts).add({"k": "a text"})
    rd.add_cost_invocation({"held_s": 1.0, "reserved": {}})
    rd.set_mlflow_run_id("0123")
    return d


@pytest.fixture(scope="module")
def cli():
    from llmrec.cli import _mount_benchmark_clis, _mount_extra_verbs, app

    if not any(c.name == "report" for c in app.registered_commands):
        _mount_extra_verbs()
    if not any(g.name == "prefeval" for g in app.registered_groups):
        _mount_benchmark_clis()
    return lambda args: CliRunner().invoke(app, [str(a) for a in args])


# ---- 1. only the run writes inside its run directory --------------------------------------------------------

@pytest.mark.slow  # a real run on a local Ray
def test_no_verb_writes_inside_a_run_directory(finished_run, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = finished_run
    assert {"resolved.yaml", "metrics.json", "samples.parquet", "cost_ledger.json", "mlflow_run_id",
            ".llmrec.lock"} <= set(_hashes(run))
    assert any(n.startswith("results/") for n in _hashes(run)) and any(n.startswith("transcripts/")
                                                                      for n in _hashes(run))
    before = _hashes(run)
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"sample_id": "a", "gold": "A", "output": "<choice>A</choice>"}\n')
    judge = tmp_path / "judge.yaml"
    judge.write_text(yaml.safe_dump({"type": "fake", "default": "no"}))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(_cfg(tmp_path)))
    verbs = [
        lambda t: ["score", "prefeval-mcq", "--predictions", preds, "--out", t],
        lambda t: ["report", run, "--out", t],
        lambda t: ["leaderboard", run, "--out", t, "--no-tracking"],
        lambda t: ["compare", run, run, "--out", t, "--no-tracking"],
        lambda t: ["judges", run, run, "--out", t, "--no-tracking"],
        lambda t: ["rejudge", run, "--judge", judge, "--out", t],
        lambda t: ["prefeval", "export-sft", "--run", run, "--out", t],
        lambda t: ["prefeval", "compare", "--mcq", run, "--gen", run, "--plot", t],
        lambda t: ["prefeval", "compare", "--mcq", run, "--gen", run, "--plot", tmp_path / "x.png", "--out", t],
        lambda t: ["beyond_utility", "candidates", cfg, "--out", t],
        lambda t: ["perrecbench", "export-sft", cfg, "--out", t],
        lambda t: ["lrworld", "build", "--out", t],
        lambda t: ["lrworld", "plot", preds, "--out", t],
        lambda t: ["sft", "merge", "--input", tmp_path, "--weight", "1", "--out", t],
        lambda t: ["data", "fetch", "prefeval", "--dest", t],
        lambda t: ["run", cfg, "--set", f"output.dir={t}"],
        lambda t: ["run", cfg, "--set", f"output.cache_path={t}"],
    ]
    targets = [run, *sorted(run.rglob("*")), run / "new.html", run / "results" / "new"]
    for make in verbs:
        for target in targets:
            args = make(target)
            res = cli(args)
            text = " ".join(res.output.split())
            assert res.exit_code == 2, (args, res.output)
            assert "inside the run directory" in text or "is the source run" in text, (args, res.output)
    assert _hashes(run) == before  # nothing inside the run changed, nothing was added
    assert not list(tmp_path.glob("runs/*"))  # and the refused runs wrote nothing either


def test_verbs_refuse_every_file_of_a_run_built_by_hand(hand_run, cli, tmp_path, monkeypatch):
    """The same rule without Ray: each output option of a few verbs pointed at each file of a run directory."""
    monkeypatch.chdir(tmp_path)
    before = _hashes(hand_run)
    for target in [hand_run, *sorted(hand_run.rglob("*"))]:
        for args in (["report", hand_run, "--out", target], ["leaderboard", hand_run, "--out", target],
                     ["compare", hand_run, hand_run, "--out", target], ["data", "fetch", "prefeval", "--dest", target],
                     ["score", "prefeval-mcq", "--predictions", hand_run / "samples.parquet", "--out", target]):
            res = cli(args)
            assert res.exit_code == 2 and "inside the run directory" in " ".join(res.output.split()), (args, res.output)
    assert _hashes(hand_run) == before


def test_a_suite_index_and_a_subject_run_id_are_refused_as_outputs(tmp_path, cli):
    from tests.pipelines.results_fixtures import suite_dir

    s = suite_dir(tmp_path)
    (s / "gemma-a" / "mlflow_run_id").write_text("abc")
    for target, says in ((s / "suite.json", "the index of the suite"), (s / "gemma-a" / "mlflow_run_id", "MLflow run id")):
        before = target.read_bytes()
        res = cli(["report", s / "gemma-a" / "prefeval_mcq", "--out", target])
        assert res.exit_code == 2 and says in " ".join(res.output.split()), res.output
        assert target.read_bytes() == before
    res = cli(["report", s, "--out", tmp_path / "elsewhere.html"])  # outside every run: written
    assert res.exit_code == 0, res.output


# ---- 2. --fresh removes what the earlier results produced before any work -----------------------------------

@pytest.mark.slow  # a real run on a local Ray
def test_fresh_then_a_budget_stop_leaves_no_earlier_numbers(tmp_path, local_ray):
    from llmrec.pipelines.runner.api import run_evaluation

    data = _cfg(tmp_path, n=4)
    done = run_evaluation(validate(RunConfig, data))
    rd = Path(done.run_dir)
    assert (rd / "metrics.json").exists() and (rd / "samples.parquet").exists()
    data["execution"]["budget"] = {"tokens": 5}
    data["output"].update(resume=False, cache=False)  # --fresh --no-cache: the answers are paid for again
    stop = pytest.raises(BudgetReached, run_evaluation, validate(RunConfig, data))
    assert stop.value.exit_code == 3
    left = {p.name for p in rd.iterdir()}
    assert not left & {"metrics.json", "samples.parquet", "predictions.jsonl", "mlflow_run_id"}, left
    assert not list((rd / "plots").glob("*")) if (rd / "plots").exists() else True


def test_suite_fresh_discards_every_entry_before_the_first_runs(tmp_path):
    from llmrec.pipelines.runner.execution import run_dir_for
    from llmrec.pipelines.runner.run_config import absolute_locations
    from llmrec.pipelines.runner.suite import _discard_entries
    from llmrec.pipelines.runner.suite_config import SuiteConfig

    cfg = validate(SuiteConfig, {"name": "s", "subjects": {"a": {"type": "fake"}, "b": {"type": "fake"}},
                                 "benchmarks": [{"entry": "toy", "benchmark": {"name": NAME, "n": 2}}],
                                 "output": {"dir": str(tmp_path / "runs"), "resume": False}})
    dirs = [Path(run_dir_for(absolute_locations(cfg.run_config(s, cfg.benchmarks[0]))).uri) for s in ("a", "b")]
    for d in dirs:
        (d / "results").mkdir(parents=True)
        (d / "results" / "x.parquet").write_bytes(b"old")
        for name in ("metrics.json", "samples.parquet", "resolved.yaml"):
            (d / name).write_text("old")
    _discard_entries(cfg, ["b"])
    assert (dirs[0] / "metrics.json").exists()  # not in scope: kept
    assert not (dirs[1] / "metrics.json").exists() and not (dirs[1] / "samples.parquet").exists()
    assert not list((dirs[1] / "results").glob("*.parquet"))


# ---- 3. one writer per run directory -----------------------------------------------------------------------

HOLD = """
import sys
from llmrec.rundir import RunDir
with RunDir(sys.argv[1]).writer():
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_second_writer_stops_at_once_naming_the_holder_and_a_dead_holder_frees_it(tmp_path):
    from llmrec.pipelines.runner.execution import plan, run_dir_for
    from llmrec.pipelines.runner.run_config import absolute_locations

    cfg = validate(RunConfig, _cfg(tmp_path))
    where = Path(run_dir_for(absolute_locations(cfg)).uri)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(where)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with pytest.raises(ConfigError, match=f"another llmrec process is writing this run directory \\(pid "
                                              f"{holder.pid} "):
            plan(cfg)
        assert time.monotonic() - t0 < 5  # at once, not after waiting
        assert not (where / "resolved.yaml").exists()  # the second writer changed nothing
    finally:
        holder.kill()
        holder.wait()
    p = plan(cfg)  # the lock went with its killed holder
    p.hold.close()
    assert (where / "resolved.yaml").exists()


def test_the_writer_lock_is_released_when_the_run_ends(tmp_path):
    rd = RunDir(tmp_path / "r")
    with rd.writer():
        pass
    out = subprocess.run([sys.executable, "-c", HOLD, str(tmp_path / "r")], input="", capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "held", out.stderr


# ---- 4. a run's MLflow record is bound to its directory ----------------------------------------------------

@pytest.mark.slow  # a real run on a local Ray
def test_a_copied_run_directory_gets_its_own_mlflow_run(tmp_path, local_ray, caplog):
    from llmrec import tracking
    from llmrec.pipelines.runner.api import run_evaluation

    r1 = run_evaluation(validate(RunConfig, _cfg(tmp_path, "R1")))
    r2 = run_evaluation(validate(RunConfig, _cfg(tmp_path, "R2", n=2)))
    t19 = tmp_path / "runs" / "T19"
    shutil.copytree(r1.run_dir, t19)
    (t19 / "mlflow_run_id").write_text(r2.mlflow_run_id)
    with caplog.at_level("WARNING"):
        t = run_evaluation(validate(RunConfig, _cfg(tmp_path, "T19")))
    client = tracking.client(f"sqlite:///{tmp_path}/mlruns.db")
    tags = client.get_run(r2.mlflow_run_id).data.tags
    assert tags[tracking.TAG_RUN_DIR] == "R2" and tags[tracking.TAG_RUN_LOCATION] == str(Path(r2.run_dir))
    assert t.mlflow_run_id not in (r1.mlflow_run_id, r2.mlflow_run_id)
    assert (t19 / "mlflow_run_id").read_text() == t.mlflow_run_id
    assert "made for" in caplog.text and "gets a new MLflow run" in caplog.text
    again = run_evaluation(validate(RunConfig, _cfg(tmp_path, "T19")))  # its own run: resumed, not replaced
    assert again.mlflow_run_id == t.mlflow_run_id


# ---- 5. readers never change what they read ----------------------------------------------------------------

def test_a_reader_reports_a_damaged_shard_and_leaves_it(hand_run, tmp_path):
    from llmrec.pipelines.results.stored import open_run

    t07 = tmp_path / "T07"
    shutil.copytree(hand_run, t07)
    shard = sorted((t07 / "results").glob("*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[:40])  # truncated
    before = _hashes(t07)
    with pytest.raises(DataError, match=f"{shard.name}: an unreadable result shard .*nothing was changed"):
        open_run(t07).stored_rows()
    assert _hashes(t07) == before and not list(t07.rglob("*.corrupt"))


# ---- 6. a reader's tracking store is the reader's ----------------------------------------------------------

def test_a_reader_never_contacts_or_creates_the_store_a_run_config_names(tmp_path, cli, monkeypatch):
    from tests.pipelines.results_fixtures import prefeval_rows, write_run

    monkeypatch.chdir(tmp_path)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    theirs = tmp_path / "theirs"
    served = write_run(tmp_path / "served", "prefeval", "m", {"accuracy": 0.5}, prefeval_rows(),
                       {"enabled": True, "uri": f"http://127.0.0.1:{port}", "artifact_root": str(theirs / "a1")})
    filed = write_run(tmp_path / "filed", "prefeval", "m", {"accuracy": 0.5}, prefeval_rows(),
                      {"enabled": True, "uri": f"sqlite:///{theirs}/named.db", "artifact_root": str(theirs / "a2")})
    theirs.mkdir()
    mine = tmp_path / "mine.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{mine}")
    for run in (served, filed):
        res = cli(["leaderboard", run, "--out", tmp_path / "lb"])
        assert res.exit_code == 0, res.output
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody connected to the server the config names
    listener.close()
    assert list(theirs.iterdir()) == []  # no database, no artifacts where the configs point
    assert mine.exists()


def test_reader_section_keeps_the_switch_and_the_name_but_not_the_store(monkeypatch):
    from llmrec import settings, tracking

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    named = {"enabled": False, "uri": "http://10.0.0.1:5000", "artifact_root": "s3://b/x", "experiment": "e"}
    got = tracking.reader_section(named)
    assert (got.enabled, got.experiment) == (False, "e")
    assert (got.uri, got.artifact_root) == (settings.DEFAULT_TRACKING_URI, settings.DEFAULT_ARTIFACT_ROOT)
    assert tracking.reader_section(named, "sqlite:///x.db").uri == "sqlite:///x.db"


# ---- 7. smaller -----------------------------------------------------------------------------------------------

def test_a_cache_path_on_the_tracking_database_or_inside_a_run_is_refused(tmp_path, hand_run):
    from llmrec.pipelines.runner.preflight import check_before_work

    data = _cfg(tmp_path)
    data["output"]["cache_path"] = str(tmp_path / "mlruns.db")
    with pytest.raises(ConfigError, match="output.cache_path .*mlruns.db: is the MLflow tracking store's file"):
        check_before_work([validate(RunConfig, data)])
    data["output"]["cache_path"] = str(hand_run / "cache.sqlite")
    with pytest.raises(ConfigError, match="output.cache_path .*inside the run directory"):
        check_before_work([validate(RunConfig, data)])
    assert not (tmp_path / "mlruns.db").exists() and not (hand_run / "cache.sqlite").exists()


@pytest.mark.parametrize("section, key", [({"budget": {"tokens": True}}, "execution.budget.tokens"),
                                          ({"concurrency": True}, "execution.concurrency"),
                                          ({"max_failed_share": False}, "execution.max_failed_share")])
def test_a_boolean_is_not_a_number(tmp_path, section, key):
    with pytest.raises(ConfigError, match=f"'{key}': .*expected a number, got the boolean"):
        validate(RunConfig, _cfg(tmp_path, execution=section))


def test_rejudge_takes_its_store_from_the_invocation_not_from_the_source(hand_run, tmp_path, monkeypatch):
    from llmrec.pipelines.results.rejudge import rejudge_config

    cfg = yaml.safe_load((hand_run / "resolved.yaml").read_text())
    cfg["benchmark"] = {"name": "prefeval", "task": "gen", "topics": ["travel_hotel"], "forms": ["explicit"],
                        "methods": ["zero-shot"], "turns": [0]}
    cfg["judge"] = {"type": "fake", "default": "yes"}
    cfg["tracking"] = {"enabled": True, "uri": "http://127.0.0.1:9/", "artifact_root": "s3://theirs/art",
                       "experiment": "theirs"}
    (hand_run / "resolved.yaml").write_text(yaml.safe_dump(cfg))
    judge = tmp_path / "judge.yaml"
    judge.write_text(yaml.safe_dump({"type": "fake", "default": "no"}))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mine.db")
    new, _ = rejudge_config(hand_run, judge, [], tmp_path / "rejudged")
    assert new.tracking.uri in (None, f"sqlite:///{tmp_path}/mine.db") and new.tracking.experiment == "theirs"
    assert not new.tracking.artifact_root.startswith("s3://")


def test_bound_run_resumes_only_the_directory_s_own_mlflow_run(tmp_path):
    """What a run directory and a suite's subject folder both go through before resuming their MLflow run."""
    from llmrec import storage, tracking
    from llmrec.pipelines.runner.report import bound_run

    client = tracking.client(f"sqlite:///{tmp_path}/mlruns.db")
    exp = client.create_experiment("e", artifact_location=(tmp_path / "art").as_uri())
    here, other = storage.Storage(str(tmp_path / "suite" / "gemma")), storage.Storage(str(tmp_path / "copy" / "gemma"))
    made = client.create_run(exp, tags={tracking.TAG_RUN_LOCATION: here.uri}).info.run_id
    legacy = client.create_run(exp, tags={}).info.run_id  # logged before the location tag
    named = client.create_run(exp, tags={tracking.TAG_RUN_DIR: "R2"}).info.run_id
    assert bound_run(client, made, here) == made
    assert bound_run(client, made, other) is None  # a copy: a new run, the original is not touched
    assert bound_run(client, legacy, other) == legacy
    assert bound_run(client, named, other) is None and bound_run(client, "no-such-run", here) is None

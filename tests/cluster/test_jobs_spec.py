"""`llmrec submit` without a cluster: the resolved config, the job spec, secrets kept out, the entrypoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from llmrec.cluster.entrypoint import main as entrypoint_main
from llmrec.cluster.jobs import REQUIREMENTS, RESOLVED, build_job, pinned_requirements, stage_package
from llmrec.cluster.resolve import env_names_in, resolve_for_cluster, secret_values
from llmrec.errors import ConfigError
from tests.pipelines.conftest import config

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-this-value-must-never-leave-the-submitter"


def openai_config(tmp_path: Path) -> Path:
    return config(tmp_path, engine={"type": "openai", "model": "m", "api_key_env": "LLMREC_TEST_API_KEY"})


def test_relative_locations_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config(tmp_path)
    raw = resolve_for_cluster(cfg, ["output.dir=runs", "data.dir=data", "tracking.uri=sqlite:///mlruns.db",
                                    "tracking.artifact_root=./mlartifacts", "output.cache_path=c/cache.sqlite"])
    assert raw["output"]["dir"] == str(tmp_path / "runs")
    assert raw["data"]["dir"] == str(tmp_path / "data")
    assert raw["output"]["cache_path"] == str(tmp_path / "c" / "cache.sqlite")
    assert raw["tracking"]["uri"] == f"sqlite:///{tmp_path}/mlruns.db"
    assert raw["ray"] == {"address": "auto", "num_cpus": None}  # the job joins the cluster it runs on


def test_uris_kept_and_server_gets_the_artifacts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw = resolve_for_cluster(config(tmp_path), ["output.dir=s3://bucket/runs", "tracking.uri=http://mlflow:5000",
                                                 "tracking.artifact_root=./mlartifacts"])
    assert raw["output"]["dir"] == "s3://bucket/runs"
    assert raw["tracking"]["uri"] == "http://mlflow:5000"
    assert raw["tracking"]["artifact_root"] == "mlflow-artifacts:///prefeval"
    explicit = resolve_for_cluster(config(tmp_path), ["tracking.uri=http://mlflow:5000",
                                                      "tracking.artifact_root=s3://art/x"])
    assert explicit["tracking"]["artifact_root"] == "s3://art/x"


def test_tracking_uri_from_the_submitters_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking.example:5000")
    data = yaml.safe_load(config(tmp_path).read_text())
    data["tracking"] = {}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(data))
    assert resolve_for_cluster(tmp_path / "t.yaml")["tracking"]["uri"] == "http://tracking.example:5000"


def test_password_in_tracking_uri_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="MLFLOW_TRACKING_PASSWORD"):
        resolve_for_cluster(config(tmp_path), ["tracking.uri=http://me:hunter2@mlflow:5000"])


def test_invalid_config_fails_on_the_submitting_machine(tmp_path):
    with pytest.raises(ConfigError, match="engine.n_ctxx|n_ctxx"):
        resolve_for_cluster(config(tmp_path), ["engine.n_ctxx=4"])


def test_secret_detection_by_key_words():
    raw = {"engine": {"api_key": "x", "api_key_env": "NAME", "max_tokens": 3, "hf_token": "", "password": None},
           "store": {"secret_access_key": "y"}, "judge": {"answer_max_tokens": 16}}
    assert secret_values(raw) == ["engine.api_key", "store.secret_access_key"]
    assert env_names_in(raw) == ["NAME"]


def test_job_spec_names_variables_and_holds_no_values(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMREC_TEST_API_KEY", SECRET)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    spec = build_job(openai_config(tmp_path), tmp_path / "stage", env=["HF_TOKEN"], code="installed")
    shipped = json.dumps(spec.submit_kwargs()) + (tmp_path / "stage" / "job" / RESOLVED).read_text()
    assert SECRET not in shipped
    assert spec.entrypoint.endswith("resolved.yaml --requirements requirements.txt "
                                    "--require-env HF_TOKEN --require-env LLMREC_TEST_API_KEY")
    assert spec.metadata["llmrec.require_env"] == "HF_TOKEN,LLMREC_TEST_API_KEY"
    assert "py_modules" not in spec.runtime_env and "pip" not in spec.runtime_env
    # only the resolved config and the dependency list the entrypoint checks: no code that could shadow llmrec
    assert sorted(os.listdir(spec.runtime_env["working_dir"])) == [REQUIREMENTS, RESOLVED]
    shipped_reqs = (tmp_path / "stage" / "job" / REQUIREMENTS).read_text().splitlines()
    assert shipped_reqs == pinned_requirements()


def test_env_takes_names_not_values(tmp_path):
    with pytest.raises(ConfigError, match="NAMES, never values"):
        build_job(config(tmp_path), tmp_path / "stage", env=[f"OPENAI_API_KEY={SECRET}"])


@pytest.mark.integration  # a clean interpreter imports the shipped package alone
def test_shipped_package_is_the_whole_namespace(tmp_path):
    pkg = stage_package(tmp_path)
    for part in ("cli.py", "cluster/entrypoint.py", "pipelines/runner/api.py", "serving/engines/fake.py",
                 "pipelines/benchmarks/prefeval/manifest.json", "models/__init__.py"):
        assert (pkg / part).is_file(), part
    # importable on its own, ahead of the installed copy (as the job's py_modules entry is)
    code = "import llmrec.pipelines.runner.api, llmrec, sys; print(llmrec.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(tmp_path)},
                         capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert out.strip() == str(pkg / "__init__.py")


def test_pip_deps_are_the_pyproject_pins(tmp_path):
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(pinned_requirements()) == sorted(pins)
    spec = build_job(config(tmp_path), tmp_path / "stage", deps="pip", code="installed")
    assert spec.runtime_env["pip"] == pinned_requirements()


def test_entrypoint_names_the_missing_variable(monkeypatch, capsys):
    monkeypatch.delenv("LLMREC_TEST_UNSET", raising=False)
    monkeypatch.setenv("LLMREC_TEST_SET", SECRET)
    assert entrypoint_main(["resolved.yaml", "--require-env", "LLMREC_TEST_SET",
                            "--require-env", "LLMREC_TEST_UNSET"]) == 2
    message = capsys.readouterr().err
    assert "LLMREC_TEST_UNSET" in message and "LLMREC_TEST_SET" not in message and SECRET not in message


def test_entrypoint_names_missing_packages_before_importing_them(tmp_path, capsys):
    """A cluster Python without llmrec's dependencies: the job says which and how to fix it, before any
    import of them (the check uses the standard library only)."""
    reqs = tmp_path / REQUIREMENTS
    reqs.write_text("pyyaml==6.0.3\nray[data,serve]==2.60.0\nllmrec-no-such-package==1.0\n")
    assert entrypoint_main(["resolved.yaml", "--requirements", str(reqs)]) == 2
    message = capsys.readouterr().err
    assert "llmrec-no-such-package==1.0" in message and "pyyaml" not in message and "ray[" not in message
    assert "--deps pip" in message and "cluster/Dockerfile" in message
    # in a bare Python (no third-party package at all), the entrypoint module itself still imports and reports
    bare = subprocess.run([sys.executable, "-I", "-S", "-c",
                           f"import sys; sys.path[:0] = [{str(stage_package(tmp_path / 'code').parent)!r}]; "
                           "from llmrec.cluster.entrypoint import main; "
                           f"sys.exit(main(['resolved.yaml', '--requirements', {str(reqs)!r}]))"],
                          capture_output=True, text=True)
    assert bare.returncode == 2 and "pyyaml==6.0.3" in bare.stderr and "ModuleNotFoundError" not in bare.stderr


def test_cli_dry_run_and_missing_address(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from llmrec.cli import _mount_extra_verbs, app

    _mount_extra_verbs()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    runner = CliRunner()
    out = runner.invoke(app, ["submit", str(config(tmp_path)), "--dry-run", "--code", "installed"])
    assert out.exit_code == 0, out.output
    assert "llmrec.cluster.entrypoint resolved.yaml" in out.output and "address: auto" in out.output
    listed = runner.invoke(app, ["jobs", "list"])
    assert listed.exit_code == 2 and "RAY_ADDRESS" in listed.output


def test_a_suite_is_submitted_as_llmrec_suite(tmp_path, monkeypatch):
    """A suite config (it has `subjects:`) is resolved as each of its runs is, its path entries inlined (the
    cluster has no copy of the submitter's files), and the job runs `llmrec suite` on it."""
    from llmrec.pipelines.runner.suite_config import suite_from_raw
    from tests.pipelines.runner.test_suite import suite_file

    monkeypatch.chdir(tmp_path)
    path = suite_file(tmp_path)
    spec = build_job(path, tmp_path / "stage", ["output.dir=runs", "tracking.uri=sqlite:///m.db"], code="installed")
    assert spec.entrypoint.endswith("--verb suite") and spec.metadata["llmrec.benchmark"] == "suite s1"
    assert spec.submission_id.startswith("llmrec-s1-")
    raw = yaml.safe_load((tmp_path / "stage" / "job" / RESOLVED).read_text())
    assert raw["output"]["dir"] == str(tmp_path / "runs") and raw["tracking"]["uri"] == f"sqlite:///{tmp_path}/m.db"
    assert raw["ray"] == {"address": "auto", "num_cpus": None}
    third = raw["benchmarks"][2]
    assert "config" not in third and third["benchmark"]["n"] == 3 and third["execution"] == {"batch_size": 1}
    assert suite_from_raw(raw, "resolved").entry_names() == ["t1", "t2", "t3"]


def test_entrypoint_runs_the_verb_it_is_given(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "execv", lambda exe, argv: calls.append(argv))
    assert entrypoint_main([str(tmp_path / "resolved.yaml"), "--verb", "suite"]) == 0
    assert calls[0][-2:] == ["suite", str(tmp_path / "resolved.yaml")]


def test_a_template_file_outside_the_working_directory_is_shipped_with_the_job(tmp_path, monkeypatch):
    """A benchmark's template file, wherever it lies: the job carries a copy and its config names the copy (the
    cluster has no copy of the submitter's files), not the submitter's path."""
    outside = tmp_path / "elsewhere" / "mcq.txt"
    outside.parent.mkdir()
    outside.write_text("Q: {question}\n{options}\n{reminder}\n")
    work = tmp_path / "wd"
    work.mkdir()
    monkeypatch.chdir(work)
    spec = build_job(config(tmp_path, templates={"mcq_question": str(outside)}), tmp_path / "stage", code="installed")
    job = Path(spec.runtime_env["working_dir"])
    shipped = yaml.safe_load((job / RESOLVED).read_text())["benchmark"]["templates"]["mcq_question"]
    assert not Path(shipped).is_absolute() and str(outside) not in (job / RESOLVED).read_text()
    assert (job / shipped).read_text() == outside.read_text()


def test_every_jurors_key_variable_is_required_by_the_job(tmp_path):
    """A jury's judges each name their key's variable: the job requires all of them, not only the first judge's."""
    cfg = config(tmp_path, name="j.yaml")
    data = yaml.safe_load(cfg.read_text())
    data["judge"] = [{"type": "openai", "model": "a", "api_key_env": "KEY_A"},
                     {"type": "openai", "model": "b", "api_key_env": "KEY_B"}]
    cfg.write_text(yaml.safe_dump(data))
    raw = resolve_for_cluster(cfg)
    assert {"KEY_A", "KEY_B"} <= set(env_names_in(raw))
    assert secret_values({"judging": {"jurors": [{"api_key": "x"}]}}) == ["judging.jurors[0].api_key"]


@pytest.mark.parametrize("query", ["auth=TOPSECRET", "apitoken=TOPSECRET", "sas=TOPSECRET"])
def test_a_credential_in_a_base_urls_query_is_not_submitted(tmp_path, query):
    """Any query value of a configured URL but the harmless ones (``api-version``) is refused by submit, so the
    job package and --dry-run never carry it."""
    cfg = config(tmp_path, engine={"type": "openai", "model": "m", "base_url": f"http://h:8000/v1?{query}"})
    with pytest.raises(ConfigError, match="credentials inside a URL") as e:
        build_job(cfg, tmp_path / "stage", code="installed")
    assert "TOPSECRET" not in str(e.value)
    ok = config(tmp_path, name="ok.yaml",
                engine={"type": "openai", "model": "m", "base_url": "http://h:8000/v1?api-version=2024-02"})
    assert resolve_for_cluster(ok)["engine"]["base_url"] == "http://h:8000/v1?api-version=2024-02"


class _AgentlessHead:
    """A Jobs client whose head answers "no available agent" for its first ``refusals`` submissions (Ray's text)."""

    def __init__(self, refusals: int, other: str | None = None):
        self.refusals, self.other, self.calls = refusals, other, []

    def submit_job(self, **kwargs):
        self.calls.append(kwargs["submission_id"])
        if self.other:
            raise RuntimeError(f"Request failed with status code 400: {self.other}.")
        if len(self.calls) <= self.refusals:
            raise RuntimeError("Request failed with status code 500: No available agent to submit job, please try "
                               "again later..")
        return kwargs["submission_id"]


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_submit_waits_for_the_job_agent_of_a_fresh_head(tmp_path):
    from llmrec.cluster.jobs import JobSpec, submit_when_ready

    spec, clock, said = JobSpec("llmrec-x-1", "true", {}), _Clock(), []
    head = _AgentlessHead(refusals=3)
    assert submit_when_ready(head, spec, 60, said.append, clock, clock.sleep, poll_s=2) == "llmrec-x-1"
    assert head.calls == ["llmrec-x-1"] * 4 and clock.now == 6.0  # the same id each time: a refusal made no job
    assert len(said) == 1 and "job agent" in said[0] and "60 s" in said[0]


def test_submit_gives_up_on_an_agent_that_never_comes_and_says_what_to_do(tmp_path):
    from llmrec.cluster.jobs import JobSpec, submit_when_ready
    from llmrec.errors import RunFailed

    spec, clock = JobSpec("llmrec-x-1", "true", {}), _Clock()
    head = _AgentlessHead(refusals=10**6)
    with pytest.raises(RunFailed) as e:
        submit_when_ready(head, spec, 30, lambda m: None, clock, clock.sleep, poll_s=2)
    text = str(e.value)
    assert clock.now == 30.0 and len(head.calls) == 16  # bounded: asked every 2 s for 30 s, then stopped
    for what in ("no job agent after 30 s", "re-run `llmrec submit`", "--agent-wait", "ray status",
                 "dashboard_agent.log"):
        assert what in text, text
    # any other refusal is not waited for
    with pytest.raises(RuntimeError, match="invalid runtime_env"):
        submit_when_ready(_AgentlessHead(0, other="invalid runtime_env"), spec, 30, lambda m: None, clock,
                          clock.sleep)


def test_cli_submit_waits_for_the_agent_then_submits(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from llmrec.cli import _mount_extra_verbs, app
    from llmrec.cluster import jobs, jobs_cli

    _mount_extra_verbs()
    head = _AgentlessHead(refusals=2)
    monkeypatch.setattr(jobs_cli, "client", lambda address: head)
    clock = _Clock()  # no real waiting: the module's clock and sleep are the test's
    monkeypatch.setattr(jobs, "time", SimpleNamespace(monotonic=clock, sleep=clock.sleep, strftime=time.strftime))
    out = CliRunner().invoke(app, ["submit", str(config(tmp_path)), "--code", "installed", "--address",
                                   "http://127.0.0.1:1"])
    assert out.exit_code == 0, out.output
    assert "waiting for the head's job agent" in out.output and f"submitted {head.calls[0]}" in out.output
    assert len(head.calls) == 3
    never = _AgentlessHead(refusals=10**6)
    monkeypatch.setattr(jobs_cli, "client", lambda address: never)
    failed = CliRunner().invoke(app, ["submit", str(config(tmp_path)), "--code", "installed", "--agent-wait", "4"])
    assert failed.exit_code == 1 and "no job agent after 4 s" in failed.output, failed.output
    assert clock.now == 2 * 2.0 + 4.0  # two seconds apart, in test time

"""KubeRay manifests validate against the KubeRay CRDs; the Dockerfile's pins are pyproject's; the Serve builder."""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT.parent / "shared" / "reference" / "kuberay-crds"
MANIFESTS = {"raycluster.yaml": "rayclusters", "rayjob.yaml": "rayjobs", "rayservice.yaml": "rayservices"}


@functools.cache
def crd_spec_schema(plural: str) -> dict:
    path = CRDS / f"ray.io_{plural}.yaml"
    if not path.is_file():
        pytest.skip(f"KubeRay CRD {path.name} not found under {CRDS}")
    crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # ~1 MB each
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return version["schema"]["openAPIV3Schema"]["properties"]["spec"]


def manifest(name: str) -> dict:
    return yaml.safe_load((ROOT / "cluster" / "kuberay" / name).read_text())


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_manifest_spec_validates_against_crd(name):
    import jsonschema

    doc = manifest(name)
    assert doc["apiVersion"] == "ray.io/v1"
    schema = crd_spec_schema(MANIFESTS[name])
    jsonschema.Draft7Validator(schema).validate(doc["spec"])
    # the check can fail: a wrongly typed field is rejected by the same schema
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema["properties"]["suspend"]).validate("yes")


def _cluster_spec(doc: dict) -> dict:
    return doc["spec"].get("rayClusterSpec") or doc["spec"].get("rayClusterConfig") or doc["spec"]


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_cpu_head_and_gpu_workers_in_the_llmrec_images(name):
    spec = _cluster_spec(manifest(name))
    assert spec["rayVersion"] == _pyproject_pin("ray[data,serve,tune]")
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in head["resources"]["limits"] and head["image"].endswith("-cpu")
    gpu = [g for g in spec["workerGroupSpecs"]
           if "nvidia.com/gpu" in g["template"]["spec"]["containers"][0]["resources"]["limits"]]
    assert gpu and all(g["template"]["spec"]["containers"][0]["image"].endswith("-gpu") for g in gpu)


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_token_auth_is_on_where_the_dashboard_listens_on_all_interfaces(name):
    """The head's dashboard (the Jobs API: code execution) answers on 0.0.0.0, so every shipped cluster
    wants Ray's token (KubeRay creates it and sets RAY_AUTH_MODE/RAY_AUTH_TOKEN in the containers)."""
    spec = _cluster_spec(manifest(name))
    assert spec["headGroupSpec"]["rayStartParams"].get("dashboard-host") == "0.0.0.0"
    assert spec["authOptions"]["mode"] == "token"
    schema = crd_spec_schema(MANIFESTS[name])
    auth = (schema["properties"].get("authOptions") or next(
        v for k, v in schema["properties"].items() if k in ("rayClusterSpec", "rayClusterConfig")
    )["properties"]["authOptions"])
    assert "token" in auth["properties"]["mode"]["enum"]  # the field is KubeRay's, not a typo the CRD ignores


def test_rayjob_runs_llmrec_on_a_shipped_config():
    spec = manifest("rayjob.yaml")["spec"]
    command = spec["entrypoint"].split()
    assert command[:2] == ["llmrec", "run"] and (ROOT / command[2]).is_file()


def test_rayservice_imports_the_serve_builder():
    apps = yaml.safe_load(manifest("rayservice.yaml")["spec"]["serveConfigV2"])["applications"]
    assert apps[0]["import_path"] == "llmrec.cluster.serve_builder:build_app"
    from llmrec.cluster.serve_builder import ServeAppArgs, engine_section

    args = ServeAppArgs.model_validate(apps[0]["args"])
    assert engine_section(args).type == "vllm" and args.num_gpus == 1


def _env_entries(node) -> list[dict]:
    if isinstance(node, dict):
        found = [e for e in node.get("env", []) if isinstance(e, dict)] if isinstance(node.get("env"), list) else []
        return found + [e for v in node.values() for e in _env_entries(v)]
    if isinstance(node, list):
        return [e for v in node for e in _env_entries(v)]
    return []


def test_no_secret_values_in_manifests():
    from llmrec.redact import is_secret_name as is_secret_key

    for name in MANIFESTS:
        entries = _env_entries(manifest(name))
        leaked = [e["name"] for e in entries if is_secret_key(e["name"]) and "value" in e]
        assert not leaked, f"{name}: secret values inline ({leaked}); use envFrom/secretRef"


def _pyproject_pins() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for req in deps["dependencies"] + [r for extra in deps["optional-dependencies"].values() for r in extra]:
        name, _, version = req.partition("==")
        pins[name.strip().lower()] = version.strip()
    return pins


def _pyproject_pin(name: str) -> str:
    return _pyproject_pins()[name]


def test_dockerfile_pins_match_pyproject():
    text = (ROOT / "cluster" / "Dockerfile").read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.M))
    assert args["RAY_VERSION"] == _pyproject_pin("ray[data,serve,tune]")
    assert "FROM rayproject/ray:${RAY_VERSION}-py311-${FLAVOR}" in text  # Python 3.11 >= requires-python
    assert '".[vllm]"' in text and '".[cpu]"' in text  # the pins come from pyproject, not a second list
    for copied in re.findall(r"^COPY \S+ (\S+) ", text, flags=re.M):
        assert (ROOT / copied).exists(), copied


def test_gpu_overrides_only_relax_what_vllm_needs():
    pins = _pyproject_pins()
    assert pins["vllm"], "vllm must be pinned in the vllm extra"
    overrides = dict(line.split("==") for line in (ROOT / "cluster" / "gpu-overrides.txt").read_text().splitlines()
                     if line and not line.startswith("#"))
    assert set(overrides) == {"torch", "numpy"}
    assert all(overrides[k] != pins[k] for k in overrides)  # each one is a documented difference


def test_serve_builder_builds_the_app_without_starting_it():
    from ray.serve import Application

    from llmrec.cluster.serve_builder import build_app
    from llmrec.errors import ConfigError

    app = build_app({"config": str(ROOT / "configs" / "prefeval_mcq_demo.yaml"), "replicas": "2",
                     "set": "engine.n_ctx=2048"})
    assert isinstance(app, Application)
    fake = build_app({"engine": {"type": "fake"}})
    assert isinstance(fake, Application)
    with pytest.raises(ConfigError, match="exactly one"):
        build_app({"replicas": 1})
    with pytest.raises(ConfigError, match="engine"):
        build_app({"engine": {"type": "no-such-engine"}})

"""An importable Ray Serve application builder for `serve run`, `serve deploy` and KubeRay's RayService.

    serve run llmrec.cluster.serve_builder:build_app config=configs/prefeval_mcq_demo.yaml replicas=2

or, in a Serve config file / a RayService ``serveConfigV2``::

    applications:
      - name: llmrec
        import_path: llmrec.cluster.serve_builder:build_app
        args: {engine: {type: vllm, model: /models/llama}, replicas: 2, num_gpus: 1}

It builds the same app as ``llmrec serve`` (``llmrec.serving.serve_app``: the engine deployment
behind the OpenAI-compatible ingress) without starting anything itself: Serve owns the lifecycle.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator
from ray.serve import Application

from llmrec.config import StrictModel, apply_overrides, read_yaml, validate
from llmrec.errors import ConfigError
from llmrec.serving.engine import EngineConfig, engine_config


class ServeAppArgs(StrictModel):
    """Arguments of ``build_app`` (Serve passes them as strings from the CLI, as YAML from a config)."""

    config: str | None = Field(None, description="YAML file with an `engine:` section (a run config works)")
    engine: dict[str, Any] | None = Field(None, description="the engine section inline (instead of `config`)")
    set: list[str] = Field(default_factory=list, description="--set style overrides applied to the config")
    replicas: int = Field(1, ge=1, description="engine replicas")
    num_cpus: float = Field(1.0, gt=0, description="CPUs per replica")
    num_gpus: float = Field(0.0, ge=0, description="GPUs per replica")

    @model_validator(mode="after")
    def _one_source(self) -> "ServeAppArgs":
        if (self.config is None) == (self.engine is None):
            raise ValueError("give exactly one of `config` (a YAML path) or `engine` (the section inline)")
        return self


def engine_section(args: ServeAppArgs) -> EngineConfig:
    raw = read_yaml(args.config) if args.config else {"engine": args.engine}
    raw = apply_overrides(raw, args.set)
    if "engine" not in raw:
        raise ConfigError(f"{args.config}: no 'engine:' section")
    return engine_config(raw["engine"])


def build_app(args: dict[str, Any]) -> Application:
    """Serve's application-builder hook: args → the engine deployment behind the OpenAI ingress."""
    from llmrec.serving.serve_app import EngineDeployment, OpenAIIngress

    parsed = validate(ServeAppArgs, _typed(dict(args or {})), "args")
    engine = EngineDeployment.options(
        num_replicas=parsed.replicas,
        ray_actor_options={"num_cpus": parsed.num_cpus, "num_gpus": parsed.num_gpus},
    ).bind(engine_section(parsed))
    return OpenAIIngress.bind(engine)


def _typed(args: dict[str, Any]) -> dict[str, Any]:
    """`serve run ... key=value` passes strings: read them as YAML scalars (`replicas=2` → 2)."""
    import yaml

    out = {}
    for k, v in args.items():
        out[k] = yaml.safe_load(v) if isinstance(v, str) and k != "config" else v
    if isinstance(out.get("set"), str):
        out["set"] = [out["set"]]
    return out

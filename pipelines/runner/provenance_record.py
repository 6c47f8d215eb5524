"""A run's provenance record (``RunDir.PROVENANCE``): what produced its outputs beyond its config and data.

llmrec's version and commit (and whether the tree was dirty), Python and the libraries' versions, the machine (CPU,
GPU, driver, CUDA where present), each role's engine as it reported itself where it ran (``Engine.provenance``: the
arguments after defaults, the model's bytes by sha256 or its hub revision, tokenizer and chat-template hashes), the
sampling every engine call was sent with and the seeds, the data fingerprint (``pipelines/common/provenance.py``) and
the names of the relevant environment variables that were set — never a value (``llmrec.provenance.env_names``).

The runner writes it beside the metrics and logs its main fields as MLflow tags (``mlflow_tags``). Nothing here
fails a run: a part that cannot be learned says so.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from llmrec import provenance as prov
from llmrec.config import fingerprint
from llmrec.redact import is_secret_name, redacted
from llmrec.serving.engine import build_engine, engine_provenance

if TYPE_CHECKING:
    from llmrec.pipelines.runner.execution import RunPlan

FORMAT = 1
TAG_PREFIX = "llmrec.provenance."


def role_configs(cfg) -> dict:
    """Role → engine config of each engine the run uses (``subject``, ``judge``, a jury's ``judge2``…)."""
    out = {} if cfg.rejudge is not None else {"subject": cfg.engine}
    if cfg.judge is not None:
        out["judge"] = cfg.judge
        jurors = cfg.judging.jurors if cfg.judging is not None else []
        out.update({f"judge{i}": j for i, j in enumerate(jurors, 2)})
    return out


def _driver_side(engine_cfg) -> dict:
    """What an unstarted engine says on the driver, for a role whose engine did not report where it ran (it runs in
    a Serve app or an engine pool, or every answer came from the result store)."""
    try:
        got = engine_provenance(build_engine(engine_cfg))
    except Exception as e:  # noqa: BLE001 - recorded, never raised
        got = {"error": f"{type(e).__name__}: {e}"}
    return {**got, "reported_by": "the driver (an unstarted engine: what it says before loading its model)"}


def _sampling(rows: list[dict]) -> dict[str, list[dict]]:
    """Role → the distinct sampling settings (temperature, seed, max_tokens, …) its engine calls were sent with."""
    from llmrec.transcripts import calls

    seen: dict[str, dict[str, dict]] = {}
    for r in rows:
        for c in calls(r):
            if c.request and isinstance(c.request.get("sampling"), dict):
                s = c.request["sampling"]
                seen.setdefault(c.role, {})[json.dumps(s, sort_keys=True, default=str)] = s
    return {role: [v for _, v in sorted(d.items())] for role, d in sorted(seen.items())}


def _seeds(cfg) -> dict[str, Any]:
    """Every seed the config sets (the benchmark's, each engine's, the judge's pinned one)."""
    flat = prov.flat({"benchmark": cfg.benchmark.model_dump(mode="json"),
                      **{role: c.model_dump(mode="json") for role, c in role_configs(cfg).items()},
                      **({"judging": cfg.judging.model_dump(mode="json", exclude={"jurors"})} if cfg.judging else {})})
    return {k: v for k, v in flat.items() if "seed" in k.rsplit(".", 1)[-1].lower() and not is_secret_name(k)}


def run_provenance(p: "RunPlan", rows: list[dict]) -> dict:
    """The record of a finished run (``p``: its plan, with what the engines reported while it ran)."""
    cfg = p.config
    engines = {}
    # a plan without a result store ran no engine (a suite's traditional baseline): no engine is named
    for role, engine_cfg in (role_configs(cfg) if p.store is not None else {}).items():
        reported = p.engines_provenance.get(role)
        engines[role] = {**reported, "reported_by": "the engine where it ran"} if reported else _driver_side(engine_cfg)
    for role, reported in p.engines_provenance.items():
        engines.setdefault(role, {**reported, "reported_by": "the engine where it ran"})
    record = {
        "format": FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **prov.software(),
        "host": prov.host_info(),
        "engines": engines,
        "sampling": _sampling(rows),
        "seeds": _seeds(cfg),
        "config_hash": fingerprint(cfg.semantic()),
        "data": dict((p.store.provenance or {}).get("data") or {}) if p.store is not None else {},
        "env": {"set": prov.env_names()},
    }
    return redacted(record)


# the record's fields logged as MLflow tags (flattened keys; a prefix takes every key under it)
TAGGED = ("llmrec.", "python.version", "packages.", "host.cpu", "host.gpu.", "config_hash")
TAGGED_ENGINE = ("model.", "packages.", "chat_template_sha256", "tokenizer_sha256", "prompt_format")


def mlflow_tags(record: dict) -> dict[str, str]:
    """The record's main fields as MLflow tags (``llmrec.provenance.<key>``): software, machine, each engine's model
    identity and libraries; the whole record is the run's ``provenance.json`` artifact."""
    out = {}
    for k, v in prov.flat(record).items():
        keep = k.startswith(TAGGED) or k in TAGGED
        if k.startswith("engines."):
            inner = k.split(".", 2)[2] if k.count(".") >= 2 else ""
            keep = inner.startswith(TAGGED_ENGINE) or inner in TAGGED_ENGINE
        if keep and v is not None:
            text = v if isinstance(v, str) else json.dumps(v, default=str)
            out[TAG_PREFIX + k] = text[:5000]
    return out

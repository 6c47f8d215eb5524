"""A run config resolved on the submitting machine, ready to run on a cluster.

`llmrec submit` reads the YAML, applies ``--set`` overrides and validates it exactly as
``llmrec run`` would, then fixes everything that depends on the submitting machine:

- relative paths (``output.dir``, ``data.dir``, ``engine.model_path``, a ``sqlite:///`` tracking
  store, ``tracking.artifact_root``, ...) become absolute, so they do not land in the job's
  temporary working directory (URIs such as ``s3://`` are kept as they are);
- ``tracking.uri`` is fixed now (``$MLFLOW_TRACKING_URI`` of the submitter, else the default);
- with a tracking server (``http://...``) and a local ``tracking.artifact_root`` (a folder on the
  job's node would be lost), artifacts go through the server (``mlflow-artifacts:///<experiment>``)
  to its artifact store (``mlflow server --serve-artifacts --artifacts-destination s3://...``);
- ``ray`` points at the cluster the job runs on (``address: auto``, no local CPU count).

Secrets never enter the resolved file: a key that looks like a secret (``*key``, ``*token``,
``*password``, ...) with a value fails, and so does any URL in the config that carries credentials
(``https://user:pass@host``, ``?api_key=…``, ``?token=…``: an engine's or judge's ``base_url``, the
tracking URI, a storage URI). They are refused rather than moved: the file is what the job ships and
what ``--dry-run`` prints, and the error shows the URL redacted. Secrets reach the job as environment
variables set on the cluster nodes, named by ``--env`` or a ``*_env`` key (``engine.api_key_env``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel

from llmrec import tracking
from llmrec.config import apply_overrides, read_yaml, validate
from llmrec.errors import ConfigError
from llmrec.redact import is_secret_name, redact_text

log = logging.getLogger(__name__)

# String-typed locations (Path-typed fields are found on the model itself).
LOCATION_KEYS = ("output.dir", "output.cache_path", "data.dir", "tracking.artifact_root")
ENV_NAME_SUFFIX = "_env"
# Artifacts proxied by the tracking server (`mlflow server --serve-artifacts`) to its --artifacts-destination.
SERVER_ARTIFACTS = "mlflow-artifacts:///"


def path_keys(model: BaseModel, prefix: str = "") -> list[str]:
    """Dotted keys of every ``Path`` value in a validated config (nested models included)."""
    keys: list[str] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        key = f"{prefix}{name}"
        if isinstance(value, Path):
            keys.append(key)
        elif isinstance(value, BaseModel):
            keys.extend(path_keys(value, key + "."))
    return keys


def _get(d: dict, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def _set(d: dict, key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    for part in parents:
        d = d[part]
    d[leaf] = value


def absolute_location(value: str, base: Path) -> str:
    """A relative local path → absolute under ``base``; absolute paths and URIs unchanged."""
    if "://" in value:
        return value
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else (base / p).resolve())


def absolute_tracking_uri(uri: str, base: Path) -> str:
    """``sqlite:///mlruns.db`` (relative) → ``sqlite:////abs/mlruns.db``; refuse embedded passwords."""
    parts = urlsplit(uri)
    if parts.password or redact_text(uri) != uri:
        raise ConfigError("tracking.uri carries a password; put it in MLFLOW_TRACKING_PASSWORD on the cluster "
                          "nodes and name it with --env MLFLOW_TRACKING_PASSWORD")
    if parts.scheme == "sqlite" and uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str((base / uri[len("sqlite:///"):]).resolve())
    if parts.scheme in ("", "file") and "://" not in uri:
        return absolute_location(uri, base)
    return uri


def secret_values(raw: dict | list, prefix: str = "") -> list[str]:
    """Keys that look like secrets and hold a value (names of env variables, ``*_env``, are fine), in mappings and
    lists (a jury's ``judging.jurors``, a suite's ``benchmarks``) at any depth."""
    found = []
    items = raw.items() if isinstance(raw, dict) else ((f"[{i}]", v) for i, v in enumerate(raw))
    for k, v in items:
        key = f"{prefix}{k}" if isinstance(raw, dict) else f"{prefix.rstrip('.')}{k}"
        if isinstance(v, (dict, list)):
            found.extend(secret_values(v, key + "."))
        elif isinstance(raw, dict) and v not in (None, "") and is_secret_name(str(k)):
            found.append(key)
    return found


def url_credentials(raw: Any, prefix: str = "") -> list[str]:
    """``key (redacted URL)`` for every string in ``raw`` holding a URL with user info or a
    secret-looking query parameter (the same rule ``llmrec.redact`` records URLs by)."""
    found: list[str] = []
    if isinstance(raw, dict):
        for k, v in raw.items():
            found.extend(url_credentials(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(raw, (list, tuple)):
        for i, v in enumerate(raw):
            found.extend(url_credentials(v, f"{prefix}[{i}]"))
    elif isinstance(raw, str) and "://" in raw and redact_text(raw) != raw:
        found.append(f"{prefix} ({redact_text(raw)})")
    return found


def refuse_url_credentials(raw: dict, where: str) -> None:
    """A submitted config carries no credentials inside a URL (see the module docstring)."""
    found = url_credentials(raw)
    if found:
        raise ConfigError(
            f"{where}: {'; '.join(found)}: credentials inside a URL are not submitted (the resolved config is "
            "shipped to the cluster and printed by --dry-run). Remove them from the URL, set the secret as an "
            "environment variable on the cluster nodes and name it: engine.api_key_env / judge.api_key_env for "
            "an API key (sent as a Bearer token), MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD for the "
            "tracking server, AWS_* for S3; pass --env NAME for any other")


def env_names_in(raw: dict | list) -> list[str]:
    """Variables a config names (``engine.api_key_env: OPENAI_API_KEY`` → ``OPENAI_API_KEY``), in mappings and
    lists at any depth: every juror's ``api_key_env`` of a jury (``judging.jurors``), every suite entry's judge."""
    names = []
    for k, v in (raw.items() if isinstance(raw, dict) else enumerate(raw)):
        if isinstance(v, (dict, list)):
            names.extend(env_names_in(v))
        elif isinstance(raw, dict) and str(k).lower().endswith(ENV_NAME_SUFFIX) and isinstance(v, str) and v:
            names.append(v)
    return names


def resolve_for_cluster(config: str | Path, overrides: list[str] | None = None, base: Path | None = None) -> dict:
    """Load + override + validate like ``llmrec run``, then make the result machine-independent."""
    from llmrec.pipelines.runner.run_config import load_run_config

    given = apply_overrides(read_yaml(config), overrides)  # locations as written (a Path field mangles s3://)
    return _resolve_run(given, load_run_config(config, overrides), str(config), (base or Path.cwd()).resolve())


def _resolve_run(given: dict, cfg, where: str, base: Path) -> dict:
    from llmrec.pipelines.runner.run_config import RunConfig

    raw = cfg.model_dump(mode="json")
    refuse_url_credentials({**raw, "tracking": {**raw["tracking"], "uri": tracking.tracking_uri(cfg.tracking.uri)}},
                           where)
    leaked = secret_values(raw)
    if leaked:
        raise ConfigError(f"{where}: {', '.join(leaked)} hold secret values; a submitted config must not. "
                          "Set the secret as an environment variable on the cluster nodes and put its NAME "
                          "in the config (e.g. engine.api_key_env) or pass --env NAME")
    for key in sorted(set(path_keys(cfg)) | set(LOCATION_KEYS)):
        value = _get(given, key) if _get(given, key) is not None else _get(raw, key)
        if isinstance(value, (str, Path)) and str(value):
            _set(raw, key, absolute_location(str(value), base))
    uri = absolute_tracking_uri(tracking.tracking_uri(cfg.tracking.uri), base)
    raw["tracking"]["uri"] = uri
    if uri.startswith(("http://", "https://")) and "://" not in cfg.tracking.artifact_root:
        # a folder on the job's node is lost with it: the tracking server stores the artifacts instead
        raw["tracking"]["artifact_root"] = SERVER_ARTIFACTS + (cfg.tracking.experiment or cfg.benchmark.name)
        log.info("tracking.artifact_root %s -> %s (artifacts through the tracking server)",
                 cfg.tracking.artifact_root, raw["tracking"]["artifact_root"])
    raw["ray"] = {"address": "auto", "num_cpus": None}
    validate(RunConfig, _reload(raw))  # what we ship still validates
    return raw


def resolve_suite_for_cluster(config: str | Path, overrides: list[str] | None = None,
                              base: Path | None = None) -> dict:
    """A suite resolved as each of its runs is: entries given as run config paths inlined, every
    (subject, entry) run config resolved (locations absolute, tracking fixed, secrets refused) and
    its sections put back into the suite."""
    from llmrec.pipelines.runner.suite_config import load_suite_config

    base = (base or Path.cwd()).resolve()
    cfg = load_suite_config(config, overrides)
    suite = cfg.model_dump(mode="json", exclude_none=True)
    for i, entry in enumerate(cfg.benchmarks):
        for subject in cfg.subjects:
            rc = cfg.run_config(subject, entry)
            given = {"benchmark": entry.benchmark, "engine": cfg.subjects[subject], "judge": entry.judge,
                     "data": entry.data, "output": suite.get("output", {}), "tracking": suite.get("tracking", {})}
            run = _resolve_run(given, rc, f"{config}: benchmarks[{i}] with subject '{subject}'", base)
            suite["subjects"][subject] = run["engine"]
            suite["benchmarks"][i].update({k: run[k] for k in ("benchmark", "judge", "data") if run[k] is not None})
    suite["output"]["dir"] = absolute_location(cfg.output.dir, base)
    if cfg.output.cache_path is not None:
        suite["output"]["cache_path"] = absolute_location(str(cfg.output.cache_path), base)
    suite["tracking"] = {k: v for k, v in run["tracking"].items() if k != "experiment"}
    suite["tracking"]["experiment"] = cfg.tracking.experiment
    suite["ray"] = run["ray"]
    refuse_url_credentials(suite, str(config))
    load_suite_config_from(suite, f"{config} (resolved)")  # what we ship still validates
    return suite


def load_suite_config_from(raw: dict, where: str):
    from llmrec.pipelines.runner.suite_config import suite_from_raw

    return suite_from_raw(_reload(raw), where)


def _reload(raw: dict) -> dict:
    return yaml.safe_load(yaml.safe_dump(raw))


def dump(raw: dict) -> str:
    return yaml.safe_dump(raw, sort_keys=False)

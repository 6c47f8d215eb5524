"""MLflow conventions shared by every llmrec run: evaluations, training, sweeps, SFT.

One module, one set of rules:
- store: ``tracking.uri``, else ``$MLFLOW_TRACKING_URI``, else sqlite ``./mlruns.db``;
- experiments are created with an artifact location that is a URI as given (``s3://…``,
  ``gs://…``, ``http(s)://…``, ``mlflow-artifacts:…``) or a local path resolved to a ``file://``
  URI; they are tagged as model-development experiments (the MLflow 3 UI then opens on the
  runs table, not the GenAI overview) and carry a shared view that shows the headline
  metrics as columns (``ui_url`` opens it);
- run tags: ``git_commit``, ``data_fingerprint``, ``protocol`` (JSON of the settings that
  define the numbers), ``llmrec.kind`` (run | train | tune | trial | sft), ``llmrec.headline``
  (the metric keys ``llmrec runs`` shows), ``llmrec.setting`` on child runs, ``llmrec.config_hash`` (run
  names stay readable and lead with what differs: ``<benchmark> · <model>``, then the config keys that differ
  from the experiment's other runs of that benchmark and model (``prefeval · gemma n_ctx=4096``); a suite's ``<subject> · <suite>``
  / ``<entry> · <subject>`` / ``<setting keys that vary> · <entry> · <subject>``);
- a suite's subject runs carry the engine params that tell the subjects apart (:func:`subject_params`);
- metric keys: ``metric_key`` (``ndcg@10`` → ``ndcg_at_10``; other characters MLflow refuses
  become ``_``); params: the flattened config minus secret-looking keys.
"""

from __future__ import annotations

import json
import logging
import math
import re
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Iterable
from urllib.parse import urlparse

from pydantic import BeforeValidator, Field

from llmrec import settings, storage
from llmrec.config import StrictModel, flatten
from llmrec.errors import ConfigError
from llmrec.redact import is_secret_name, redact_text, redacted

log = logging.getLogger(__name__)

MAX_PARAM_LEN = 6000

TAG_GIT = "git_commit"
TAG_DATA = "data_fingerprint"
TAG_PROTOCOL = "protocol"
TAG_KIND = "llmrec.kind"
TAG_HEADLINE = "llmrec.headline"
TAG_SETTING = "llmrec.setting"
TAG_PARENT = "mlflow.parentRunId"
TAG_CONFIG_HASH = "llmrec.config_hash"  # hash of the settings that determine the results (run names stay readable)
TAG_RUN_DIR = "llmrec.run_dir"  # the run directory's name
TAG_RUN_LOCATION = "llmrec.run_location"  # the run directory's whole path or URI: the one directory a run is bound to
TAG_SUITE = "llmrec.suite"
TAG_SUBJECT = "llmrec.subject"
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
VIEW_KEY = "llmrec-headline"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
HEADLINE_LIST_TAG = "llmrec.headline_metrics"  # the union the view was built from
PARAMS_LIST_TAG = "llmrec.view_params"  # the param columns the view was built with (besides VIEW_PARAMS)
VIEW_PARAMS = ("engine.type", "engine.model", "model.name")
ENGINE_ID_PARAMS = ("type", "model", "quantization")  # a subject run's params besides the options that differ
_QUANT = re.compile(r"(?i)(?:^|[-_.])((?:IQ|Q)\d(?:_[A-Z0-9]+)*|BF16|F16|F32)(?=[-_.]|$)")

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_BAD_KEY_CHARS = re.compile(r"[^\w\-. /:]")


class TrackingConfig(StrictModel):
    """MLflow tracking section shared by run, train, tune and sft configs."""

    enabled: bool = Field(True, description="log to MLflow")
    uri: str | None = Field(None, description="MLflow tracking URI; default $MLFLOW_TRACKING_URI or sqlite:///mlruns.db")
    artifact_root: str = Field(settings.DEFAULT_ARTIFACT_ROOT,
                               description="artifact location of new experiments: a local path or a URI (s3://…)")
    experiment: str | None = Field(None, description="experiment name; default: the benchmark name (llmrec "
                                   "train/tune: llmrec-baselines; llmrec sft: llmrec-sft)")


def tracking_section(default_experiment: str) -> Any:
    """The type of a config's ``tracking`` field whose ``experiment`` defaults to ``default_experiment``
    when the section leaves it out or null (the field's own default: ``default_tracking``)."""

    def fill(value: Any) -> Any:
        if isinstance(value, dict) and value.get("experiment") is None:
            return {**value, "experiment": default_experiment}
        if isinstance(value, TrackingConfig) and value.experiment is None:
            return value.model_copy(update={"experiment": default_experiment})
        return value

    return Annotated[TrackingConfig, BeforeValidator(fill)]


def default_tracking(default_experiment: str) -> Any:
    """``Field`` default of a ``tracking_section`` field."""
    return Field(default_factory=lambda: TrackingConfig(experiment=default_experiment))


def reader_section(section: TrackingConfig | dict | None, uri: str | None = None) -> TrackingConfig:
    """The tracking section a verb that reads run directories (leaderboard, compare, judges) logs with: whether to log
    and the experiment's name from the directory's ``section``, but the store and the artifact root are the
    reader's own: ``uri`` (its ``--tracking-uri``), else ``$MLFLOW_TRACKING_URI``, else the default, and the default
    artifact root. A directory's config never chooses where a reader connects or writes."""
    if isinstance(section, dict):
        section = TrackingConfig.model_validate(section)
    section = section or TrackingConfig()
    return section.model_copy(update={"uri": tracking_uri(uri), "artifact_root": settings.DEFAULT_ARTIFACT_ROOT})


def tracking_uri(configured: str | None = None) -> str:
    return configured or settings.env_tracking_uri() or settings.DEFAULT_TRACKING_URI


def _local_store(uri: str) -> Path | None:
    """The file or folder of a sqlite / file store (``sqlite:///rel.db``, ``sqlite:////abs.db``,
    ``file:///dir``, a plain path); None for a server or database URI."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///"):])
    if uri.startswith("file://"):
        return Path(urlparse(uri).path)
    return None if _URI.match(uri) else Path(uri)


local_store = _local_store  # the file of a sqlite or file store (None for a server)


def existing_store(configured: str | None = None) -> str:
    """The tracking URI for a verb that only reads (``llmrec runs``, ``llmrec ui``): a sqlite or
    file store must already exist, since opening a misspelled one would create a new, empty store."""
    uri = tracking_uri(configured)
    path = _local_store(uri)
    if path is not None and not path.exists():
        raise ConfigError(f"no MLflow store at {path} (tracking URI {uri}); check --tracking-uri or "
                          "$MLFLOW_TRACKING_URI (reading never creates a store: `llmrec run` does)")
    wrong = _not_a_store(uri, path) if path is not None else None
    if wrong:
        raise ConfigError(f"tracking URI {uri}: {wrong}; check --tracking-uri or $MLFLOW_TRACKING_URI")
    return uri


SQLITE_MAGIC = b"SQLite format 3\x00"


def _not_a_store(uri: str, path: Path) -> str | None:
    """Why the existing local ``path`` of ``uri`` cannot be an MLflow store (None when it can be one): a sqlite
    URI names a folder or a file that is no SQLite database; a plain path or ``file://`` names a file (a file store
    is a folder)."""
    try:
        head = path.open("rb").read(len(SQLITE_MAGIC)) if path.is_file() else b""
    except OSError as e:
        return f"{path} cannot be read ({e.strerror or e})"
    if uri.startswith("sqlite:"):
        if path.is_dir():
            return f"{path} is a folder, not a SQLite database"
        return None if not head or head == SQLITE_MAGIC else f"{path} is not a SQLite database"
    if path.is_file():
        if head == SQLITE_MAGIC:
            return f"{path} is a SQLite database: name it as sqlite:///{path}"
        return f"{path} is a file, not an MLflow store (a store is a sqlite:///FILE database or a folder)"
    return None


def check_store(configured: str | None = None, timeout_s: float = settings.TRACKING_CHECK_TIMEOUT_S,
                slow_tries: int = settings.TRACKING_CHECK_SLOW_TRIES) -> str:
    """Fail now, in seconds and in one line, when the tracking store cannot be used: a server that does not
    accept the connection (one try: MLflow's own client retries for minutes), does not answer in ``slow_tries``
    tries of ``timeout_s``, doubling (a busy server is waited for, with a warning), refuses the credentials, or is
    not an MLflow server; a scheme MLflow has no store for; a sqlite file that cannot be opened. Called before a run's
    first sample. Returns the URI."""
    import os

    uri = tracking_uri(configured)
    path = _local_store(uri)
    if path is not None and uri.startswith("sqlite:") and not path.parent.is_dir():
        raise ConfigError(f"tracking store {uri}: the folder {path.parent} does not exist (create it, or fix "
                          "tracking.uri / $MLFLOW_TRACKING_URI)")
    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    waited, wait = 0, int(max(1, timeout_s))
    try:
        for attempt in range(1, max(1, slow_tries) + 1):
            os.environ.update(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT=str(wait))
            try:
                client(uri).search_experiments(max_results=1)
                break
            except Exception as e:  # noqa: BLE001 - whatever MLflow raises (its own, requests', sqlalchemy's) is one line
                waited += wait
                if _slow_answer(e) and attempt < slow_tries:
                    log.warning("tracking store %s accepted the connection but did not answer within %d s; "
                                "waiting up to %d s more", redact_text(uri), wait, 2 * wait)
                    wait *= 2
                    continue
                why = " ".join(str(e).split())
                if _slow_answer(e):
                    why = f"it accepted the connection but did not answer in {waited} s ({attempt} tries): {why}"
                raise ConfigError(f"tracking store {redact_text(uri)} cannot be used: {redact_text(why)[:300]} "
                                  "(checked before the run; fix tracking.uri / $MLFLOW_TRACKING_URI, or set "
                                  "tracking.enabled=false)") from e
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return uri


def _slow_answer(e: BaseException) -> bool:
    """A read timeout: the server took the connection and is busy, which longer tries may outwait (a refused
    connection, bad credentials or a wrong scheme fail at once)."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if type(e).__name__ in ("ReadTimeout", "ReadTimeoutError") or "Read timed out" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def artifact_location(root: str) -> str:
    """A URI stays as given (``s3://…``, ``mlflow-artifacts:/…``); a local path becomes an absolute
    ``file://`` URI (resolved on the driver, before anything runs on a cluster)."""
    if _URI.match(root) and not re.match(r"^[a-zA-Z]:[\\/]", root):
        return root
    return Path(storage.resolve(root)).as_uri()


def metric_key(name: str) -> str:
    """The one metric/param key rule: MLflow-valid, readable (``hr@10`` → ``hr_at_10``)."""
    return _BAD_KEY_CHARS.sub("_", str(name).replace("@", "_at_"))


COUNT_METRICS = ("failed", "failed_rows", "over_context", "truncated", "judge_failed")  # besides n_*: metrics that count samples


def is_count(metric: str) -> bool:
    """Metrics that count samples (``failed``, ``n_answered``, also as ``<entry>/failed``): whole
    numbers, shown without a CI by every table (run summary, leaderboard)."""
    name = metric.rsplit("/", 1)[-1]
    return name.startswith("n_") or name in COUNT_METRICS


def model_label(engine) -> str:
    """What run names and tables call a subject: its engine config's ``label`` (``serving/engine.py``: the
    model's name without folders, else the engine type). ``engine``: a validated engine config, or an engine
    section as stored (a dict from a run's stored config), labelled by the same rule from its ``model``, else
    ``model_path``, else ``type``."""
    if not isinstance(engine, dict):
        return engine.label
    model = engine.get("model") or engine.get("model_path") or engine.get("type") or "?"
    return str(model).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def quantization(engine: dict) -> str | None:
    """The weights' quantization: the engine's ``quantization`` / ``dtype`` option, else the GGUF type in the
    model file's name (``gemma-3-270m-it-Q8_0.gguf`` → ``Q8_0``); None when nothing says."""
    for key in ("quantization", "dtype"):
        if engine.get(key) not in (None, "", "auto"):
            return str(engine[key])
    name = str(engine.get("model_path") or engine.get("model") or "").replace("\\", "/").rsplit("/", 1)[-1]
    found = _QUANT.search(name)
    return found.group(1).upper() if found else None


def differing_keys(configs: Iterable[dict]) -> list[str]:
    """The flattened keys (``engine.n_ctx``) whose value is not the same in every config (a key some config lacks
    counts as ``None`` there), in the order they first appear; never a secret-looking one."""
    flat = [flatten(dict(c)) for c in configs]
    keys = list(dict.fromkeys(k for f in flat for k in f))
    return [k for k in keys if not is_secret_name(k.rsplit(".", 1)[-1])
            and len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flat}) > 1]


def short_keys(keys: Iterable[str]) -> dict[str, str]:
    """Each dotted key → its last part (``n_ctx``) where no other of ``keys`` ends the same, else the whole key."""
    keys = list(keys)
    last = Counter(k.rsplit(".", 1)[-1] for k in keys)
    return {k: k.rsplit(".", 1)[-1] if last[k.rsplit(".", 1)[-1]] == 1 else k for k in keys}


DIFF_VALUE_MAX = 40  # characters of one value in a name (a long list is cut with "…")


def value_text(value: Any, limit: int = DIFF_VALUE_MAX) -> str:
    """A config value as names show it: text as is, ``None`` as ``—``, others as compact JSON; cut to ``limit``."""
    text = "—" if value is None else value if isinstance(value, str) else json.dumps(
        value, separators=(",", ":"), default=str)
    text = redact_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def differing_labels(configs: dict[Any, dict]) -> dict[Any, str]:
    """id → ``key=value …`` over the keys whose values differ between the configs (:func:`differing_keys`; keys
    shortened by :func:`short_keys`): what tells runs of one benchmark and subject apart (``n_ctx=4096``). Empty
    strings when the configs are alike (or there is one)."""
    keys = differing_keys(configs.values())
    short = short_keys(keys)
    flat = {i: flatten(dict(c)) for i, c in configs.items()}
    return {i: " ".join(f"{short[k]}={value_text(f.get(k))}" for k in keys) for i, f in flat.items()}


def subject_params(engines: dict[str, dict]) -> dict[str, dict[str, str]]:
    """subject → the params of its MLflow run that tell the subjects apart: ``engine.type``, ``engine.model`` (model
    or model file; ``embedded`` when the engine uses its embedded model), ``engine.quantization`` (when known), and
    ``engine.<option>`` for every engine option whose value differs between the subjects (:func:`differing_keys`).
    ``engines``: subject → engine section as a dict, in suite order."""
    flat = {s: flatten(dict(e)) for s, e in engines.items()}
    differ = [k for k in differing_keys(engines.values()) if k not in ENGINE_ID_PARAMS and k != "model_path"]
    out = {}
    for s, f in flat.items():
        model = f.get("model") or f.get("model_path")
        p = {"engine.type": str(f.get("type")), "engine.model": str(model) if model else "embedded"}
        q = quantization(f)
        if q:
            p["engine.quantization"] = q
        p.update({f"engine.{k}": "—" if f.get(k) is None else str(f[k]) for k in differ})
        out[s] = p
    return out


def view_params(params: dict[str, dict[str, str]]) -> list[str]:
    """The param columns of a suite's view: the keys of :func:`subject_params`, the identifying ones first."""
    return list(dict.fromkeys(metric_key(k) for p in params.values() for k in p))


def safe_params(config: dict) -> dict[str, str]:
    """Flattened config without secret-looking keys (api_key, hf_token; not max_tokens; their *names* of env
    vars, ``*_env``, are fine) and with the credentials of URLs in values redacted."""
    out = {}
    for k, v in flatten(config).items():
        if is_secret_name(k.rsplit(".", 1)[-1]):
            continue
        out[metric_key(k)] = redact_text(str(v))[:MAX_PARAM_LEN]
    return out


def finite_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """Numeric, finite entries under MLflow-valid keys (NaN, strings and bools are dropped)."""
    out = {}
    for k, v in metrics.items():
        if isinstance(v, bool):
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out[metric_key(k)] = f
    return out


def git_commit(cwd: Path | None = None) -> str:
    """HEAD of the checkout the code runs from; for code shipped to a cluster without its .git,
    the commit ``llmrec submit`` recorded; else "unknown"."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=cwd or Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return settings.env_git_commit() or "unknown"


def run_tags(kind: str, protocol: dict | None = None, data_fingerprint: str | None = None,
             headline: Iterable[str] = (), **extra: str) -> dict[str, str]:
    """The tags every llmrec run carries (same names for evaluations, training and sweeps)."""
    tags = {TAG_GIT: git_commit(), TAG_KIND: kind,
            TAG_PROTOCOL: json.dumps(redacted(protocol or {}), sort_keys=True, default=str),
            TAG_DATA: data_fingerprint or "unknown"}
    heads = [metric_key(h) for h in headline]
    if heads:
        tags[TAG_HEADLINE] = ",".join(heads)
    tags.update({k: redact_text(str(v)) for k, v in extra.items()})
    return tags


def client(uri: str | None = None):
    """An ``MlflowClient`` bound to the store (no process-global tracking state is touched)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri(uri))


def view_state(headline: Iterable[str], params: Iterable[str] = ()) -> str:
    """The runs-table view shared through the experiment tag: the headline metrics as columns, in the order given
    (MLflow's shared-view format: column ids ``metrics.`key```), then ``params`` (default ``VIEW_PARAMS``); runs
    oldest first, so a suite's subjects and, nested below each, its entries read in suite order. Sorted by
    creation time, as the MLflow 3 UI nests child runs under their parent only then (sorted by a metric it lists
    every run flat, mlflow/mlflow#15802); a click on a metric's column header sorts by it."""
    params = list(params) or list(VIEW_PARAMS)
    cols = [f"metrics.`{metric_key(h)}`" for h in headline] + [f"params.`{p}`" for p in params]
    return json.dumps({"selectedColumns": ["attributes.`Run Name`", *cols],
                       "orderByKey": "attributes.start_time", "orderByAsc": True})


def ensure_experiment(mlflow_client, name: str, artifact_root: str = settings.DEFAULT_ARTIFACT_ROOT,
                      headline: Iterable[str] = (), params: Iterable[str] = ()) -> str:
    """Id of experiment ``name``; created if new (artifact location, kind tag). The shared
    view lists the union of the headline metrics of every run kind logged to it, in the order they came,
    and the union of the ``params`` columns asked for (none asked: ``VIEW_PARAMS``)."""
    from mlflow.exceptions import MlflowException

    exp = mlflow_client.get_experiment_by_name(name)
    if exp is None:
        try:
            exp_id = mlflow_client.create_experiment(name, artifact_location=artifact_location(artifact_root),
                                                     tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
        except MlflowException as e:  # another run (e.g. a second job of the same study) created it meanwhile
            exp = mlflow_client.get_experiment_by_name(name) if e.error_code == "RESOURCE_ALREADY_EXISTS" else None
            if exp is None:
                raise
    if exp is None:
        known: list[str] = []
        known_params: list[str] = []
    else:
        exp_id = exp.experiment_id
        known = json.loads(exp.tags.get(HEADLINE_LIST_TAG, "[]")) if exp.tags else []
        known_params = json.loads(exp.tags.get(PARAMS_LIST_TAG, "[]")) if exp.tags else []
        if EXPERIMENT_KIND_TAG not in (exp.tags or {}):
            mlflow_client.set_experiment_tag(exp_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    merged = known + [k for k in dict.fromkeys(map(metric_key, headline)) if k not in known]
    merged_params = known_params + [k for k in dict.fromkeys(map(metric_key, params)) if k not in known_params]
    view = view_state(merged, merged_params)
    if merged != known or exp is None or (exp.tags or {}).get(VIEW_TAG) != view:  # or an older view
        _set_experiment_tag(mlflow_client, exp_id, HEADLINE_LIST_TAG, json.dumps(merged))
        if merged_params:
            _set_experiment_tag(mlflow_client, exp_id, PARAMS_LIST_TAG, json.dumps(merged_params))
        _set_experiment_tag(mlflow_client, exp_id, VIEW_TAG, view)
    return exp_id


def _set_experiment_tag(mlflow_client, exp_id: str, key: str, value: str) -> None:
    """Set a tag; when another run inserted the same tag at the same moment (a sqlite store's insert then fails
    on its unique key), set it again: the row exists now and is updated."""
    from mlflow.exceptions import MlflowException

    try:
        mlflow_client.set_experiment_tag(exp_id, key, value)
    except MlflowException:
        time.sleep(0.2)
        mlflow_client.set_experiment_tag(exp_id, key, value)


def setup(uri: str | None, experiment: str, artifact_root: str = settings.DEFAULT_ARTIFACT_ROOT,
          headline: Iterable[str] = (), params: Iterable[str] = ()) -> str:
    """Point the fluent MLflow API at the store and make sure the experiment exists; returns its id."""
    import os

    import mlflow

    before = os.environ.get(settings.TRACKING_URI_ENV)
    mlflow.set_tracking_uri(tracking_uri(uri))
    # MLflow also writes the URI into the process environment, where every later subprocess (and
    # the next config's default) would inherit it: keep the environment as the user set it.
    if before is None:
        os.environ.pop(settings.TRACKING_URI_ENV, None)
    else:
        os.environ[settings.TRACKING_URI_ENV] = before
    return ensure_experiment(client(uri), experiment, artifact_root, headline, params)


def ui_url(base: str, experiment_id: str) -> str:
    """The runs table of an experiment with llmrec's headline-metric columns (the MLflow 3 UI
    otherwise opens on its GenAI overview, whatever the experiment's kind tag says)."""
    return (f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs"
            f"?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}")


def start_run(mlflow_client, exp_id: str, name: str, params: dict[str, Any], tags: dict[str, str]) -> str:
    """Create a run with ``tags`` and ``params`` (flattened, values as strings); returns its id."""
    run = mlflow_client.create_run(exp_id, run_name=name, tags=tags)
    log_params(mlflow_client, run.info.run_id, params)
    return run.info.run_id


def log_params(mlflow_client, run_id: str, params: dict[str, Any]) -> None:
    """Log flattened params (secret-looking keys dropped, long values truncated) in batches;
    keys the run already has are skipped (MLflow params are write-once)."""
    from mlflow.entities import Param

    have = mlflow_client.get_run(run_id).data.params
    batch = [Param(k, v) for k, v in sorted(safe_params(params).items()) if k not in have]
    for start in range(0, len(batch), 100):
        mlflow_client.log_batch(run_id, params=batch[start: start + 100])


def log_metrics(mlflow_client, run_id: str, metrics: dict[str, Any], step: int = 0) -> None:
    """Log the finite numeric entries of ``metrics`` at ``step`` under MLflow-valid keys."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = [Metric(k, v, now, step) for k, v in finite_metrics(metrics).items()]
    for start in range(0, len(batch), 500):
        mlflow_client.log_batch(run_id, metrics=batch[start: start + 500])

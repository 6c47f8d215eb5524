"""The run directory and the suite directory: the only code that knows their file names.

Every verb that writes or reads results — run, suite, leaderboard, compare, report, view, runs, sft export,
train — goes through :class:`RunDir` (one evaluation or training run) and :class:`SuiteDir` (a suite: an index
``suite.json`` over run directories, plus the suite's comparisons). Both sit on :class:`llmrec.storage.Storage`, so a
local folder and a storage URI (``s3://…``) are read and written the same way.

A run directory holds::

    resolved.yaml        the config the results were produced under (credentials redacted)
    metrics.json         the aggregate metrics (written last: a run directory with it is complete)
    samples.parquet      one typed row per sample (see llmrec.pipelines.record)
    predictions.jsonl    the benchmark's predictions in its reference code's format (optional)
    run_facts.json       role → what its engine learned while running (optional)
    protocol.json        the protocol record of a training run (optional)
    mlflow_run_id        the MLflow run this directory is logged to
    cost_ledger.json     the CPU/GPU seconds each invocation held (the cost ledger's part no record carries)
    results/             the result store's write-once parquet shards (resume reads them)
    transcripts/         content-addressed texts of every engine call (see llmrec.transcripts)
    plots/               figures; plots/left_out.json: figure → why it was not drawn
    comparisons/         comparisons written for this run (``llmrec compare``)

Reading a run directory never imports code: configs are read as plain YAML mappings here; typed configs are built by
the caller from the installed registries.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from llmrec.errors import DataError
from llmrec.storage import Storage, is_uri, resolve


class _Folder:
    """A directory, local or at a storage URI: what run and suite directories share."""

    def __init__(self, location: "str | Path | Storage | _Folder"):
        if isinstance(location, _Folder):
            location = location.storage
        self.storage = Storage.of(location)

    @property
    def uri(self) -> str:
        return self.storage.uri

    @property
    def name(self) -> str:
        return self.storage.name

    @property
    def path(self) -> Path | None:
        """The local folder (None for a storage URI)."""
        return self.storage.local_path

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.uri == self.uri

    def __hash__(self) -> int:
        return hash(self.uri)


class RunDir(_Folder):
    """One run's directory, local or at a storage URI."""

    CONFIG = "resolved.yaml"
    METRICS = "metrics.json"
    SAMPLES = "samples.parquet"
    PREDICTIONS = "predictions.jsonl"
    FACTS = "run_facts.json"
    PROTOCOL = "protocol.json"
    MLFLOW_ID = "mlflow_run_id"
    RESULTS = "results"
    TRANSCRIPTS = "transcripts"
    PLOTS = "plots"
    PLOTS_LEFT_OUT = "left_out.json"  # in plots/: figure → why it was not drawn (no data, one x value)
    COMPARISONS = "comparisons"
    COST_LEDGER = "cost_ledger.json"  # what each invocation held (CPU/GPU seconds per role): the cost ledger's part
    # that no record carries (see llmrec.pipelines.runner.cost)

    @property
    def local(self) -> bool:
        return self.storage.local

    def mkdir(self) -> None:
        self.storage.mkdir()

    def file(self, name: str) -> Path:
        """The local path of one of the directory's files (a local run directory only)."""
        if self.path is None:
            raise DataError(f"{self.uri}: a storage URI has no local file path for {name}; read it through RunDir")
        return self.path / name

    def exists(self, name: str) -> bool:
        return self.storage.exists(name)

    @classmethod
    def is_run(cls, location: "str | Path | Storage") -> bool:
        """Whether ``location`` looks like a run directory (it has a config or metrics)."""
        s = Storage.of(location)
        return s.exists(cls.CONFIG) or s.exists(cls.METRICS)

    # ---- the config -----------------------------------------------------------------------------------------
    def has_config(self) -> bool:
        return self.exists(self.CONFIG)

    def config_text(self) -> str:
        return self.storage.read_text(self.CONFIG)

    def config(self) -> dict[str, Any]:
        """``resolved.yaml`` as a plain mapping (nothing is imported or validated here)."""
        where = f"{self.uri}/{self.CONFIG}"
        try:
            from llmrec.config import BoundedLoader  # aliases that expand without end are refused, not walked

            raw = yaml.load(self.config_text(), Loader=BoundedLoader)
        except yaml.YAMLError as e:
            raise DataError(f"{where}: not readable YAML ({e})") from e
        except UnicodeDecodeError as e:
            raise DataError(f"{where}: not UTF-8 text ({e})") from e
        if not isinstance(raw, dict):
            raise DataError(f"{where}: expected a mapping, got {type(raw).__name__}")
        return raw

    def benchmark_name(self) -> str | None:
        """The benchmark named in the config (a plain string; never imported here)."""
        bench = self.config().get("benchmark")
        name = bench.get("name") if isinstance(bench, dict) else None
        return name if isinstance(name, str) else None

    def write_config(self, text: str) -> None:
        self.storage.write_text(self.CONFIG, text)

    # ---- metrics --------------------------------------------------------------------------------------------
    def has_metrics(self) -> bool:
        return self.exists(self.METRICS)

    def metrics(self) -> dict[str, Any]:
        return self._json(self.METRICS)

    def write_metrics(self, metrics: dict) -> None:
        self.storage.write_text(self.METRICS, dumps_json(metrics))

    # ---- facts, protocol, MLflow id -------------------------------------------------------------------------
    def facts(self) -> dict[str, dict]:
        return self._json(self.FACTS) if self.exists(self.FACTS) else {}

    def write_facts(self, facts: dict) -> None:
        self.storage.write_text(self.FACTS, dumps_json(facts))

    def drop_facts(self) -> None:
        self.storage.delete(self.FACTS)

    def mlflow_run_id(self) -> str | None:
        return self.storage.read_text(self.MLFLOW_ID).strip() or None if self.exists(self.MLFLOW_ID) else None

    def set_mlflow_run_id(self, run_id: str) -> None:
        self.storage.write_text(self.MLFLOW_ID, run_id)

    def drop_mlflow_run_id(self) -> None:
        self.storage.delete(self.MLFLOW_ID)

    # ---- cost ledger ----------------------------------------------------------------------------------------
    def cost_invocations(self) -> list[dict]:
        """Each earlier invocation's entry of ``COST_LEDGER`` ([] without one)."""
        if not self.exists(self.COST_LEDGER):
            return []
        value = self._json(self.COST_LEDGER).get("invocations")
        return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []

    def add_cost_invocation(self, entry: dict) -> None:
        self.storage.write_text(self.COST_LEDGER, dumps_json({"invocations": [*self.cost_invocations(), entry]}))

    def drop_cost_invocations(self) -> None:
        self.storage.delete(self.COST_LEDGER)

    # ---- rows -----------------------------------------------------------------------------------------------
    def has_samples(self) -> bool:
        return self.exists(self.SAMPLES)

    def samples_bytes(self) -> bytes:
        return self.storage.read_bytes(self.SAMPLES)

    def has_predictions(self) -> bool:
        return self.exists(self.PREDICTIONS)

    # ---- sub-folders ----------------------------------------------------------------------------------------
    @property
    def results(self) -> Storage:
        return self.storage / self.RESULTS

    @property
    def transcripts(self) -> Storage:
        return self.storage / self.TRANSCRIPTS

    @property
    def plots(self) -> Storage:
        return self.storage / self.PLOTS

    @property
    def comparisons(self) -> Storage:
        return self.storage / self.COMPARISONS

    # ---- helpers --------------------------------------------------------------------------------------------
    def _json(self, name: str) -> dict:
        where = f"{self.uri}/{name}"
        try:
            value = json.loads(self.storage.read_text(name))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise DataError(f"{where}: not readable JSON ({e})") from e
        if not isinstance(value, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(value).__name__}")
        return value


class SuiteDir(_Folder):
    """A suite's directory: ``suite.json`` (the index of its run directories) and ``comparisons/``."""

    INDEX = "suite.json"
    COMPARISONS = "comparisons"
    REPORT = "report.html"

    @classmethod
    def is_suite(cls, location: "str | Path | Storage") -> bool:
        return Storage.of(location).exists(cls.INDEX)

    def index_text(self) -> str:
        return self.storage.read_text(self.INDEX)

    def write_index(self, index: dict) -> None:
        self.storage.write_text(self.INDEX, dumps_json(index))

    def entry(self, subject: str, entry: str) -> RunDir:
        """The run directory of one (subject, benchmark entry) inside the suite directory."""
        return RunDir(self.storage / subject / entry)

    def run_dir(self, recorded: str, subject: str, entry: str) -> RunDir:
        """An index entry's run directory: as recorded (relative to the suite directory when it is relative),
        else ``<suite>/<subject>/<entry>`` (a copy of a suite, e.g. downloaded from S3)."""
        if is_uri(recorded):
            if self.path is not None and (self.path / subject / entry).is_dir():
                return self.entry(subject, entry)
            return RunDir(recorded)
        p = Path(recorded)
        if not p.is_absolute() and self.path is not None and (self.path / p).exists():
            return RunDir(self.path / p)
        if not p.exists() and self.path is not None and (self.path / subject / entry).is_dir():
            return self.entry(subject, entry)
        if not p.is_absolute() and self.path is None:
            return RunDir(self.storage / recorded)
        return RunDir(resolve(p))

    @property
    def comparisons(self) -> Storage:
        return self.storage / self.COMPARISONS


def dumps_json(value: Any) -> str:
    """JSON as llmrec writes it: sorted keys, indented, and strict — a NaN or infinity is written as null (bare
    ``NaN`` is not JSON)."""
    return json.dumps(_finite(value), indent=1, sort_keys=True, default=str, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value

"""The run directory and the suite directory: the only code that knows their file names.

Every verb that writes or reads results — run, suite, leaderboard, compare, report, view, runs, sft export,
train — goes through :class:`RunDir` (one evaluation or training run) and :class:`SuiteDir` (a suite: an index
``suite.json`` over run directories, plus the suite's comparisons). The writers — run, suite, train, tune, sft — make
a run's files through :class:`RunWriter`, which publishes the metrics last. Both sit on :class:`llmrec.storage.Storage`, so a
local folder and a storage URI (``s3://…``) are read and written the same way.

A run directory holds::

    resolved.yaml        the config the results were produced under (credentials redacted)
    metrics.json         the aggregate metrics (written last: a run directory with it is complete)
    samples.parquet      one typed row per sample (see llmrec.pipelines.record)
    predictions.jsonl    the benchmark's predictions in its reference code's format (optional)
    run_facts.json       role → what its engine learned while running (optional)
    provenance.json      what produced the outputs: software, model bytes, machine, sampling (llmrec.provenance)
    protocol.json        the protocol record of a training run (optional)
    mlflow_run_id        the MLflow run this directory is logged to
    cost_ledger.json     the CPU/GPU seconds each invocation held (the cost ledger's part no record carries)
    results/             the result store's write-once parquet shards (resume reads them)
    transcripts/         content-addressed texts of every engine call (see llmrec.transcripts)
    plots/               figures; plots/left_out.json: figure → why it was not drawn
    comparisons/         comparisons written for this run (``llmrec compare``)
    labels.jsonl         people's labels of its samples (``llmrec view --annotate``; append-only, never read by
                         metrics)
    .llmrec.lock         held (``fcntl.flock``) by the one process writing the run (``RunDir.writer``)

Reading a run directory never imports code: configs are read as plain YAML mappings here; typed configs are built by
the caller from the installed registries.

Only the run itself writes inside its directory, with one exception: ``llmrec view --annotate`` (and its label
import) appends people's labels to ``labels.jsonl`` (:meth:`RunDir.append_labels`) and writes nothing else there.
Every other verb's output (``--out``, ``--plot``, ``--dest``, a
config's output folder or cache file) goes through :func:`refuse_inside_runs`, which refuses a path inside a run
directory, whatever file it names, and a suite's index; and one process at a time writes a local run directory
(:meth:`RunDir.writer`: a lock the operating system releases when its holder dies).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from llmrec.errors import ConfigError, DataError
from llmrec.storage import Storage, is_uri, resolve


_HELD: dict[str, list] = {}  # lock file → [descriptor, holds] of the run directories this process writes


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
    PROVENANCE = "provenance.json"  # software, model bytes, machine, sampling (pipelines/runner/provenance_record.py)
    PROTOCOL = "protocol.json"
    MLFLOW_ID = "mlflow_run_id"
    RESULTS = "results"
    TRANSCRIPTS = "transcripts"
    PLOTS = "plots"
    PLOTS_LEFT_OUT = "left_out.json"  # in plots/: figure → why it was not drawn (no data, one x value)
    COMPARISONS = "comparisons"
    COST_LEDGER = "cost_ledger.json"  # what each invocation held (CPU/GPU seconds per role): the cost ledger's part
    # that no record carries (see llmrec.pipelines.runner.cost)
    LOCK = ".llmrec.lock"  # the writer's lock (``writer``)
    LABELS = "labels.jsonl"  # people's labels of the samples (append-only JSON lines; never read by metrics)
    # what marks a folder as a run directory for refuse_inside_runs (any one of them; a metrics.json alone is not one:
    # `llmrec score --out` writes such files anywhere)
    MARKERS = (CONFIG, SAMPLES, PROTOCOL, COST_LEDGER, LOCK)
    # what a run's start with --fresh removes: every file derived from the results it discards
    DERIVED = (METRICS, SAMPLES, PREDICTIONS, FACTS, MLFLOW_ID, COST_LEDGER, PROVENANCE)

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

    def provenance(self) -> dict[str, Any]:
        """``provenance.json`` ({} for a run written before it existed)."""
        return self._json(self.PROVENANCE) if self.exists(self.PROVENANCE) else {}

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

    # ---- people's labels ------------------------------------------------------------------------------------
    def labels_text(self) -> str:
        """``LABELS`` as text ("" where nobody labelled a sample yet)."""
        return self.storage.read_text(self.LABELS) if self.exists(self.LABELS) else ""

    def append_labels(self, lines: list[str]) -> None:
        """Append JSON lines to ``LABELS`` (a local run directory only: a storage URI cannot be appended to), in
        one write so that a line is never interleaved with another writer's."""
        if self.path is None:
            raise ConfigError(f"{self.uri}: labels are written to local run directories only (copy the run here)")
        data = "".join(line.rstrip("\n") + "\n" for line in lines).encode("utf-8")
        fd = os.open(self.path / self.LABELS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

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

    # ---- one writer -----------------------------------------------------------------------------------------
    @contextmanager
    def writer(self):
        """Hold the run directory for this process while the block runs: a second writer (another ``llmrec run``
        of the same config, a suite entry, a rejudge into it) fails at once with a ``ConfigError`` naming the
        holder's pid. A local directory is locked with ``fcntl.flock`` on ``LOCK``, which the operating system
        releases when the holder exits or is killed; the file is left in place (deleting it would race with the
        next writer). A storage URI (``s3://…``) has no such lock: one writer per remote run directory is the
        user's to keep (logged)."""
        if self.path is None:
            import logging

            logging.getLogger(__name__).info("%s: a storage URI is not locked; run one writer at a time", self.uri)
            yield
            return
        import fcntl

        self.mkdir()
        lock = self.path / self.LOCK
        key = str(lock.resolve())
        if key not in _HELD:  # else this process holds it already (e.g. a plan made again in the same process)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "another process"
                os.close(fd)
                raise ConfigError(f"{self.uri}: another llmrec process is writing this run directory ({holder}); "
                                  "wait for it to end or stop it, then run again (one writer per run directory; "
                                  f"the lock {lock} is released when its holder exits)") from None
            except BaseException:
                os.close(fd)
                raise
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since "
                          f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime())}\n".encode(), 0)
            _HELD[key] = [fd, 0]
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
            if _HELD[key][1] == 0:
                os.close(_HELD.pop(key)[0])  # closing the descriptor releases the lock

    def drop_derived(self) -> None:
        """Remove every file derived from the results (metrics, samples, predictions, facts, the MLflow run id, the
        cost ledger, the plots): a fresh start leaves nothing a reader could take for the new run's."""
        for name in self.DERIVED:
            self.storage.delete(name)
        plots = self.plots
        for name in plots.list():
            plots.delete(name)

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


class RunWriter:
    """The write twin of :class:`RunDir`: how ``run``, ``suite``, ``train``, ``tune`` and ``sft`` write a run directory.

    Files are made in a local working folder (``work``) and published to the run directory: a local run directory is
    its own working folder (nothing is copied; text files are written atomically), a storage URI gets a temporary
    folder whose files :meth:`publish` uploads whole. The metrics file marks a run directory complete, so it goes
    last: :meth:`write_metrics` publishes it at once and :meth:`publish_all` uploads it after everything else.
    """

    def __init__(self, target: "RunDir | str | Path | Storage"):
        self.run_dir = target if isinstance(target, RunDir) else RunDir(target)
        self._tmp = None
        if self.run_dir.local:
            self.work = self.run_dir.path
        else:
            import tempfile

            self._tmp = tempfile.TemporaryDirectory(prefix=f"llmrec-{self.run_dir.name}-")
            self.work = Path(self._tmp.name)
        self.work.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> "RunWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def store(self) -> Storage:
        return self.run_dir.storage

    @property
    def uri(self) -> str:
        return self.run_dir.uri

    @property
    def name(self) -> str:
        return self.run_dir.name

    def location(self, rel: str) -> str:
        """Where ``rel`` (``checkpoint/best.pt``) lives in the run directory: a local path or a URI."""
        return f"{self.uri}/{rel}"

    def file(self, rel: str) -> Path:
        """``rel``'s local file in the working folder (made there, then published)."""
        return self.work / rel

    def exists(self, rel: str) -> bool:
        """Whether the run directory (not the working folder) holds ``rel``."""
        folder, _, name = rel.rpartition("/")
        return (self.store / folder if folder else self.store).exists(name)

    def read_text(self, rel: str) -> str:
        folder, _, name = rel.rpartition("/")
        return (self.store / folder if folder else self.store).read_text(name)

    def write_text(self, rel: str, text: str, publish: bool = True) -> Path:
        """Write ``rel`` atomically in the working folder (and, unless ``publish`` is False, publish it)."""
        folder, _, name = rel.rpartition("/")
        Storage(self.work / folder if folder else self.work).write_text(name, text)
        if publish:
            self.publish(rel)
        return self.work / rel

    def write_config(self, text: str, publish: bool = True) -> Path:
        return self.write_text(RunDir.CONFIG, text, publish)

    def write_protocol(self, protocol: dict, publish: bool = True) -> Path:
        return self.write_text(RunDir.PROTOCOL, json.dumps(protocol, indent=2, default=str), publish)

    def write_facts(self, facts: dict, publish: bool = True) -> Path:
        return self.write_text(RunDir.FACTS, dumps_json(facts), publish)

    def write_provenance(self, record: dict, publish: bool = True) -> Path:
        return self.write_text(RunDir.PROVENANCE, dumps_json(record), publish)

    def write_metrics(self, metrics: dict, publish: bool = True) -> Path:
        """The metrics: the file that marks the run complete. Write (and publish) it after the files it sums up."""
        return self.write_text(RunDir.METRICS, dumps_json(metrics), publish)

    def publish(self, *rels: str | Path) -> None:
        """Upload these files of the working folder (relative names, or paths inside it) to a URI run directory
        (no-op when local), in the order given."""
        if self.run_dir.local:
            return
        for rel in rels:
            rel = Path(rel).relative_to(self.work).as_posix() if Path(rel).is_absolute() else str(rel)
            if (self.work / rel).is_file():
                self.store.put_file(self.work / rel, rel)

    def publish_all(self, last: str | None = RunDir.METRICS, skip: tuple[str, ...] = ()) -> None:
        """Upload every file of the working folder (but those under ``skip`` folders), ``last`` (the metrics) last."""
        rels = sorted(p.relative_to(self.work).as_posix() for p in self.work.rglob("*") if p.is_file())
        rels = [r for r in rels if r != last and not r.startswith(tuple(f"{s}/" for s in skip))]
        self.publish(*rels, *([last] if last else []))

    def close(self) -> None:
        """Remove the working folder of a URI run directory (after the files were published)."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


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


def run_dir_of(path: str | Path) -> Path | None:
    """The run directory ``path`` is or lies inside (the nearest one: a folder holding one of ``RunDir.MARKERS``),
    else None. Local paths only; symbolic links are followed."""
    p = Path(path).expanduser().resolve()
    for d in (p, *p.parents):
        if d.is_dir() and any((d / m).exists() for m in RunDir.MARKERS):
            return d
    return None


def refuse_inside_runs(path: str | Path | None, flag: str) -> None:
    """Raise a ``ConfigError`` when a verb's output ``path`` (a file or a folder it writes; ``flag`` names the
    option or key that gave it) is a run directory, lies inside one, or is a suite's index: only the run itself
    writes there, whatever the path names. A storage URI is not checked here (outputs are local)."""
    if path is None or is_uri(path):
        return
    run = run_dir_of(path)
    if run is not None:
        raise ConfigError(f"{flag} {path}: inside the run directory {run}; only the run itself writes there. Write "
                          "the output elsewhere")
    p = Path(path).expanduser().resolve()
    if p.name == SuiteDir.INDEX and SuiteDir.is_suite(p.parent):
        raise ConfigError(f"{flag} {path}: the index of the suite {p.parent}; only `llmrec suite` writes it. Write "
                          "the output elsewhere")
    if p.name == RunDir.MLFLOW_ID and p.is_file():
        raise ConfigError(f"{flag} {path}: the MLflow run id of {p.parent}; only its run writes it. Write the output "
                          "elsewhere")


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

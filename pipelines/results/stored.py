"""A finished run as every read verb sees it: :class:`StoredRun`, opened by :func:`open_runs`.

The read verbs (leaderboard, compare, report, view, judges, rejudge's source) used to open run directories each its
own way, with three run types, three sample readers that disagreed on what an empty run is, and three dispatchers
between a run and a suite directory. Here is the one of each:

- :func:`open_runs` turns run directories, suite directories and storage URIs (``s3://…``) alike into a list of
  :class:`StoredRun`: a run directory is one; a suite directory is its index's entries (``suite.json``), in order.
- :class:`StoredRun` names the run (subject, benchmark, entry, kind, suite) and reads what the directory stores only
  when a verb asks for it: its config (a plain mapping, or typed through the installed registries), its installed
  benchmark, metrics, cost ledger, MLflow id, its rows (the samples file, only the columns asked for; or the result
  store) and its transcripts.
- :func:`read_samples` is the one reader of a samples file; :class:`RunNotReadable` the one error of a run or suite
  that cannot be read, naming the path and what is missing or damaged.

Reading results never imports code a run directory names: benchmarks are looked up among the installed ones by
their plain name (``installed_only``). Only this module (and ``llmrec.rundir``) knows the directory's files.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from llmrec import storage, tracking
from llmrec.pipelines import capabilities as caps
from llmrec.errors import ConfigError, DataError, LlmrecError
from llmrec.rundir import RunDir, SuiteDir
from llmrec.small_samples import finite_number

if TYPE_CHECKING:
    from llmrec.pipelines.protocol import Benchmark
    from llmrec.transcripts import TextStore

ANY_RUN = (RunDir.CONFIG, RunDir.METRICS)  # what marks a run directory for the verbs that take either


class RunNotReadable(ConfigError, DataError):
    """A run or suite directory that cannot be read: the message names the path and what is missing or damaged.

    It is both a ``ConfigError`` and a ``DataError`` (the verbs raised one or the other before they shared this
    module), so callers that catch either keep catching it; the CLI prints it in one line and exits 2."""


def _readable(what, where: str, damaged: str = "cannot read it"):
    """``what()``, its errors as one ``RunNotReadable`` naming ``where``."""
    try:
        return what()
    except RunNotReadable:
        raise
    except LlmrecError as e:
        raise RunNotReadable(str(e).replace("not readable JSON", "cannot read it as JSON")) from e
    except OSError as e:
        raise RunNotReadable(f"{where}: {damaged} ({e})") from e


def read_samples(rd: RunDir, columns: list[str] | None = None) -> list[dict] | None:
    """The rows of a run's samples file (missing values as None, nested values decoded), local or at a storage URI;
    only ``columns`` where given (parquet reads no other column). None when the run has no samples file (a run still
    going, a baseline's result): callers say what that means for them."""
    from llmrec.pipelines.record import read_rows

    if not rd.has_samples():
        return None
    where = f"{rd.uri}/{RunDir.SAMPLES}"
    try:
        source = rd.file(RunDir.SAMPLES) if rd.local else io.BytesIO(rd.samples_bytes())
        if columns is None:
            return read_rows(source)
        return _read_columns(source, columns)
    except (OSError, ValueError) as e:
        raise RunNotReadable(f"{where}: cannot read it as parquet ({e})") from e


def _read_columns(source, columns: list[str]) -> list[dict]:
    """Some columns of a samples file, decoded as ``read_rows`` decodes them (a column the file lacks: left out)."""
    import pyarrow.parquet as pq

    from llmrec.pipelines.record import read_rows

    have = set(pq.read_schema(source).names)
    if hasattr(source, "seek"):
        source.seek(0)
    table = pq.read_table(source, columns=[c for c in columns if c in have])
    buf = io.BytesIO()
    pq.write_table(table, buf)  # read_rows decodes a table's JSON columns by its schema's marks, kept here
    buf.seek(0)
    return read_rows(buf)


def installed_benchmark(name: str | None, where: str | None = None) -> "Benchmark | None":
    """The installed benchmark of that name (or a plugin this process already loaded from a config it ran), looked up
    with ``installed_only``: what a results file names is never imported. Anything else: None where ``where`` is
    None (its samples show without verdicts), else ``RunNotReadable`` naming ``where``."""
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.registry import installed_only

    if not name or not isinstance(name, str):
        if where is None:
            return None
        name = str(name)
    with installed_only():
        try:
            return get_benchmark(name)
        except ConfigError as e:
            if where is None:
                return None
            raise RunNotReadable(f"{where}: {e}") from e


@dataclass(frozen=True)
class StoredRun:
    """One finished (or stopped) run directory and what the read verbs show of it; its files are read when asked.

    ``subject``, ``benchmark``, ``entry`` and ``kind`` are the suite index's for a suite's entry; a plain run's come
    from its config (the engine's model label, ``benchmark.name``, the benchmark's ``entry_label``). ``name``: what
    ``llmrec compare`` calls it (the directory's name, or ``<subject>/<entry>`` in a suite); ``key``: its position
    among the runs ``open_runs`` opened (the viewer's address of a run)."""

    dir: RunDir
    subject: str
    benchmark: str
    entry: str
    name: str
    kind: str = "llm"
    key: str = "0"
    suite: str | None = None  # the suite's name, for a suite's entry
    suite_entry: str | None = None  # the suite index's entry (runs are compared within one); None: a plain run
    listed_headline: tuple[str, ...] = field(default=(), repr=False)  # the suite index's headline metrics

    @classmethod
    def held(cls, location: "str | Path | RunDir", subject: str, benchmark: str, entry: str | None = None,
             name: str | None = None, **known: Any) -> "StoredRun":
        """A run whose stored parts are given rather than read (``known``: ``metrics``, ``config``, ``run_config``,
        ``bench``, ``rows``, ``judged``, …): for a verb's rendering of rows it already holds, and for tests."""
        rd = location if isinstance(location, RunDir) else RunDir(location)
        fields = {k: known.pop(k) for k in ("kind", "key", "suite", "suite_entry", "listed_headline") if k in known}
        run = cls(rd, subject, benchmark, entry or benchmark, name or rd.name, **fields)
        run.__dict__.update(known)
        return run

    # ---- where it is ----------------------------------------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        """The directory as a path (a storage URI as given)."""
        return Path(self.dir.uri)

    path = run_dir

    @property
    def label(self) -> str:
        """How pages and tables name it: ``<subject> · <entry>``."""
        return f"{self.subject} · {self.entry}"

    @property
    def group(self) -> str:
        """The runs compared together: a suite's entry, else the (installed) benchmark's runs."""
        return self.suite_entry or (self.bench.name if self.bench is not None else self.benchmark)

    # ---- its config and benchmark ---------------------------------------------------------------------------
    @cached_property
    def config(self) -> dict[str, Any]:
        """The stored config as a plain mapping ({} where the directory has none, e.g. a baseline's)."""
        rd = self.dir
        return _readable(rd.config, rd.uri) if rd.has_config() else {}

    @cached_property
    def run_config(self):
        """The config typed as a ``RunConfig`` with the installed benchmarks and engines only (nothing it names is
        imported); ``RunNotReadable`` naming the file and key where it does not validate."""
        from llmrec.config import validate
        from llmrec.pipelines.runner.run_config import RunConfig
        from llmrec.registry import installed_only

        where = f"{self.dir.uri}/{RunDir.CONFIG}"
        if not self.dir.has_config():
            raise RunNotReadable(f"{self.run_dir}: not a run directory (no {RunDir.CONFIG})")
        raw = self.config
        for key in ("benchmark", "engine"):
            if key not in raw:
                raise RunNotReadable(f"{where}: missing required section '{key}'")
        with installed_only():
            try:
                return validate(RunConfig, raw)
            except ConfigError as e:
                raise RunNotReadable(f"{where}: {e}") from e

    @cached_property
    def bench(self) -> "Benchmark | None":
        """The installed benchmark of that name; None where it is not installed (its samples have no verdicts)."""
        return installed_benchmark(self.benchmark)

    def installed_bench(self, where: str | None = None) -> "Benchmark":
        """The installed benchmark, or ``RunNotReadable`` naming ``where`` (default: the config file)."""
        return installed_benchmark(self.benchmark, where or f"{self.dir.uri}/{RunDir.CONFIG}")

    @cached_property
    def headline(self) -> tuple[str, ...]:
        """The suite index's headline metrics, else the benchmark's."""
        if self.listed_headline:
            return tuple(self.listed_headline)
        return tuple(caps.headline_metrics(self.bench)) if self.bench is not None else ()

    @cached_property
    def judged(self) -> tuple[str, ...]:
        """The benchmark's judged metrics (shown with their judge failure rate)."""
        return tuple(caps.judged_metrics(self.bench)) if self.bench is not None else ()

    @property
    def max_judge_failed_share(self) -> float:
        from llmrec.pipelines.runner import judge_failures

        v = finite_number((self.config.get("execution") or {}).get("max_judge_failed_share"))
        return v if math.isfinite(v) else judge_failures.DEFAULT_MAX_SHARE

    # ---- what it stored -------------------------------------------------------------------------------------
    def has_metrics(self) -> bool:
        return self.dir.has_metrics()

    @cached_property
    def metrics(self) -> dict[str, Any]:
        """The stored metrics (``RunDir.METRICS``; {} where the run has none yet)."""
        rd = self.dir
        return _readable(rd.metrics, rd.uri) if rd.has_metrics() else {}

    @cached_property
    def cost_ledger(self) -> list[dict]:
        """What each invocation held (CPU/GPU seconds per role); [] without a ledger."""
        return _readable(self.dir.cost_invocations, self.dir.uri)

    @cached_property
    def mlflow_run_id(self) -> str | None:
        return _readable(self.dir.mlflow_run_id, self.dir.uri)

    @cached_property
    def provenance(self) -> dict[str, Any]:
        """What produced its outputs (``provenance.json``: software, machine, engines' models, sampling); {} for a
        run written before the record existed."""
        return _readable(self.dir.provenance, self.dir.uri)

    @cached_property
    def facts(self) -> dict[str, dict]:
        """What each role's engine learned while running (``run_facts.json``)."""
        return _readable(self.dir.facts, self.dir.uri)

    def has_samples(self) -> bool:
        return self.dir.has_samples()

    def samples(self, columns: list[str] | None = None) -> list[dict] | None:
        """The samples file's rows (only ``columns`` where given); None without one. Not kept: ask once."""
        return read_samples(self.dir, columns)

    @cached_property
    def rows(self) -> list[dict]:
        """Every stored row: the result store's (``results/``, what an unfinished or resumed run holds) where it
        has any, else the samples file's; ``RunNotReadable`` when the run kept neither."""
        got = self.stored_rows()
        if got is None:
            raise RunNotReadable(f"{self.dir.uri}: no per-sample results ({RunDir.RESULTS}/ or {RunDir.SAMPLES}); "
                                 "`llmrec compare` pairs samples, so it needs run directories written by `llmrec run`")
        return got

    def with_rows(self, rows: list[dict], name: str | None = None) -> "StoredRun":
        """The same run holding only ``rows`` (a subset; a juror's view of a jury run), named ``name`` if given;
        its config and benchmark as read already."""
        run = replace(self, name=self.name if name is None else name)
        run.__dict__.update({k: v for k, v in self.__dict__.items() if k in ("config", "run_config", "bench")},
                            rows=rows)
        return run

    def stored_rows(self) -> list[dict] | None:
        """The result store's rows where it has any, else the samples file's; None without either."""
        from llmrec.pipelines.common.store import ResultStore

        rd = self.dir
        held = (rd.path / RunDir.RESULTS).is_dir() if rd.path is not None else bool(rd.results.list(".parquet"))
        if held:  # a local folder, or a storage URI's results/ (s3://…)
            return list(ResultStore(rd.results, writer=False).load().values())  # reads, changes nothing
        return read_samples(rd)

    def result_shards(self) -> int:
        """How many result shards ``results/`` holds (0 where it cannot be listed)."""
        try:
            return len([n for n in self.dir.results.list(".parquet") if not n.startswith(".")])
        except Exception:  # noqa: BLE001 - an unreadable listing counts as none
            return 0

    @cached_property
    def transcripts(self) -> "TextStore":
        """The run's text store (the messages of every engine call), read when a text is asked for."""
        from llmrec.transcripts import TextStore

        return TextStore(self.dir.transcripts)

    def stored_transcripts(self) -> "TextStore | None":
        """Its text store where the run kept transcripts; None where it has none (a run from before them)."""
        return self.transcripts if self.dir.exists(RunDir.TRANSCRIPTS) else None

    @property
    def transcripts_root(self) -> storage.Storage:
        return self.dir.transcripts

    @property
    def transcripts_location(self) -> str:
        """Where its transcripts are (for messages)."""
        return f"{self.dir.uri}/{RunDir.TRANSCRIPTS}"

    @property
    def samples_location(self) -> str:
        """Where its samples file is (for messages)."""
        return str(self.run_dir / RunDir.SAMPLES)

    @property
    def plots_dir(self) -> Path | None:
        """The local folder of its figures (None for a storage URI)."""
        return self.run_dir / RunDir.PLOTS if self.dir.local else None

    # ---- provenance -----------------------------------------------------------------------------------------
    @cached_property
    def sources(self) -> dict[str, int]:
        """Where its answers came from: engine calls, request-cache hits, hits computed for another run."""
        from llmrec.pipelines.runner.cost import answer_sources

        return answer_sources(self.rows)

    @property
    def protocol(self) -> dict:
        """The protocol record its results were produced under (benchmark, and judge where it is judged)."""
        from llmrec.config import flatten
        from llmrec.pipelines.protocol import protocol_record
        from llmrec.pipelines.runner.judges import judge_protocol

        cfg, bench = self.run_config, self.installed_bench()
        judge = judge_protocol(cfg, bench)  # runs judged by different judges differ in protocol
        return flatten({"benchmark": protocol_record(bench, cfg.benchmark),
                        **({"judge": judge} if judge is not None else {})})


@dataclass(frozen=True)
class StoredSuite:
    """A suite directory: its index's name and entries, each a :class:`StoredRun` (in the index's order)."""

    dir: SuiteDir
    name: str
    runs: tuple[StoredRun, ...]

    @classmethod
    def open(cls, location: str | Path, start: int = 0) -> "StoredSuite":
        """The suite at ``location`` (local or a storage URI); its runs keyed from ``start``."""
        from llmrec.pipelines.runner.suite_config import read_index

        index, found = read_index(location)  # nothing a benchmark name names is imported
        runs = tuple(StoredRun(rd, e.subject, e.benchmark, e.entry, f"{e.subject}/{e.entry}", e.kind, str(start + i),
                               index.name, e.entry, tuple(e.headline)) for i, (e, rd) in enumerate(found))
        return cls(SuiteDir(location), index.name, runs)


def open_run(location: str | Path | RunDir, key: str = "0") -> StoredRun:
    """One run directory: named from its config (the engine's model, ``benchmark.name``)."""
    rd = location if isinstance(location, RunDir) else RunDir(location)
    cfg = _readable(rd.config, rd.uri) if rd.has_config() else {}
    bench_section = cfg.get("benchmark")
    name = bench_section.get("name") if isinstance(bench_section, dict) else None
    name = name if isinstance(name, str) else None
    bench = installed_benchmark(name)
    subject = tracking.model_label(cfg.get("engine") or {}) if cfg.get("engine") else rd.name
    entry = rd.name
    if bench is not None:
        entry = caps.entry_label(bench, bench_section or {})
    run = StoredRun(rd, subject, str(name or "?"), entry, rd.name, key=key)
    run.__dict__["config"] = cfg  # read once here; a cached_property's value
    return run


def open_runs(sources: Iterable[str | Path], needs: tuple[str, ...] = ANY_RUN,
              folders: bool = False) -> list[StoredRun]:
    """Every run of the given run directories, suite directories and storage URIs, in order (a suite: its entries).

    ``needs``: the files any one of which marks a plain run directory for the caller (the leaderboard needs
    ``RunDir.METRICS``; the viewer either file). ``folders``: a local folder that is neither stands for the run and
    suite directories directly inside it (by name; other folders skipped). A source that is none of these raises
    ``RunNotReadable`` naming it."""
    out: list[StoredRun] = []
    for src in _inside_folders(map(str, sources), needs) if folders else map(str, sources):
        if not storage.is_uri(src) and not Path(src).exists():
            raise RunNotReadable(f"{src}: no such run or suite directory")
        if SuiteDir.is_suite(src):
            out += StoredSuite.open(src, len(out)).runs
        elif any(RunDir(src).exists(n) for n in needs):
            out.append(open_run(src, str(len(out))))
        else:
            raise RunNotReadable(f"{src}: neither a run directory ({', '.join(needs)}) nor a suite directory "
                                 f"({SuiteDir.INDEX})")
    return out


def _inside_folders(sources: Iterable[str], needs: tuple[str, ...]) -> Iterable[str]:
    """Each source, a local folder that is neither a run nor a suite directory replaced by the run and suite
    directories directly inside it (sorted by name); ``RunNotReadable`` naming a folder that holds none."""
    for src in sources:
        path = Path(src)
        if storage.is_uri(src) or not path.is_dir() or SuiteDir.is_suite(src) or any(
                RunDir(src).exists(n) for n in needs):
            yield src  # a run, a suite, a URI, or what open_runs reports as missing
            continue
        inside = [str(p) for p in sorted(path.iterdir()) if p.is_dir() and not p.name.startswith(".")
                  and (SuiteDir.is_suite(str(p)) or any(RunDir(p).exists(n) for n in needs))]
        if not inside:
            raise RunNotReadable(f"{src}: neither a run directory ({', '.join(needs)}) nor a suite directory "
                                 f"({SuiteDir.INDEX}), and no folder directly inside it is one")
        yield from inside

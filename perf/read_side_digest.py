"""The read side's outputs on fixed run and suite directories: a digest to compare before and after a change of the
read verbs that should change no output (a refactor of how finished runs are read).

For the given sources it renders what the read verbs produce — the leaderboard's ``.md`` and ``.csv``, a compare's
``comparison.json`` (of every group of two or more runs given with ``--compare-runs``, and of each suite), the
report's HTML as text (tags stripped, the generation time dropped) and the viewer's pages (the list and every sample
page, through its Starlette app) — and prints a JSON digest: output name → sha256. Timestamps are removed before
hashing, so two renderings of the same inputs agree.

    python perf/read_side_digest.py --make-inputs /tmp/read-inputs      # once: runs and a suite, no model
    python perf/read_side_digest.py /tmp/read-inputs --out /tmp/read-before.json
    python perf/read_side_digest.py /tmp/read-inputs --compare /tmp/read-before.json   # exit 1 naming a difference

The inputs (``--make-inputs``) need no engine process and no model: two run directories of the toy benchmark answered
by the scripted fake engine through the runner's worker code (``process_samples``, as ``llmrec run`` writes its
result store), two PrefEval runs with transcripts and a suite of two subjects on two benchmarks, built as the tests
build them (``tests/pipelines/results_fixtures.py``, ``tests/pipelines/runner/viewer_fixtures.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import importlib
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?( ?UTC|Z|[+-]\d{2}:?\d{2})?")
TAG = re.compile(r"<[^>]*>")
SCRIPT = re.compile(r"<(script|style)\b.*?</\1>", re.S | re.I)


def _read_module(name: str):
    """A read verb's module: in the results room (``llmrec.pipelines.results``) or, in a checkout from before it,
    in the runner — so one script digests both sides of the move."""
    for package in ("llmrec.pipelines.results", "llmrec.pipelines.runner"):
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as e:
            if e.name not in (package, f"{package}.{name}"):
                raise
    raise ModuleNotFoundError(name)


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def _no_times(text: str) -> str:
    return TIMESTAMP.sub("<time>", text)


def html_text(page: str) -> str:
    """A page's text: scripts and styles dropped, tags stripped, entities decoded, blank runs collapsed."""
    text = html.unescape(TAG.sub(" ", SCRIPT.sub(" ", page)))
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _toy_run(root: Path, name: str, default: str, wrong: tuple[int, ...] = ()) -> Path:
    """A toy-benchmark run answered by the fake engine through the worker, stored as `llmrec run` stores it."""
    from llmrec.config import dump_yaml
    from llmrec.pipelines.common.store import ResultStore
    from llmrec.pipelines.registry import benchmark_config, get_benchmark
    from llmrec.pipelines.runner.run_config import RunConfig
    from llmrec.pipelines.runner.worker import process_samples
    from llmrec.serving.engine import build_engine
    from tests.pipelines.toy.benchmark import NAME

    rules = [{"contains": f"question {i}", "reply": "no" if default == "yes" else "yes"} for i in wrong]
    engine = {"type": "fake", "context_length": 60, "default": default, "rules": rules}
    cfg = RunConfig.model_validate({"benchmark": {"name": NAME, "n": 24, "rounds": 0}, "engine": engine,
                                    "output": {"dir": str(root / "toy"), "run_name": name},
                                    "tracking": {"enabled": False}})
    bench = get_benchmark(NAME)
    bench_cfg = benchmark_config(cfg.benchmark.model_dump(mode="json"))
    eng = build_engine(engine)
    rows = process_samples(bench, bench_cfg, bench.build_samples(bench_cfg, None), lambda role: eng, retries=1,
                           backoff_s=0.0)
    d = root / "toy" / name
    ResultStore(d / "results").write(rows)
    (d / "resolved.yaml").write_text(dump_yaml(cfg))
    return d


def make_inputs(root: Path) -> None:
    """The fixed inputs: toy/{base,better} (compare), viewer/{a,b} (PrefEval with transcripts), suite/ (a suite)."""
    from tests.pipelines.results_fixtures import suite_dir
    from tests.pipelines.runner.viewer_fixtures import prefeval_run

    root.mkdir(parents=True, exist_ok=True)
    _toy_run(root, "base", "no")
    _toy_run(root, "better", "yes", wrong=(9,))
    prefeval_run(root / "viewer" / "a", model="fake-a")
    prefeval_run(root / "viewer" / "b", n=10, model="fake-b")
    suite_dir(root / "suite")


def sources_of(root: Path) -> dict[str, list[Path]]:
    """The inputs' roles: what the leaderboard/report/viewer read, and the groups compare reads."""
    return {"runs": [root / "viewer" / "a", root / "viewer" / "b", root / "suite" / "demo_suite"],
            "compare": [[root / "toy" / "base", root / "toy" / "better"],
                        [root / "viewer" / "a", root / "viewer" / "b"],
                        [root / "suite" / "demo_suite"]]}


def digest_leaderboard(sources: list[Path], out: dict[str, str]) -> None:
    lb = _read_module("leaderboard")
    with tempfile.TemporaryDirectory() as d:
        files = lb.write(lb.leaderboard(sources), Path(d))
        for kind, path in sorted(files.items()):
            out[f"leaderboard.{kind}"] = _sha(_no_times(path.read_text()))


def digest_compare(groups: list[list[Path]], out: dict[str, str]) -> None:
    cmp = _read_module("compare")
    for group in groups:
        name = "+".join(p.name for p in group)
        with tempfile.TemporaryDirectory() as d:
            files = cmp.write_files(cmp.compare_runs(group, resamples=200, seed=0), Path(d))
            out[f"compare[{name}].comparison.json"] = _sha(_no_times(files["comparison"].read_text()))


def digest_report(sources: list[Path], out: dict[str, str]) -> None:
    report = _read_module("html_report")
    out["report.text"] = _sha(_no_times(html_text(report.render(sources))))


def digest_viewer(sources: list[Path], out: dict[str, str]) -> None:
    from starlette.testclient import TestClient

    viewer = _read_module("viewer")
    v = viewer.Viewer.open(sources)
    client = TestClient(viewer.app(v), base_url="http://127.0.0.1")
    pages = ["/samples", "/samples?verdict=wrong", "/samples?q=crowded"]
    pages += [viewer.sample_path(run, sid) for run, sid in zip(v.index["run"], v.index["sample_id"])]
    for path in pages:
        got = client.get(path)
        out[f"viewer{path}"] = _sha(f"{got.status_code}\n" + _no_times(got.text))


def load_toy() -> None:
    """Load the toy benchmark's plugin, as the run that wrote the toy runs did (results never import a plugin)."""
    from llmrec.pipelines.registry import get_benchmark
    from tests.pipelines.toy.benchmark import NAME

    get_benchmark(NAME)


def digest(root: Path) -> dict[str, str]:
    load_toy()
    src = sources_of(root)
    out: dict[str, str] = {}
    digest_leaderboard(src["runs"], out)
    digest_compare(src["compare"], out)
    digest_report(src["runs"], out)
    digest_viewer(src["runs"], out)
    return out


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return [f"{k}: {'missing' if k not in after else 'new' if k not in before else 'differs'}"
            for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path, help="the inputs' folder (as --make-inputs writes it)")
    ap.add_argument("--make-inputs", action="store_true", help="write the inputs into ROOT first")
    ap.add_argument("--out", type=Path, help="write the digest here (else print it)")
    ap.add_argument("--compare", type=Path, help="a digest to compare with: exit 1 naming each difference")
    args = ap.parse_args(argv)
    if args.make_inputs:
        make_inputs(args.root)
    got = digest(args.root)
    text = json.dumps(got, indent=1, sort_keys=True)
    if args.out:
        args.out.write_text(text + "\n")
    elif not args.compare:
        print(text)
    if args.compare:
        diff = differences(json.loads(args.compare.read_text()), got)
        for line in diff:
            print(f"differs: {line}", file=sys.stderr)
        print(f"{len(got)} outputs, " + ("identical" if not diff else f"{len(diff)} differ"))
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

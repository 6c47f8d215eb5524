"""Each benchmark's outputs on its demo config, with the scripted fake engine and without Ray: a digest to
compare before and after a change that should change no output.

For every demo config below, the benchmark section is validated as the run would validate it, its samples
built from the data directory (``LLMREC_DATA_DIR``), every stage run through the runner's own worker code
(``process_samples``: the request retries, the record checks, ``score``) with the fake engine as subject and
judge, then ``aggregate``, ``predictions`` (the bytes ``predictions.jsonl`` would hold) and
``paired_outcomes`` computed. The digest (JSON, one key per config) holds the sample ids, the sha256 and
line count of the predictions bytes, the metrics and the sha256 of the paired outcomes; compare two with
``diff`` or ``--compare``.

    python perf/benchmark_digest.py --out before.json     # on the old checkout
    python perf/benchmark_digest.py --out after.json --compare before.json
    (add --context-length 300 to both for a digest where some samples fail: over the fake engine's context)
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path

import yaml

CONFIGS = ("beyond_utility_demo", "gistbench_demo", "lrworld_demo", "perrecbench_demo", "prefeval_mcq_demo",
           "prefeval_gen_demo")
# the fake engine's reply per benchmark (constrained requests get their first choice / "{}" instead)
REPLIES = {"perrecbench": "4", "prefeval": "<choice>B</choice> Explanation: the answer respects the preference.",
           "gistbench": '{"interests": [{"name": "comedy", "evidence": [1]}]}', "lrworld": "B",
           "beyond_utility": '["Toy Story (1995)"]'}


def digest(config: str, root: Path, context_length: int | None = None) -> dict:
    from llmrec.pipelines import capabilities as caps
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.runner.worker import process_samples
    from llmrec.serving.engine import build_engine

    section = yaml.safe_load((root / "configs" / f"{config}.yaml").read_text())["benchmark"]
    bench = get_benchmark(section["name"])
    cfg = bench.config_cls.model_validate(section)
    data_dir = Path(os.environ["LLMREC_DATA_DIR"])
    engine = build_engine({"type": "fake", "default": REPLIES[bench.name], "context_length": context_length})
    engine.start()
    assets = caps.assets(bench, cfg, data_dir)
    samples = bench.build_samples(cfg, data_dir)
    rows = process_samples(bench, cfg, samples, lambda role: engine, retries=0, backoff_s=0, assets=assets)
    for r in rows:
        r.pop("outputs", None)  # latencies: not outputs of the benchmark
    metrics = caps.aggregate(bench, cfg, rows, assets)
    lines = "".join(json.dumps(line) + "\n" for line in write(rows, assets)) if (write := caps.predictions(bench)) else ""
    outcomes = json.dumps([dataclasses.asdict(o) for o in caps.paired_outcomes(bench, cfg, rows, assets)])
    return {"sample_ids": [r["sample_id"] for r in rows],
            "status": {s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})},
            "predictions_sha256": hashlib.sha256(lines.encode()).hexdigest(), "predictions_lines": lines.count("\n"),
            "metrics": json.loads(json.dumps(metrics, sort_keys=True, default=str)),
            "paired_outcomes_sha256": hashlib.sha256(outcomes.encode()).hexdigest(),
            "paired_outcomes": outcomes.count("sample_id")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="checkout with configs/")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--compare", type=Path, help="an earlier digest: exit 1 naming each config that differs")
    ap.add_argument("--context-length", type=int, help="the fake engine's context (tokens ~ words): longer "
                    "prompts come back over_context, so the digest covers failed samples too")
    args = ap.parse_args()
    out = {c: digest(c, args.root, args.context_length) for c in CONFIGS}
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    for c, d in out.items():
        print(f"{c}: {len(d['sample_ids'])} samples {d['status']}, {d['predictions_lines']} prediction lines "
              f"{d['predictions_sha256'][:12]}, {len(d['metrics'])} metrics, {d['paired_outcomes']} outcomes")
    if args.compare:
        old = json.loads(args.compare.read_text())
        differ = [c for c in CONFIGS if json.dumps(old.get(c), sort_keys=True) != json.dumps(out[c], sort_keys=True)]
        print("identical" if not differ else f"DIFFERENT: {', '.join(differ)}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

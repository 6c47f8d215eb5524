"""What moving and storing samples costs: the JSON path (before) against pickled records and typed shards (now).

For each demo config the samples are built and run through the worker with the fake engine (as
``benchmark_digest.py`` does, no Ray), then, per path, the best of ``--repeat`` timings of:

- crossing Ray: a group is encoded for the dataset row, decoded in the actor, encoded again for the result
  and decoded on the driver (JSON: ``json.dumps``/``loads`` twice; now: ``pickle`` twice);
- the result store: writing one shard per ``batch`` samples, ``load`` (every record) and ``finished_ids``
  (what ``plan`` and resume read), for JSON shards (no schema) and typed shards (the benchmark's schema);
- ``samples.parquet``'s table: built from the loaded records, or compacted from the typed shards.

    python perf/record_codec.py --repeat 5
    python perf/record_codec.py --repeat 3 --scale 50 --batch 32 --configs lrworld_demo prefeval_gen_demo
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_digest import CONFIGS, REPLIES  # noqa: E402


def rows_of(config: str, root: Path) -> tuple[object, list[dict], list[dict]]:
    import yaml

    from llmrec.pipelines import capabilities as caps
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.runner.worker import process_samples
    from llmrec.serving.engine import build_engine

    section = yaml.safe_load((root / "configs" / f"{config}.yaml").read_text())["benchmark"]
    bench = get_benchmark(section["name"])
    cfg = bench.config_cls.model_validate(section)
    data_dir = Path(os.environ["LLMREC_DATA_DIR"])
    engine = build_engine({"type": "fake", "default": REPLIES[bench.name]})
    engine.start()
    assets = caps.assets(bench, cfg, data_dir)
    built = bench.build_samples(cfg, data_dir)
    inputs = pickle.loads(pickle.dumps(built))
    rows = process_samples(bench, cfg, built, lambda role: engine, retries=0, backoff_s=0, assets=assets)
    return bench, inputs, rows


def best(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> int:
    from llmrec.pipelines.common.store import ResultStore
    from llmrec.pipelines.protocol import record_schema

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8, help="samples per shard (one finished batch)")
    ap.add_argument("--scale", type=int, default=1, help="copies of each sample (new ids): a bigger run")
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS))
    args = ap.parse_args()
    print(f"{'config':22} {'n':>4} | cross ms json/pickle | write ms json/typed | load ms json/typed | "
          f"finished ms json/typed | samples.parquet ms built/compacted")
    for config in args.configs:
        bench, inputs, rows = rows_of(config, args.root)
        inputs = [{**s, "sample_id": f"{s['sample_id']}#{k}"} for k in range(args.scale) for s in inputs]
        rows = [{**r, "sample_id": f"{r['sample_id']}#{k}"} for k in range(args.scale) for r in rows]
        schema = record_schema(bench)
        groups = [inputs[i:i + args.batch] for i in range(0, len(inputs), args.batch)]
        outs = [rows[i:i + args.batch] for i in range(0, len(rows), args.batch)]

        def cross_json():
            for g, o in zip(groups, outs):
                json.loads(json.dumps(g)), json.loads(json.dumps(o))

        def cross_pickle():
            for g, o in zip(groups, outs):
                pickle.loads(pickle.dumps(g, pickle.HIGHEST_PROTOCOL)), pickle.loads(pickle.dumps(o, 5))

        line = [f"{config:22} {len(rows):>4}", f"{best(cross_json, args.repeat) * 1e3:8.1f} / "
                f"{best(cross_pickle, args.repeat) * 1e3:6.1f}"]
        stores, write, load, finished = {}, [], [], []
        for kind, sch in (("json", None), ("typed", schema)):
            tmp = Path(tempfile.mkdtemp(prefix=f"llmrec-codec-{kind}-"))

            def write_all():
                shutil.rmtree(tmp / "r", ignore_errors=True)
                st = ResultStore(tmp / "r", {"config": {}}, sch)
                for o in outs:
                    st.write(o)
                stores[kind] = st

            write.append(best(write_all, args.repeat))
            load.append(best(stores[kind].load, args.repeat))
            finished.append(best(stores[kind].finished_ids, args.repeat))
        loaded = stores["json"].load()
        ids = [str(r["sample_id"]) for r in rows]
        assert stores["typed"].load() == loaded or json.dumps(stores["typed"].load(), sort_keys=True) == \
            json.dumps(loaded, sort_keys=True), f"{config}: typed shards give back other records"
        built = best(lambda: schema.table([loaded[i] for i in ids]), args.repeat)
        compacted = best(lambda: stores["typed"].compacted(ids), args.repeat)
        same = [json.dumps(t.to_pylist()) for t in (stores["typed"].compacted(ids), schema.table([loaded[i] for i in ids]))]
        assert same[0] == same[1], f"{config}: the compacted samples.parquet differs from the one built from records"
        line += [f"{write[0] * 1e3:7.1f} / {write[1] * 1e3:6.1f}", f"{load[0] * 1e3:6.1f} / {load[1] * 1e3:6.1f}",
                 f"{finished[0] * 1e3:6.1f} / {finished[1] * 1e3:6.1f}", f"{built * 1e3:6.1f} / {compacted * 1e3:6.1f}"]
        print(" | ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

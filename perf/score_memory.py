"""`llmrec score prefeval-mcq` on a long predictions file: peak memory (RSS) and time.

Writes a predictions file of ``--lines`` lines (default 300,000, about 28 MB: every topic × form × turns × method
group, raw answers in the reference's ``<choice>X</choice>`` form, a few unparsable), then runs ``llmrec score
prefeval-mcq`` on it in a child process and reports the child's peak resident memory (``ru_maxrss``) and wall time.
The target is under 1 GB at 300,000 lines (it was 9.9 GB and 105 s: the bootstrap interval resampled every line
2000 times at once and every line was held in memory).

    nice -n 10 python perf/score_memory.py [--lines N] [--task prefeval-mcq|prefeval-gen|perrecbench] [--keep DIR]

The last line printed is ``score_memory: task=T lines=N bytes=B peak_rss_mb=M seconds=S``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOPICS = ("education_learning_styles", "entertain_games", "lifestyle_beauty", "pet_ownership", "shop_fashion",
          "travel_hotel", "travel_restaurant", "shop_technology")
FORMS = ("explicit", "choice", "persona")
METHODS = ("zero-shot", "reminder", "cot")


def write_mcq(path: Path, lines: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(lines):
            gold = rng.choice("ABCD")
            pick = gold if rng.random() < 0.6 else rng.choice("ABCD")
            output = None if i % 97 == 0 else f"Considering your preference, the best fit is <choice>{pick}</choice>."
            fh.write(json.dumps({"sample_id": f"s{i:07d}", "gold": gold, "output": output,
                                 "topic": TOPICS[i % len(TOPICS)], "form": FORMS[i % 3], "turns": (0, 8, 98)[i % 3],
                                 "method": METHODS[(i // 3) % 3]}) + "\n")


def write_gen(path: Path, lines: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(lines):
            fh.write(json.dumps({"sample_id": f"s{i:07d}", "topic": TOPICS[i % len(TOPICS)], "form": FORMS[i % 3],
                                 "turns": (0, 8, 98)[i % 3], "method": METHODS[(i // 3) % 3],
                                 "acknowledge": "<answer>Yes</answer> <preference>vegan meals</preference>",
                                 "violate": f"<answer>{rng.choice(['Yes', 'No'])}</answer>",
                                 "hallucinate": "<answer>No</answer>", "helpful": "<answer>Yes</answer>"}) + "\n")


def write_perrec(path: Path, lines: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(lines):
            mode = ("point", "pair", "list")[i % 3]
            n = 5
            rel = [round(rng.uniform(-2, 2), 2) for _ in range(n)]
            pred = [round(rng.uniform(1, 5), 1) for _ in range(n)] if mode == "point" else rng.sample(range(1, n + 1), n)
            fh.write(json.dumps({"group_id": f"g{i // 3:07d}", "mode": mode, "relative_ratings": rel,
                                 "avg_ratings": [3.5] * n, "ratings": [round(3.5 + r, 2) for r in rel],
                                 "prediction": pred, "level": "easy", "item_id": f"i{i}",
                                 "user_ids": [f"u{i}-{u}" for u in range(n)]}) + "\n")


WRITERS = {"prefeval-mcq": write_mcq, "prefeval-gen": write_gen, "perrecbench": write_perrec}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=300_000)
    ap.add_argument("--task", default="prefeval-mcq", choices=tuple(WRITERS))
    ap.add_argument("--keep", type=Path, default=None, help="write the file and the metrics here (else a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmrec-score-mem-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        preds, out = folder / f"{args.task}.jsonl", folder / f"{args.task}.metrics.json"
        WRITERS[args.task](preds, args.lines)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "llmrec.cli", "score", args.task, "--predictions", str(preds),
                               "--out", str(out)], cwd=REPO, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.exit(f"score failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: KiB
        metrics = json.loads(out.read_text())
        print(f"n_lines={metrics.get('n_lines')} accuracy={metrics['metrics'].get('accuracy')} "
              f"ptc={metrics['metrics'].get('ptc')}")
        print(f"score_memory: task={args.task} lines={args.lines} bytes={preds.stat().st_size} "
              f"peak_rss_mb={peak_mb:.0f} seconds={seconds:.1f}")


if __name__ == "__main__":
    main()

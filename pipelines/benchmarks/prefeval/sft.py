"""`llmrec prefeval export-sft`: the supervised fine-tuning set of the paper (§3.7).

Source: a finished generation run with the reminder method, explicit form, 0 inter-turns (the
model's own preference-following answers). Each answer becomes one chat record per number of
inserted turns (default 0, 5, 10):

    [system] + [user: preference, assistant: live reply] + k inserted pairs + [user: question,
    assistant: the reminder-method answer]

The question is the bare question (no reminder, no word limit), so the model learns to follow
the preference unprompted. Inserted pairs are the first k pairs of the *last four* inter-turn
chats, as the reference's trainer takes them (the benchmark itself uses the chats from the
first one on). Topics split 80/20; the default held-out topics are the ones the reference's
``train_test_split(test_size=0.2, random_state=42)`` picks. ``manifest.json`` records the held-out
(``test_topics``) and training topics; ``llmrec sft`` trains on ``train.jsonl`` (chat records:
the last assistant message is the target) and logs the manifest with the run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from llmrec.errors import DataError
from llmrec.rundir import RunDir
from llmrec.pipelines.benchmarks.prefeval import data as pdata
from llmrec.pipelines.benchmarks.prefeval.config import TOPICS, PrefEvalConfig
from llmrec.pipelines.common.store import ResultStore

log = logging.getLogger(__name__)
REFERENCE_TEST_TOPICS = ("travel_transportation", "shop_technology", "education_resources", "shop_motors")


def source_rows(run_dirs: list[Path], source_turns: int = 0) -> list[dict]:
    rows = []
    for d in run_dirs:
        store = RunDir(d).results  # a local folder or a storage URI
        if not (store.local_path.is_dir() if store.local_path is not None else store.list()):
            raise DataError(f"{d}: no result store ({RunDir.RESULTS}/); give the run directory of a finished run")
        for r in ResultStore(store, writer=False).load().values():
            if (r.get("status") == "ok" and r.get("task") == "gen" and r.get("form") == "explicit"
                    and r.get("method") == "reminder" and r.get("turns") == source_turns and r.get("output")):
                rows.append(r)
    if not rows:
        raise DataError(f"no finished generation samples with form explicit, method reminder and turns {source_turns} "
                        f"in {', '.join(map(str, run_dirs))} (run e.g. configs/prefeval_sft_source.yaml first)")
    return sorted(rows, key=lambda r: r["sample_id"])


def _system_prompt(run_dir: Path) -> str | None:
    rd = RunDir(run_dir)
    if not rd.has_config():
        return PrefEvalConfig.model_fields["system_prompt"].default
    return (rd.config().get("benchmark") or {}).get("system_prompt")


def sft_inter_turns(data_dir: Path, k: int) -> list[dict]:
    msgs = [m for chat in pdata.load_inter_turn_chats(Path(data_dir))[-4:] for m in chat]
    if 2 * k > len(msgs):
        raise DataError(f"{k} inserted turns requested; the last four chats hold {len(msgs) // 2}")
    return list(msgs[: 2 * k])


def record(row: dict, inserted: list[dict], system: str | None) -> list[dict]:
    msgs = [{"role": "system", "content": system}] if system else []
    msgs += [{"role": "user", "content": row["preference"]},
             {"role": "assistant", "content": row.get("pref_reply") or ""}]
    msgs += [dict(m) for m in inserted]
    msgs += [{"role": "user", "content": row["question"]}, {"role": "assistant", "content": row["output"]}]
    return msgs


def export_sft(run_dirs: list[Path], data_dir: Path, out_dir: Path, turns: tuple[int, ...] = (0, 5, 10),
               test_topics: tuple[str, ...] = REFERENCE_TEST_TOPICS, source_turns: int = 0) -> dict[str, int]:
    bad = [t for t in test_topics if t not in TOPICS]
    if bad:
        raise DataError(f"unknown held-out topic(s) {bad}; allowed: {', '.join(TOPICS)}")
    rows = source_rows(run_dirs, source_turns)
    system = _system_prompt(run_dirs[0])
    inserted = {k: sft_inter_turns(data_dir, k) for k in turns}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {"train": 0, "test": 0}
    with open(out_dir / "train.jsonl", "w") as train, open(out_dir / "test.jsonl", "w") as test:
        for r in rows:
            split = "test" if r["topic"] in test_topics else "train"
            for k in turns:
                line = {"messages": record(r, inserted[k], system), "topic": r["topic"], "task_id": r["task_id"],
                        "inserted_turns": k, "split": split, "source_sample_id": r["sample_id"]}
                (test if split == "test" else train).write(json.dumps(line) + "\n")
                counts[split] += 1
    topics = sorted({r["topic"] for r in rows})
    manifest = {"test_topics": sorted(test_topics), "train_topics": [t for t in topics if t not in test_topics],
                "turns": list(turns), "counts": counts, "source_runs": [str(d) for d in run_dirs]}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    log.info("export-sft: %d train and %d test records in %s", counts["train"], counts["test"], out_dir)
    return counts

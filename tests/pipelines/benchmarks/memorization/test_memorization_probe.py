"""The probe without Ray: catalogues and popularity from the shared files, the prompt in the file's own line format,
and the fake engine through the runner's per-sample worker: a subject that knows half of the items has coverage
0.5; one that knows only the most popular ones has all its coverage in the top bucket."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmrec.errors import ConfigError
from llmrec.pipelines.benchmarks.memorization import BENCHMARK, catalogues
from llmrec.pipelines.benchmarks.memorization.config import MemorizationConfig
from llmrec.pipelines.protocol import protocol_record
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engines.fake import FakeEngine, FakeEngineConfig
from tests.conftest import require_data


@pytest.fixture
def data_dir() -> Path:
    return require_data("ml-100k", "u.item").parent.parent


class Recording(FakeEngine):
    def __init__(self, config):
        super().__init__(config)
        self.requests = []

    def generate(self, requests):
        self.requests += requests
        return super().generate(requests)


def _run(cfg: MemorizationConfig, rows: list[dict], knows: list[dict]) -> tuple[list[dict], Recording]:
    """The fake engine replies with the gold line to the keys in ``knows`` and 'Unknown' to the others (a rule per
    key, longest key first: a rule matches a substring, and '1|' is in '21|')."""
    known = {r["key"] for r in knows}
    ask = "{k}{sep}" if cfg.probe == "user" else "Input: {k}{sep}"
    rules = [{"contains": ask.format(k=r["key"], sep=r["sep"]),
              "reply": (r["gold"] if cfg.probe == "user" else f"{r['key']}{r['sep']}{r['gold']}")
              if r["key"] in known else "Unknown"} for r in sorted(rows, key=lambda r: -len(r["key"]))]
    engine = Recording(FakeEngineConfig(type="fake", default="Unknown", rules=rules))
    engine.start()
    return process_samples(BENCHMARK, cfg, rows, lambda _: engine, retries=0, backoff_s=0, assets=None), engine


def test_ml100k_items_prompt_in_the_files_line_format(data_dir):
    cfg = MemorizationConfig(items=40, seed=0)
    rows = BENCHMARK.build_samples(cfg, data_dir)
    assert len(rows) == 40 and len({r["key"] for r in rows}) == 40
    assert [int(r["key"]) for r in rows] == sorted(int(r["key"]) for r in rows)  # file order
    assert rows == BENCHMARK.build_samples(cfg, data_dir)  # seeded
    out, engine = _run(cfg, rows[:1], [])
    msgs = engine.requests[0].messages
    assert "MovieLens 100K dataset" in msgs[0].content
    assert [m.content for m in msgs[1:3]] == ["Input: 1|", "1|Toy Story (1995)"]
    assert msgs[-1].content == f"Input: {rows[0]['key']}|" and len(msgs) == 1 + 2 * 3 + 1
    assert engine.requests[0].sampling.temperature == 0.0 and engine.requests[0].sampling.stop == []
    stop = MemorizationConfig(items=40, seed=0, stop=["\n"])
    _, stopped = _run(stop, BENCHMARK.build_samples(stop, data_dir)[:1], [])
    assert stopped.requests[0].sampling.stop == ["\n"]
    assert "_shots" not in out[0] and out[0]["shot_ids"] == ["1", "2", "3"]


def test_popularity_is_unique_raters_from_u_data_and_ml1m_has_none(data_dir):
    cat = catalogues.load("ml-100k", data_dir / "ml-100k")
    assert len(cat.items) == 1682 and cat.popularity["50"] == 583  # Star Wars: the most rated ML-100K item
    ranks = catalogues.popularity_ranks(cat.popularity, list(cat.items["key"]))
    assert ranks["50"] == 1 and catalogues.bucket_edges(len(ranks), [0.2, 0.8]) == [337, 1682]
    if (data_dir / "ml-1m" / "movies.dat").is_file():
        ml1m = catalogues.load("ml-1m", data_dir / "ml-1m")
        assert ml1m.sep == "::" and ml1m.items.iloc[0].tolist() == ["1", "Toy Story (1995)",
                                                                       "Animation|Children's|Comedy"]
        if not (data_dir / "ml-1m" / "ratings.dat").is_file():
            rows = BENCHMARK.build_samples(MemorizationConfig(catalogue="ml-1m", items=5), data_dir)
            assert all(r["pop_bucket"] is None for r in rows)
            assert not any(k.startswith("pop/") for k in BENCHMARK.aggregate(
                MemorizationConfig(catalogue="ml-1m"), [dict(r, correct=False, exact=False, normalised=False,
                                                             similarity=0.0) for r in rows], None))


def test_a_subject_that_knows_half_the_items_has_coverage_one_half(data_dir):
    cfg = MemorizationConfig(items=40, seed=1)
    rows = BENCHMARK.build_samples(cfg, data_dir)
    out, engine = _run(cfg, rows, rows[::2])
    assert len(engine.requests) == 40 and all(r["status"] == "ok" for r in out)
    m = BENCHMARK.aggregate(cfg, out, None)
    assert m["coverage"] == 0.5 and m["coverage_exact"] == 0.5 and m["coverage_normalised"] == 0.5
    assert m["coverage_ci_low"] < 0.5 < m["coverage_ci_high"] and m["coverage_ci_clusters"] == 40
    assert {o.metric for o in BENCHMARK.paired_outcomes(cfg, out, None)} == {"coverage", "coverage_exact",
                                                                            "coverage_normalised"}
    known = next(r for r in out if r["correct"])
    assert BENCHMARK.explain(known).verdict == "right" and known["answer"] == known["gold"]
    assert BENCHMARK.explain(next(r for r in out if not r["correct"])).verdict == "wrong"


def test_a_subject_that_knows_the_popular_items_shows_it_per_bucket(data_dir):
    cfg = MemorizationConfig(items=60, seed=2)
    rows = BENCHMARK.build_samples(cfg, data_dir)
    out, _ = _run(cfg, rows, [r for r in rows if r["pop_bucket"] == "top0-20"])
    m = BENCHMARK.aggregate(cfg, out, None)
    assert m["pop/top0-20/coverage"] == 1.0 and m["pop/top20-100/coverage"] == 0.0
    assert m["pop/top0-20/n"] + m["pop/top20-100/n"] == 60


def test_failed_calls_are_counted_not_scored_as_misses(data_dir):
    cfg = MemorizationConfig(items=4)
    rows = BENCHMARK.build_samples(cfg, data_dir)
    out = [dict(r, status="failed", error="boom") for r in rows[:1]]
    for r in rows[1:]:
        out.append({**r, "output": f"{r['key']}|{r['gold']}", **BENCHMARK.score(cfg, {**r, "output": r["gold"]})})
    m = BENCHMARK.aggregate(cfg, out, None)
    assert m["failed"] == 1 and m["n_answered"] == 3 and m["coverage"] == 1.0


def test_protocol_records_every_option_that_changes_what_is_measured():
    rec = protocol_record(BENCHMARK, MemorizationConfig(items=40, answer_cut="line"))
    assert rec["answer_cut"] == "line" and rec["fuzzy_threshold"] is None and rec["popularity_buckets"] == [0.2, 0.8]
    assert rec["probe"] == "item"
    assert rec["shots"] == 3 and rec["items"] == 40 and rec["catalogue"] == "ml-100k"


def test_bad_files_and_options_fail_naming_the_file_and_line(tmp_path):
    (tmp_path / "ml-100k").mkdir()
    with pytest.raises(ConfigError, match=r"ML-100K u\.item not found at .*ml-100k/u\.item"):
        BENCHMARK.build_samples(MemorizationConfig(), tmp_path)
    (tmp_path / "ml-100k" / "u.item").write_text("1|Toy Story (1995)|x\nno separator here\n", encoding="latin-1")
    with pytest.raises(ConfigError, match=r"u\.item line 2: a u\.item line needs 2 fields separated by '\|'"):
        BENCHMARK.build_samples(MemorizationConfig(), tmp_path)
    with pytest.raises(ValueError, match="increasing shares"):
        MemorizationConfig(popularity_buckets=[0.8, 0.2])


def test_user_records_from_u_user_and_users_dat(data_dir):
    cfg = MemorizationConfig(probe="user", items=30, seed=3)
    rows = BENCHMARK.build_samples(cfg, data_dir)
    assert len(rows) == 30 and all(r["gold"].startswith(f"{r['key']}|") and r["gold"].count("|") == 4 for r in rows)
    out, engine = _run(cfg, rows, rows[1::2])
    msgs = engine.requests[0].messages
    assert "age, gender, occupation, zip code values" in msgs[0].content
    assert [m.content for m in msgs[1:3]] == ["1|", "1|24|M|technician|85711"]
    assert msgs[-1].content == f"{rows[0]['key']}|"
    m = BENCHMARK.aggregate(cfg, out, None)
    assert m["coverage"] == 0.5 and m["coverage_exact"] == 0.5 and not any(k.startswith("pop/") for k in m)
    if (data_dir / "ml-1m" / "users.dat").is_file():
        ml1m = BENCHMARK.build_samples(MemorizationConfig(probe="user", catalogue="ml-1m", items=3), data_dir)
        assert all(r["gold"].startswith(f"{r['key']}::") for r in ml1m) and ml1m[0]["fields"].startswith("Gender")
    with pytest.raises(ConfigError, match="probe 'user' needs user records, and catalogue 'lastfm' has none"):
        BENCHMARK.build_samples(MemorizationConfig(probe="user", catalogue="lastfm", items=2), data_dir)


class KnowsSequences(FakeEngine):
    """Replies to a user's ask with the row that follows the last row shown (the previous assistant turn) in the
    user's rows, for the users it knows; 'Unknown' otherwise."""

    def __init__(self, nxt: dict[tuple[str, str], str]):
        super().__init__(FakeEngineConfig(type="fake", default="Unknown"))
        self.nxt = nxt

    def _reply(self, request):
        last = next(m.content for m in reversed(request.messages) if m.role == "assistant")
        return self.nxt.get(tuple(last.split("\t")), "Unknown")


def test_interaction_rows_continue_a_users_sequence_in_file_order(data_dir):
    cfg = MemorizationConfig(probe="interaction", items=10, seed=0, history=4, per_user=3)
    rows = BENCHMARK.build_samples(cfg, data_dir)
    users = list(dict.fromkeys(r["key"] for r in rows))
    assert len(users) == 10 and len(rows) == 30 and [r["position"] for r in rows[:3]] == [4, 5, 6]
    seqs: dict[str, list[str]] = {}
    for line in (data_dir / "ml-100k" / "u.data").read_text().splitlines():
        u, i = line.split("\t")[:2]
        seqs.setdefault(u, []).append(i)
    first = rows[0]
    assert first["gold"] == f"{first['key']}\t{seqs[first['key']][4]}"
    shown = [x[1] for x in first["_shots"]]
    assert shown[3:] == [f"{first['key']}\t{i}" for i in seqs[first["key"]][:4]]  # 3 shots, then its 4 rows
    assert not any(x.startswith(f"{first['key']}\t") for x in shown[:3])
    known = users[::2]
    nxt = {(u, seq[p - 1]): f"{u}\t{seq[p]}" for u in known for seq in [seqs[u]] for p in range(1, len(seq))}
    engine = KnowsSequences(nxt)
    engine.start()
    out = process_samples(BENCHMARK, cfg, rows, lambda _: engine, retries=0, backoff_s=0, assets=None)
    m = BENCHMARK.aggregate(cfg, out, None)
    assert m["coverage"] == 0.5 and m["coverage_ci_clusters"] == 10  # users resampled whole
    assert m["coverage_ci_low"] < 0.5 < m["coverage_ci_high"]
    assert {o.cluster for o in BENCHMARK.paired_outcomes(cfg, out, None)} == set(users)
    if (data_dir / "ml-1m" / "movies.dat").is_file() and not (data_dir / "ml-1m" / "ratings.dat").is_file():
        with pytest.raises(ConfigError, match="probe 'interaction' needs a rating file"):
            BENCHMARK.build_samples(MemorizationConfig(probe="interaction", catalogue="ml-1m"), data_dir)


@pytest.mark.parametrize("probe", ["year", "genres"])
def test_attribute_probes_from_the_title(data_dir, probe):
    cfg = MemorizationConfig(probe=probe, items=20, seed=4)
    rows = BENCHMARK.build_samples(cfg, data_dir)
    assert len(rows) == 20 and all(r["key"].startswith(f"{r['unit']}|") for r in rows)
    if probe == "year":
        assert all(len(r["gold"]) == 4 and r["gold"] not in r["key"] for r in rows)  # the year is not shown
    else:
        assert all(r["key"].endswith(")") and r["gold"] for r in rows)  # ML-100K flags as u.genre names
    out, engine = _run(cfg, rows, rows[::2])
    assert engine.requests[0].messages[-1].content == f"Input: {rows[0]['key']}|"
    m = BENCHMARK.aggregate(cfg, out, None)
    assert m["coverage"] == 0.5 and ("pop/top0-20/n" in m or "pop/top20-100/n" in m)
    with pytest.raises(ConfigError, match=f"probe '{probe}' needs MovieLens titles"):
        BENCHMARK.build_samples(MemorizationConfig(probe=probe, catalogue="lastfm", items=2), data_dir)


def test_amazon_all_beauty_titles_by_parent_asin(data_dir):
    if not (data_dir / "amazon-all-beauty-2023" / "filterd_meta_items.csv").is_file():
        pytest.skip("amazon-all-beauty-2023/filterd_meta_items.csv not in the data directory")
    cfg = MemorizationConfig(catalogue="amazon-beauty", items=20, seed=5)
    rows = BENCHMARK.build_samples(cfg, data_dir)
    assert len(rows) == 20 and all(len(r["key"]) == 10 and r["gold"] for r in rows)  # ASINs, product titles
    assert all(r["pop_bucket"] in ("top0-20", "top20-100") for r in rows)  # every product has a review
    out, engine = _run(cfg, rows, rows[::2])
    assert engine.requests[0].messages[-1].content == f"Input: {rows[0]['key']}::"
    assert BENCHMARK.aggregate(cfg, out, None)["coverage"] == 0.5


def test_a_catalogue_csv_without_its_columns_fails_naming_them(tmp_path):
    (tmp_path / "amazon-all-beauty-2023").mkdir()
    (tmp_path / "amazon-all-beauty-2023" / "filterd_meta_items.csv").write_text("name,asin\nx,B0\n")
    with pytest.raises(ConfigError, match=r"filterd_meta_items\.csv: no column title, parent_asin \(columns: name, "
                                          r"asin\)"):
        BENCHMARK.build_samples(MemorizationConfig(catalogue="amazon-beauty"), tmp_path)

"""`llmrec view A B`: two runs' samples paired by id, filtered by what changed, and a pair's page with
both runs' calls and word diffs (Starlette's TestClient over hand-built run directories)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from llmrec.pipelines.results.viewer import app
from llmrec.pipelines.results.viewer_pairs import PairIndex, pair_path, pairs_path, word_diff
from tests.pipelines.runner.viewer_fixtures import prefeval_run, suite_of

starlette_testclient = pytest.importorskip("starlette.testclient")


def sid(i: int) -> str:
    return f"travel_restaurant/explicit/{i:04d}/t002/zero-shot"


def two_runs(root: Path) -> tuple[Path, Path]:
    """A: samples 0..9 less 9; B: 0..9 less 8, sample 0 and 6 right→wrong, 5 wrong→right, 4's question edited."""
    a = prefeval_run(root / "a", n=10, skip=(9,))
    b = prefeval_run(root / "b", n=10, skip=(8,), kinds={0: "wrong", 6: "wrong", 5: "right"},
                     edits={4: "Answer in one word."})
    return a, b


def client(pairs: PairIndex):
    return starlette_testclient.TestClient(app(pairs.viewer, pairs=pairs), base_url="http://127.0.0.1")


def soup(res) -> BeautifulSoup:
    assert res.status_code == 200, res.text[:500]
    return BeautifulSoup(res.text, "html.parser")


def listed(page: BeautifulSoup) -> list[tuple[str, str, str, str]]:
    table = page.find(id="pairs")
    return [] if table is None else [(tr.find("a", class_="sample").text, tr["data-change"], tr["data-verdict-a"],
                                      tr["data-verdict-b"]) for tr in table.tbody.find_all("tr")]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> PairIndex:
    a, b = two_runs(tmp_path_factory.mktemp("pairs"))
    return PairIndex.open(a, b)


def test_changed_lists_regressions_first_then_improvements(pairs):
    c = client(pairs)
    assert c.get("/", follow_redirects=False).headers["location"] == "/pairs"
    changed = listed(soup(c.get(pairs_path(change="changed"))))
    assert changed == [(sid(0), "right→wrong", "right", "wrong"), (sid(6), "right→wrong", "right", "wrong"),
                       (sid(5), "wrong→right", "wrong", "right")]
    assert [r[0] for r in listed(soup(c.get(pairs_path(change="wrong→right"))))] == [sid(5)]
    assert listed(soup(c.get(pairs_path(change="only in A")))) == [(sid(8), "only in A", "right", "")]
    assert listed(soup(c.get(pairs_path(change="only in B")))) == [(sid(9), "only in B", "", "wrong")]
    assert [r[0] for r in listed(soup(c.get(pairs_path(change="output or request changed"))))] == [sid(4)]
    unchanged = listed(soup(c.get(pairs_path(change="unchanged"))))
    assert [r[0] for r in unchanged] == [sid(i) for i in (1, 2, 3, 7)]
    everything = listed(soup(c.get("/pairs")))
    assert len(everything) == 10 and everything[:3] == changed  # the whole list: regressions first too
    # the existing filters and the text search still apply, per side
    assert [r[0] for r in listed(soup(c.get(pairs_path(verdict_b="wrong", change="changed"))))] == [sid(0), sid(6)]
    assert [r[0] for r in listed(soup(c.get(pairs_path(q="one word"))))] == [sid(4)]
    page = soup(c.get(pairs_path(change="changed")))
    assert page.find(id="f-change").find("option", selected=True)["value"] == "changed"


def test_a_pair_page_shows_both_verdicts_and_a_word_diff_of_output_and_request(pairs):
    c = client(pairs)
    page = soup(c.get(pair_path("0", sid(0))))
    assert page.find(id="change").text == "right→wrong"
    verdicts = {tr["data-side"]: tr.find("td", class_="verdict").text for tr in page.find(id="verdicts").tbody.find_all("tr")}
    assert verdicts == {"A": "right", "B": "wrong"}
    out = page.find(class_="output-diff").find("pre")
    assert [d.text for d in out.find_all("del")] == ["B"] and [i.text for i in out.find_all("ins")] == ["A"]
    assert page.find(class_="same-request") is not None
    assert len(page.find(id="side-a").find_all(class_="call")) == 1
    assert len(page.find(id="side-b").find_all(class_="call")) == 1
    edited = soup(c.get(pair_path("0", sid(4))))
    req = edited.find(class_="request-diff").find("pre")
    assert [i.text.strip() for i in req.find_all("ins")] == ["Answer in one word."]
    assert req.find_all("del") == [] and edited.find(class_="same-output") is not None
    only = soup(c.get(pair_path("0", sid(9))))
    assert only.find(id="side-a").text.strip().endswith("This sample is not in A.")
    assert c.get(pair_path("0", "nope")).status_code == 404


def test_word_diff_joins_back_to_both_texts():
    a = "The quiet inn is best.\nIt has a garden.\nBook early."
    b = "The quiet countryside inn is best.\nBook early!\nBring boots."
    segs = word_diff(a, b)
    assert "".join(t for op, t in segs if op != "ins") == a
    assert "".join(t for op, t in segs if op != "del") == b
    assert ("ins", " countryside") in segs and ("del", "It has a garden.\n") in segs
    assert word_diff("same", "same") == [("same", "same")]


def test_two_suites_pair_their_runs_by_subject_and_entry(tmp_path):
    sa, sb = tmp_path / "sa", tmp_path / "sb"
    for root, kinds in ((sa, {}), (sb, {1: "right"})):
        runs = {(m, "prefeval-mcq"): prefeval_run(root / m, n=4, kinds=kinds if m == "m1" else {}, model=m)
                for m in ("m1", "m2")}
        suite_of(root, runs)
    pairs = PairIndex.open(sa, sb)
    assert [(a.subject, b.subject) for a, b in pairs.pairs] == [("m1", "m1"), ("m2", "m2")]
    got = pairs.query({"change": "changed"})
    assert list(zip(got["pair"], got["sample_id"], got["change"])) == [("0", sid(1), "wrong→right")]


@pytest.mark.slow
@pytest.mark.integration
def test_pair_pages_of_10k_paired_samples_stay_under_300_ms_at_p95(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from perf.viewer import measure_pairs, p95, two_runs

    got = measure_pairs(*two_runs(tmp_path, 10_000, 10), requests=20)
    every = [t for ts in got["times"].values() for t in ts]
    assert got["samples"] == 10_000  # each run holds one sample the other lacks: 10,000 ids in all
    assert p95(every) <= 0.3, {k: round(p95(v) * 1e3) for k, v in got["times"].items()}


def test_two_sources_are_compared_unless_asked_to_list_them_together(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from llmrec.cli import _mount_extra_verbs, app as cli
    from llmrec.pipelines.results import viewer

    if not any(c.name == "view" for c in cli.registered_commands):
        _mount_extra_verbs()
    served: list = []
    monkeypatch.setattr(viewer, "serve", lambda v, host, port, ready, pairs=None, annotator=None:
                        served.append((len(v.runs), pairs)))
    a, b = two_runs(tmp_path)
    assert CliRunner().invoke(cli, ["view", str(a), str(b)]).exit_code == 0
    assert CliRunner().invoke(cli, ["view", str(a), str(b), "--together"]).exit_code == 0
    assert CliRunner().invoke(cli, ["view", str(a)]).exit_code == 0
    (runs, compared), (runs_together, together), (one, single) = served
    assert isinstance(compared, PairIndex) and together is None and single is None
    assert runs_together == 2 and one == 1

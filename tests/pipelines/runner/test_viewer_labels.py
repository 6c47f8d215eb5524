"""People's labels in `llmrec view --annotate`: the writing token, same-origin POSTs only, the append-only labels
file beside the run's metrics (never changing them), CSV export / import, and the labelling queue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from llmrec.errors import DataError
from llmrec.pipelines.results.labels import Annotator, choose_queue, current, export_csv, import_csv, read_labels
from llmrec.pipelines.results.viewer import Viewer, app, sample_path
from llmrec.rundir import RunDir
from tests.pipelines.runner.viewer_fixtures import prefeval_run

starlette_testclient = pytest.importorskip("starlette.testclient")
ORIGIN = "http://127.0.0.1"


def sid(i: int) -> str:
    return f"travel_restaurant/explicit/{i:04d}/t002/zero-shot"


@pytest.fixture
def run(tmp_path) -> Path:
    return prefeval_run(tmp_path / "run", n=8)


def annotating(run: Path, who: str = "ana"):
    viewer = Viewer.open([str(run)])
    ann = Annotator.open(viewer.runs, who)
    return viewer, ann, starlette_testclient.TestClient(app(viewer, annotate=ann), base_url=ORIGIN)


def form(ann: Annotator, i: int, label: str, **extra) -> dict:
    return {"token": ann.token, "run": "0", "id": sid(i), "decision": "verdict", "unit": "", "choice": "set",
            "label": label, "comment": "", **extra}


def test_a_post_without_the_token_or_from_another_origin_is_refused_and_writes_nothing(run):
    _, ann, c = annotating(run)
    labels = run / RunDir.LABELS
    no_token = {k: v for k, v in form(ann, 0, "wrong").items() if k != "token"}
    assert c.post("/label", data=no_token, headers={"Origin": ORIGIN}).status_code == 403
    assert c.post("/label", data={**no_token, "token": "guess"}, headers={"Origin": ORIGIN}).status_code == 403
    res = c.post("/label", data=form(ann, 0, "wrong"), headers={"Origin": "http://evil.example"})
    assert res.status_code == 403
    assert c.post("/label", data=form(ann, 0, "wrong"), headers={"Origin": "http://127.0.0.1:9"}).status_code == 403
    assert c.post("/label", data=form(ann, 0, "wrong"), headers={"Referer": "http://evil.example/x"}).status_code == 403
    assert c.post("/label", data=form(ann, 0, "wrong")).status_code == 403  # neither Origin nor Referer
    assert c.post("/label", data=form(ann, 0, "wrong"), headers={"Origin": "null"}).status_code == 403
    assert not labels.exists()
    # a viewer without --annotate has no writing route at all
    plain = starlette_testclient.TestClient(app(Viewer.open([str(run)])), base_url=ORIGIN)
    assert plain.post("/label", data=form(ann, 0, "wrong"), headers={"Origin": ORIGIN}).status_code in (404, 405)
    assert not labels.exists()


def test_a_label_is_appended_shown_on_reload_and_leaves_the_metrics_alone(run):
    metrics = (run / RunDir.METRICS).read_bytes()
    _, ann, c = annotating(run, who="ana")
    res = c.post("/label", data=form(ann, 0, "wrong", comment="B is the quiet inn, but so is A"),
                 headers={"Origin": ORIGIN}, follow_redirects=False)
    assert res.status_code == 303 and res.headers["location"] == sample_path("0", sid(0)) + "#labels"
    res = c.post("/label", data=form(ann, 1, "wrong"), headers={"Referer": ORIGIN + sample_path("0", sid(1))},
                 follow_redirects=False)
    assert res.status_code == 303
    lines = [json.loads(x) for x in (run / RunDir.LABELS).read_text().splitlines()]
    assert [(x["sample_id"], x["decision"], x["label"], x["agree"], x["shown"], x["who"]) for x in lines] == [
        (sid(0), "verdict", "wrong", False, "right", "ana"), (sid(1), "verdict", "wrong", True, "wrong", "ana")]
    assert lines[0]["comment"] == "B is the quiet inn, but so is A" and lines[0]["when"].endswith("+00:00")
    assert (run / RunDir.METRICS).read_bytes() == metrics
    # a relabel appends; the latest is the current label
    c.post("/label", data=form(ann, 0, "right"), headers={"Origin": ORIGIN})
    assert len(read_labels(Viewer.open([str(run)]).runs[0])) == 3
    assert current(read_labels(Viewer.open([str(run)]).runs[0]))[(sid(0), "verdict", "")]["label"] == "right"
    # a new viewer (a reload after a restart) reads them back
    _, ann2, c2 = annotating(run)
    page = BeautifulSoup(c2.get(sample_path("0", sid(0)) + f"&token={ann2.token}").text, "html.parser")
    assert [tr["data-label"] for tr in page.select("#label-table tr.label")] == ["right"]
    assert page.select("form.label-form input[name=token]")[0]["value"] == ann2.token
    # without the token the page shows the labels but no form
    bare = BeautifulSoup(starlette_testclient.TestClient(app(Viewer.open([str(run)]), annotate=ann2),
                                                         base_url=ORIGIN).get(sample_path("0", sid(1))).text,
                         "html.parser")
    assert not bare.select("form.label-form") and [tr["data-label"] for tr in bare.select("tr.label")] == ["wrong"]


def test_a_label_the_sample_cannot_take_is_refused(run):
    _, ann, c = annotating(run)
    assert c.post("/label", data=form(ann, 0, "maybe"), headers={"Origin": ORIGIN}).status_code == 400
    assert c.post("/label", data=form(ann, 0, "true", decision="violate"), headers={"Origin": ORIGIN}
                  ).status_code == 400  # an MCQ sample has no judged decision
    assert c.post("/label", data=form(ann, 0, "right", id="nope"), headers={"Origin": ORIGIN}).status_code == 404
    assert not (run / RunDir.LABELS).exists()


def test_labels_round_trip_through_csv_and_a_bad_row_writes_nothing(run, tmp_path):
    viewer, ann, c = annotating(run)
    for i, lab in ((0, "wrong"), (1, "wrong"), (4, "right")):
        c.post("/label", data=form(ann, i, lab), headers={"Origin": ORIGIN})
    stored = viewer.runs[0]
    out = tmp_path / "labels.csv"
    assert export_csv(stored, out) == 3
    other = prefeval_run(tmp_path / "other", n=8)
    target = Viewer.open([str(other)])
    decisions = {str(r["sample_id"]): [{"decision": "verdict", "unit": "", "shown": "right",
                                        "options": ["right", "wrong"]}] for r in target.rows["0"]}
    assert import_csv(target.runs[0], out, "bo", decisions) == 3
    got = read_labels(target.runs[0])
    assert [(x["sample_id"], x["label"], x["who"]) for x in got] == [(sid(0), "wrong", "ana"), (sid(1), "wrong", "ana"),
                                                                    (sid(4), "right", "ana")]
    bad = tmp_path / "bad.csv"
    bad.write_text("sample_id,decision,label\n" + f"{sid(2)},verdict,right\n" + f"{sid(3)},verdict,perhaps\n")
    with pytest.raises(DataError, match=r"bad.csv: row 3: a sample's label is right or wrong"):
        import_csv(target.runs[0], bad, "bo", decisions)
    assert len(read_labels(target.runs[0])) == 3


def test_the_queue_takes_unlabelled_samples_with_a_verdict_a_setting_at_a_time(tmp_path):
    a = prefeval_run(tmp_path / "a", n=8)
    viewer = Viewer.open([str(a)])
    ann = Annotator.open(viewer.runs, "ana")
    ann.labels["0"] = [{"sample_id": sid(0), "decision": "verdict", "label": "right"}]
    q = choose_queue(viewer, 4, ann)
    assert len(q) == 4 and len(set(q)) == 4
    assert (("0", sid(0)) not in q) and (("0", sid(3)) not in q)  # labelled already; failed (no verdict)
    assert choose_queue(viewer, 4, ann) == q  # seeded
    c = starlette_testclient.TestClient(app(viewer, annotate=Annotator(ann.runs, "ana", ann.token, ann.labels, q)),
                                        base_url=ORIGIN)
    page = BeautifulSoup(c.get("/samples?queue=1").text, "html.parser")
    assert [a.text for a in page.select("#samples a.sample")] == [s for _, s in q]


def test_judges_human_gives_kappa_of_the_labels_and_the_accuracy_with_them(run, tmp_path):
    import typer
    from typer.testing import CliRunner

    from llmrec.pipelines.results import judges_cli
    from llmrec.pipelines.results.human_agreement import human_report

    cli = typer.Typer()
    judges_cli.register(cli)

    _, ann, c = annotating(run)
    # samples 0 right, 1 wrong, 4 right, 5 wrong, 6 right as scored; people: 0 wrong (disagree), the rest agree
    for i, lab in ((0, "wrong"), (1, "wrong"), (4, "right"), (5, "wrong"), (6, "right")):
        assert c.post("/label", data=form(ann, i, lab), headers={"Origin": ORIGIN}).status_code == 200
    report = human_report(run, resamples=500)
    (p,) = report["pairs"]
    (d,) = p["agreement"]
    assert d["decision"] == "verdict" and d["n"] == 5 and d["agreement"] == pytest.approx(0.8)
    assert d["confusion"] == [[2, 1], [0, 2]] and d["labels"] == ["right", "wrong"]  # rows: the scorer
    assert d["kappa"] == pytest.approx(0.6154, abs=1e-3)  # po 0.8, pe 0.48
    acc = next(m for m in p["human_metrics"] if m["metric"] == "accuracy")
    assert acc["n_labelled"] == 5 and acc["diff"] < 0 and acc["with_human"] == pytest.approx(acc["judge"] + acc["diff"])
    metrics = (run / RunDir.METRICS).read_text()
    res = CliRunner().invoke(cli, ["judges", str(run), "--human", "--no-tracking", "--resamples", "200",
                                   "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "judge against people" in res.output and "0.615 [" in res.output and "accuracy" in res.output
    assert (run / RunDir.METRICS).read_text() == metrics
    assert json.loads((tmp_path / "out" / "judges.json").read_text())["pairs"][0]["b"] == "human"


def test_a_jurys_verdict_and_each_juror_get_their_row_against_people(data_root, tmp_path):
    """A two-judge jury run (built in-process with fake engines, no Ray): people say no sample violates the
    preference; the lenient juror agrees everywhere, the harsh one nowhere, the jury (ties: strict) with the harsh."""
    import pyarrow.parquet as pq
    import yaml

    from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
    from llmrec.pipelines.protocol import record_schema
    from llmrec.pipelines.results.human_agreement import human_report, human_tables
    from llmrec.pipelines.runner.judges import JudgingSpec
    from llmrec.pipelines.runner.worker import process_samples
    from tests.pipelines.runner.test_judges import SUBJECT, _engines, _gen_samples, judge

    cfg, samples, assets = _gen_samples(data_root, 3)
    spec = JudgingSpec(roles=("judge", "judge2"), labels=("lenient", "harsh"), tie="strict", temperature=0.0, seed=0)
    rows = process_samples(BENCHMARK, cfg, samples, _engines(subject=SUBJECT, judge=judge("lenient", False),
                                                             judge2=judge("harsh", True)), assets=assets, judging=spec)
    run = tmp_path / "jury"
    rd = RunDir(run)
    rd.mkdir()
    rd.write_config(yaml.safe_dump({"benchmark": cfg.model_dump(mode="json"), "engine": SUBJECT,
                                    "judge": [judge("lenient", False), judge("harsh", True)],
                                    "judging": {"tie": "strict"}, "tracking": {"enabled": False}}))
    rd.write_metrics({"accuracy": 0.0})
    pq.write_table(record_schema(BENCHMARK).table(rows), run / RunDir.SAMPLES)
    viewer, ann, c = annotating(run)
    from llmrec.pipelines.results.labels import jury_disagrees

    assert all(jury_disagrees(viewer.runs[0], r) for r in viewer.rows["0"])  # what the queue takes first
    ids = [str(r["sample_id"]) for r in rows]
    page = BeautifulSoup(c.get(sample_path("0", ids[0]) + f"&token={ann.token}").text, "html.parser")
    assert {f["data-decision"] for f in page.select("form.label-form")} >= {"verdict", "violate"}
    for s in ids:
        res = c.post("/label", data={**form(ann, 0, "false"), "id": s, "decision": "violate"},
                     headers={"Origin": ORIGIN})
        assert res.status_code == 200, res.text
    report = human_report(run, data_dir=data_root, resamples=200)
    got = {p["a"]: {d["decision"]: d["agreement"] for d in p["agreement"]} for p in report["pairs"]}
    assert got == {"jury (jury)": {"violate": 0.0}, "lenient": {"violate": 1.0}, "harsh": {"violate": 0.0}}
    assert len(human_tables(report)) == 6


def test_the_cli_exports_and_imports_labels_and_refuses_a_queue_without_annotate(run, tmp_path):
    import typer
    from typer.testing import CliRunner

    from llmrec.errors import ConfigError
    from llmrec.pipelines.results import viewer_cli

    cli = typer.Typer()
    viewer_cli.register(cli)
    cli.command("noop")(lambda: None)
    csv_in = tmp_path / "in.csv"
    csv_in.write_text("who,sample_id,decision,label,comment\n" f"bo,{sid(0)},verdict,wrong,looks off\n"
                      f",{sid(1)},verdict,wrong,\n")
    res = CliRunner().invoke(cli, ["view", str(run), "--import-labels", str(csv_in), "--who", "cy"])
    assert res.exit_code == 0, res.output
    assert "appended 2 label(s)" in res.output
    assert [(x["who"], x["label"], x["agree"]) for x in read_labels(Viewer.open([str(run)]).runs[0])] == [
        ("bo", "wrong", False), ("cy", "wrong", True)]
    out = tmp_path / "out.csv"
    res = CliRunner().invoke(cli, ["view", str(run), "--export-labels", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text().splitlines()[0] == "who,when,sample_id,decision,unit,label,agree,comment,shown"
    assert len(out.read_text().splitlines()) == 3
    res = CliRunner().invoke(cli, ["view", str(run), "--export-labels", str(run / "x.csv")])
    assert isinstance(res.exception, ConfigError)  # never inside a run directory
    res = CliRunner().invoke(cli, ["view", str(run), "--queue", "5"])
    assert isinstance(res.exception, ConfigError) and "--annotate" in str(res.exception)


def test_the_report_measures_the_judge_against_the_labels(run):
    """`llmrec report` of a labelled run: the judge against people, κ per decision and the accuracy with their
    verdicts, as `llmrec judges RUN --human` gives them; an unlabelled run has no such section."""
    from bs4 import BeautifulSoup

    from llmrec.pipelines.results.html_report import render

    assert BeautifulSoup(render([run]), "html.parser").find(id="people") is None
    _, ann, c = annotating(run)
    for i, lab in ((0, "wrong"), (1, "wrong"), (4, "right"), (5, "wrong"), (6, "right")):
        assert c.post("/label", data=form(ann, i, lab), headers={"Origin": ORIGIN}).status_code == 200
    soup = BeautifulSoup(render([run]), "html.parser")
    assert soup.find(id="people") is not None and "5 labelled samples" in soup.find("h3", string=lambda t: t and
                                                                                    "against people" in t).text
    (row,) = soup.find("table", class_="human").tbody.find_all("tr")
    cells = [td.text for td in row.find_all("td")]
    assert cells[0] == "verdict" and cells[4].startswith("0.615 [")
    moves = {tr.td.text: [td.text for td in tr.find_all("td")]
             for tr in soup.find("table", class_="human-metrics").tbody.find_all("tr")}
    assert moves["accuracy"][4] == "5 / 7"  # of the 7 answered samples (one of the 8 failed)


def test_the_queue_puts_a_rejudges_disagreements_with_its_source_first(tmp_path, monkeypatch):
    """A rejudge (its config names the source run): the samples whose judged decisions differ between the two
    judges are queued before the rest (the judged decision is stood in for by the output here)."""
    from types import SimpleNamespace

    import yaml

    from llmrec.pipelines import capabilities as caps

    source = prefeval_run(tmp_path / "source", n=8)
    again = prefeval_run(tmp_path / "again", n=8, kinds={6: "wrong", 7: "right"})
    cfg = yaml.safe_load((again / RunDir.CONFIG).read_text())
    (again / RunDir.CONFIG).write_text(yaml.safe_dump({**cfg, "rejudge": {
        "source_run": str(source), "source_config_hash": "0" * 16, "stages": ["judge"]}}))
    monkeypatch.setattr(caps, "judge_decisions", lambda bench, c, row: [
        SimpleNamespace(decision="choice", unit="", label=row.get("output"))])
    viewer = Viewer.open([str(again)])
    q = choose_queue(viewer, 8, Annotator.open(viewer.runs, "ana"))
    assert {s for _, s in q[:2]} == {sid(6), sid(7)}  # the two samples the judges saw differently, first

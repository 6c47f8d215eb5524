"""`llmrec view` as a web app (Starlette's TestClient) and in the terminal, on run and suite directories with
transcripts built by hand (tests/pipelines/runner/viewer_fixtures.py); damaged and older runs; escaping."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from rich.console import Console

from llmrec.pipelines.results.viewer import PAGE_SIZE, Viewer, app, print_sample, samples_path
from llmrec.rundir import RunDir
from llmrec.transcripts import TextStore, text_key
from tests.pipelines.runner.viewer_fixtures import IMG, SCRIPT, prefeval_run, suite_of

starlette_testclient = pytest.importorskip("starlette.testclient")


def client(*sources) -> "starlette_testclient.TestClient":
    return starlette_testclient.TestClient(app(Viewer.open([str(s) for s in sources])), base_url="http://127.0.0.1")


def soup(res) -> BeautifulSoup:
    assert res.status_code == 200, res.text[:500]
    return BeautifulSoup(res.text, "html.parser")


def listed(page: BeautifulSoup) -> list[tuple[str, str]]:
    table = page.find(id="samples")
    return [] if table is None else [(tr.find("a", class_="sample").text, tr["data-verdict"])
                                     for tr in table.tbody.find_all("tr")]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return prefeval_run(tmp_path_factory.mktemp("view") / "run", n=8, turns=10)


def test_the_list_filters_by_verdict_setting_and_text(run):
    c = client(run)
    everything = listed(soup(c.get("/samples")))
    assert len(everything) == 8
    assert [v for _, v in everything] == ["right", "wrong", "missed", "failed", "right", "wrong", "right", "wrong"]
    wrong = listed(soup(c.get(samples_path(verdict="wrong"))))
    assert [s for s, _ in wrong] == [f"travel_restaurant/explicit/{i:04d}/t010/zero-shot" for i in (1, 5, 7)]
    assert {v for _, v in wrong} == {"wrong"}
    assert listed(soup(c.get(samples_path(verdict="failed"))))[0][0].endswith("0003/t010/zero-shot")
    setting = "task=mcq,form=explicit,turns=10,method=zero-shot,position=start,extra_prefs=0,conflict=False"
    assert len(listed(soup(c.get(samples_path(benchmark="prefeval", setting=setting))))) == 8
    assert listed(soup(c.get(samples_path(setting="task=gen")))) == []
    # text search: case-insensitive, over the sample's fields and the explanation's words
    assert [s for s, _ in listed(soup(c.get("/samples?q=preference%206")))] == [
        "travel_restaurant/explicit/0006/t010/zero-shot"]
    assert len(listed(soup(c.get("/samples?q=CANNOT%20decide")))) == 1
    # the filter form keeps the chosen values
    page = soup(c.get(samples_path(verdict="missed")))
    assert page.find(id="f-verdict").find("option", selected=True)["value"] == "missed"


def test_server_side_paging(tmp_path):
    c = client(prefeval_run(tmp_path / "big", n=2 * PAGE_SIZE + 7, turns=0, inject=False))
    first = soup(c.get("/samples"))
    assert len(listed(first)) == PAGE_SIZE and first.find(id="prev") is None
    assert "107 sample(s), page 1 of 3" in first.find(id="count").text
    last = soup(c.get(first.find(id="next")["href"].replace("page=2", "page=3")))
    assert len(listed(last)) == 7 and last.find(id="next") is None
    # the filters travel with the page links
    wrong = soup(c.get(samples_path(verdict="wrong")))
    assert "verdict=wrong" in wrong.find(id="next")["href"]


def test_the_sample_page_shows_every_message_the_output_and_the_verdict(run):
    c = client(run)
    page = soup(c.get("/samples?verdict=wrong"))
    href = page.find(id="samples").find("a", class_="sample")["href"]
    s = soup(c.get(href))
    assert s.find(id="sample-id").text == "travel_restaurant/explicit/0001/t010/zero-shot"
    call = s.find(class_="call")
    assert call["data-role"] == "subject" and call["data-stage"] == "answer"
    texts = [m.find("pre").text for m in call.find_all(class_="msg")]
    roles = [m.find(class_="role").text for m in call.find_all(class_="msg")]
    # 3 + 2*10 + 1 = 24 messages: the first 3 and the last 4 shown, the middle 17 folded (and present)
    assert len(texts) == 24 and roles[:3] == ["system", "user", "assistant"]
    assert texts[1] == "PREFERENCE 1: I strongly dislike crowded places."
    assert texts[-1].startswith("QUESTION 1: Where should I stay on my trip?")
    middle = call.find("details", class_="middle")
    assert "17 more messages" in middle.summary.text and len(middle.find_all(class_="msg")) == 17
    assert call.find(class_="output").find("pre").text.startswith("<choice>A</choice>")
    facts = call.find_all(class_="facts")[-1].text
    assert "finish: stop" in facts and "prompt 101, cached 64, completion 5" in facts and "latency: 0.26s" in facts
    assert '"max_tokens": 16' in call.find(class_="facts").text  # the request's sampling parameters
    assert s.find("dd", class_="verdict").text == "wrong"
    assert s.find("dd", class_="answer").text == "A. A busy downtown hotel"
    assert s.find("dd", class_="gold").text == "B. A quiet countryside inn"
    assert "chose A" in s.find("dd", class_="reason").text
    assert "correct=False" in s.find("dd", class_="numbers").text


def test_failed_samples_show_their_error(run):
    s = soup(client(run).get("/sample?" + "run=0&id=travel_restaurant/explicit/0003/t010/zero-shot"))
    assert s.find("dd", class_="verdict").text == "failed"
    assert "engine timed out" in s.find("dd", class_="reason").text
    assert "error: engine timed out" in s.find(class_="call").text


def test_every_text_is_escaped(run):
    c = client(run)
    for url in ("/samples", "/samples?q=script", "/sample?run=0&id=travel_restaurant/explicit/0001/t010/zero-shot"):
        res = c.get(url)
        assert "<script>document" not in res.text and "<img src=x" not in res.text, url
        page = soup(res)
        assert page.find("script") is None and page.find("img") is None
    res = c.get("/sample?run=0&id=travel_restaurant/explicit/0001/t010/zero-shot")
    assert "&lt;script&gt;document.title" in res.text and "&lt;img src=x onerror=" in res.text
    s = soup(res)
    assert (SCRIPT + IMG) in s.find(class_="output").find("pre").text  # shown as the text it is
    assert (SCRIPT + IMG) in s.find_all(class_="msg")[-1].find("pre").text  # in a message too


def test_missing_and_corrupt_transcript_shards_name_what_is_missing(tmp_path):
    rd = RunDir(prefeval_run(tmp_path / "r", n=4, turns=1))
    store = TextStore(rd.transcripts)
    (shard,) = store.shards()
    # a second shard with one text, then the first one corrupted: that text shows, the others are named missing
    TextStore(rd.transcripts).add({text_key("x"): "x"})
    (rd.path / "transcripts" / shard).write_bytes(b"not parquet at all")
    s = soup(client(rd.path).get("/sample?run=0&id=travel_restaurant/explicit/0000/t001/zero-shot"))
    warn = " ".join(w.text for w in s.find_all(class_="warn"))
    key = text_key("PREFERENCE 0: I strongly dislike crowded places.")
    assert "missing from" in warn and key in warn
    assert f"[text {key} is missing from the run's transcripts]" in s.find(class_="call").text
    # everything else still shows: the output, the tokens, the verdict
    assert s.find(class_="output").find("pre").text == "<choice>B</choice>"
    assert s.find("dd", class_="verdict").text == "right"
    # and with the shards gone altogether
    for name in TextStore(rd.transcripts).shards():
        (rd.path / "transcripts" / name).unlink()
    s = soup(client(rd.path).get("/sample?run=0&id=travel_restaurant/explicit/0000/t001/zero-shot"))
    assert key in " ".join(w.text for w in s.find_all(class_="warn"))


def test_a_run_written_before_transcripts_opens_with_a_plain_note(tmp_path):
    c = client(prefeval_run(tmp_path / "old", n=3, transcripts=False))
    page = soup(c.get("/samples"))
    assert "written before llmrec stored transcripts" in page.find(class_="warn").text
    s = soup(c.get("/sample?run=0&id=travel_restaurant/explicit/0001/t002/zero-shot"))
    assert "written before llmrec stored transcripts" in s.text
    assert s.find(class_="output").find("pre").text.startswith("<choice>A</choice>")
    assert s.find("dd", class_="verdict").text == "wrong"


def test_a_suite_lists_every_entry_and_filters_by_subject(tmp_path):
    a = prefeval_run(tmp_path / "a" / "prefeval_mcq", n=4, model="model-a")
    b = prefeval_run(tmp_path / "b" / "prefeval_mcq", n=6, model="model-b")
    suite = suite_of(tmp_path, {("alpha", "prefeval_mcq"): a, ("beta", "prefeval_mcq"): b})
    c = client(suite)
    assert len(listed(soup(c.get("/samples")))) == 10
    beta_wrong = listed(soup(c.get(samples_path(subject="beta", entry="prefeval_mcq", verdict="wrong"))))
    assert [s for s, _ in beta_wrong] == [f"travel_restaurant/explicit/{i:04d}/t002/zero-shot" for i in (1, 5)]
    # the report's links name a sample by subject, entry and id
    s = soup(c.get("/sample?subject=beta&entry=prefeval_mcq&id=travel_restaurant/explicit/0005/t002/zero-shot"))
    assert "beta · prefeval_mcq" in s.find(id="sample-meta").text
    res = c.get("/sample?subject=alpha&entry=prefeval_mcq&id=travel_restaurant/explicit/0005/t002/zero-shot")
    assert res.status_code == 404 and "no sample" in res.text


def test_a_benchmark_named_as_a_module_is_never_imported(tmp_path):
    rd = prefeval_run(tmp_path / "r", n=3)
    cfg = (rd / "resolved.yaml").read_text().replace("name: prefeval", "name: tests.pipelines.runner.boom:BENCH")
    (rd / "resolved.yaml").write_text(cfg)
    page = soup(client(rd).get("/samples"))
    assert "tests.pipelines.runner.boom" not in sys.modules
    assert "is not an installed benchmark" in page.find(class_="warn").text
    # the samples still list, with the default explanation (correct / missed fields)
    assert [v for _, v in listed(page)] == ["right", "wrong", "missed"]


def test_the_terminal_view_prints_the_conversation_and_the_output(run):
    out = io.StringIO()
    print_sample(Viewer.open([str(run)]), "travel_restaurant/explicit/0001/t010/zero-shot",
                 Console(file=out, width=120, color_system=None))
    text = out.getvalue()
    assert "PREFERENCE 1: I strongly dislike crowded places." in text
    assert "QUESTION 1: Where should I stay on my trip?" in text
    assert "17 messages" in text and "--full" in text  # the long middle folded
    assert SCRIPT in text  # printed as text (Rich markup is not interpreted)
    assert re.search(r"answer: A\. A busy downtown hotel", text) and "verdict: wrong" in text
    assert "prompt 101, cached 64, completion 5" in text
    full = io.StringIO()
    print_sample(Viewer.open([str(run)]), "travel_restaurant/explicit/0001/t010/zero-shot",
                 Console(file=full, width=120, color_system=None), full=True)
    assert "Unrelated question number 5 about cooking pasta." in full.getvalue()
    with pytest.raises(KeyError, match="no sample 'nope'"):
        print_sample(Viewer.open([str(run)]), "nope", Console(file=io.StringIO()))


@pytest.mark.slow
@pytest.mark.integration
def test_pages_of_a_10k_sample_run_stay_under_300_ms_at_p95(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from perf.viewer import measure, p95

    got = measure(prefeval_run(tmp_path / "big", n=10_000, turns=10), requests=20)
    every = [t for ts in got["times"].values() for t in ts]
    assert got["samples"] == 10_000
    assert p95(every) <= 0.3, {k: round(p95(v) * 1e3) for k, v in got["times"].items()}


def test_unreadable_sources_fail_in_one_line_naming_the_file(tmp_path):
    from llmrec.errors import ConfigError
    from llmrec.pipelines.results.viewer import open_viewer

    with pytest.raises(ConfigError, match="no such run or suite directory"):
        open_viewer([str(tmp_path / "nope")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="neither a run directory"):
        open_viewer([str(tmp_path / "empty")])
    rd = prefeval_run(tmp_path / "r", n=2)
    (rd / "samples.parquet").write_bytes(b"garbage")
    with pytest.raises(ConfigError, match=r"r/samples.parquet: cannot read it as parquet"):
        open_viewer([str(rd)])


def test_a_request_for_another_host_name_is_refused(run):
    """DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 sends ``Host: evil.example``; the
    viewer answers only its own address and the loopback names, and refuses a foreign Origin on anything but a
    read."""
    c = client(run)
    assert c.get("/samples", headers={"Host": "evil.example"}).status_code == 400
    assert c.get("/samples", headers={"Host": "evil.example:8765"}).status_code == 400
    for ok in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "localhost"):
        assert c.get("/samples", headers={"Host": ok}).status_code == 200, ok
    assert c.post("/samples", headers={"Origin": "http://evil.example"}).status_code == 403


def test_host_check_follows_the_bound_address():
    from llmrec.pipelines.results.viewer import host_allowed

    assert host_allowed("10.1.2.3:80", "10.1.2.3") and not host_allowed("10.9.9.9", "10.1.2.3")
    assert host_allowed("10.9.9.9:80", "0.0.0.0") and not host_allowed("evil.example", "0.0.0.0")
    assert not host_allowed("", "127.0.0.1") and not host_allowed("127.0.0.1.evil.example", "127.0.0.1")


def test_a_sample_asked_for_in_a_run_without_samples_parquet_says_the_file_is_missing(run, tmp_path):
    """samples.parquet deleted, its result shards intact: ``view --sample ID`` says the file is missing beside the
    shards and how to write it again, not only "no sample"."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / RunDir.SAMPLES).unlink()
    from llmrec.pipelines.common.store import ResultStore

    ResultStore(copy / RunDir.RESULTS).write([{"sample_id": "travel_restaurant/explicit/0001/t010/zero-shot"}])
    v = Viewer.open([str(copy)])
    with pytest.raises(KeyError) as e:
        v.find("travel_restaurant/explicit/0001/t010/zero-shot")
    said = str(e.value.args[0])
    assert f"has no {RunDir.SAMPLES} although results/ holds" in said and "llmrec run" in said, said
    with pytest.raises(KeyError) as e:
        Viewer.open([str(run)]).find("nope")
    assert "has no" not in str(e.value.args[0])

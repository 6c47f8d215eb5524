"""`llmrec view` over run and suite directories at a storage URI (a real S3 API: a moto server on 127.0.0.1): the
rows and each call's texts are read through RunDir / TextStore, nothing copied to a local folder first."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup
from starlette.testclient import TestClient

from llmrec.pipelines.results.viewer import Viewer, app
from tests.pipelines.runner.test_results_on_s3 import _upload
from tests.pipelines.runner.viewer_fixtures import prefeval_run, suite_of
from tests.runtime.helpers import s3_server

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_a_suite_on_s3_lists_and_opens_its_samples(tmp_path):
    with s3_server() as bucket:
        local = tmp_path / "suite"
        a = prefeval_run(local / "alpha" / "prefeval_mcq", n=4, turns=10)
        suite_of(local, {("alpha", "prefeval_mcq"): a})
        index = json.loads((local / "suite.json").read_text())
        for e in index["entries"]:  # as a suite run with output.dir=s3://… records them
            e["run_dir"] = f"s3://{bucket}/suites/s/{e['subject']}/{e['entry']}"
        (local / "suite.json").write_text(json.dumps(index))
        uri = _upload(local, bucket, "suites/s")
        run_uri = _upload(prefeval_run(tmp_path / "plain", n=3), bucket, "runs/plain")

        c = TestClient(app(Viewer.open([uri, run_uri])), base_url="http://127.0.0.1")
        page = BeautifulSoup(c.get("/samples?verdict=wrong").text, "html.parser")
        assert [tr.td.text for tr in page.find(id="samples").tbody.find_all("tr")] == \
            ["alpha · prefeval_mcq", "fake-model · prefeval"]
        s = BeautifulSoup(c.get("/sample?subject=alpha&entry=prefeval_mcq&id=travel_restaurant/explicit/0001/"
                                "t010/zero-shot").text, "html.parser")
        msgs = [m.find("pre").text for m in s.find_all(class_="msg")]
        assert len(msgs) == 24 and msgs[1] == "PREFERENCE 1: I strongly dislike crowded places."
        assert not s.find_all(class_="warn")

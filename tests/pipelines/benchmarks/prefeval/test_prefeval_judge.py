"""PrefEval generation judge: prompt filling, tag parsing, error types (reference and strict),
metrics and the `prefeval-gen` score contract."""

import json
import math

import pytest

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.benchmarks.prefeval.gen_metrics import gen_metrics
from llmrec.pipelines.benchmarks.prefeval.judge import clear_answer, derive, fill_prompt, parse_tag
from llmrec.pipelines.benchmarks.prefeval.data import assets
from llmrec.pipelines.benchmarks.prefeval.stages import judge_request
from llmrec.pipelines.protocol import attach_assets
from llmrec.pipelines.runner.scoring import score_file
from tests.conftest import require_data


def raw(ack="<preference>p</preference><answer>No</answer>", viol="<answer>No</answer>",
        hall="<answer>No</answer>", helpful="<answer>Yes</answer>"):
    return {"acknowledge": ack, "violate": viol, "hallucinate": hall, "helpful": helpful}


@pytest.mark.parametrize("text,tag,expected", [
    ("<explanation>e</explanation>\n<answer>Yes</answer>", "answer", "Yes"),
    ("<ANSWER> no </ANSWER>", "answer", "no"),  # html.parser lower-cases tag names
    ("<answer><b>Yes</b> mostly</answer>", "answer", "Yes mostly"),  # .text keeps nested text
    ("<answer>Yes", "answer", "Yes"),  # unclosed
    ("Answer: Yes", "answer", ""),  # no tag → ""
    ("", "answer", ""),
    (None, "answer", ""),
    ("<preference>I love spicy food</preference><answer>Yes</answer>", "preference", "I love spicy food"),
])
def test_parse_tag(text, tag, expected):
    assert parse_tag(text, tag) == expected


@pytest.mark.parametrize("answer,expected", [
    ("Yes", True), ("no.", False), ("[No]", False), ("Yes, it does", True), ("Yes/No", None),
    ("", None), ("Not sure", None), ("Maybe", None), ("yes yes", True), ("No - yes", None),
])
def test_clear_answer(answer, expected):
    assert clear_answer(answer) is expected


def test_error_types_follow_table_1():
    ack = "<preference>p</preference><answer>Yes</answer>"
    y, n = "<answer>Yes</answer>", "<answer>No</answer>"
    assert derive(raw(viol=y))["unaware_violation"] and not derive(raw(viol=y))["correct"]
    hv = derive(raw(ack=ack, viol=y, hall=y))
    assert hv["hallucinated_violation"] and not hv["inconsistent_violation"]
    iv = derive(raw(ack=ack, viol=y, hall=n))
    assert iv["inconsistent_violation"] and not iv["hallucinated_violation"] and not iv["correct"]
    un = derive(raw(viol=y, helpful=n))
    assert un["unhelpful"] and not un["unaware_violation"] and not un["correct"]
    ok = derive(raw(ack=ack, hall=y))  # hallucination without violation is not an error
    assert ok["correct"] and ok["hallucinated"] and not any(ok[e] for e in ("unaware_violation", "unhelpful"))
    # hallucinate only counts when acknowledged
    assert not derive(raw(hall=y))["hallucinated"]


def test_reference_substring_quirks_and_strict_mode():
    # the reference reads "no" in "I know" as unhelpful; strict reads the clear "Yes"
    know = raw(helpful="<answer>Yes, I know</answer>")
    assert derive(know)["unhelpful"] and not derive(know)["correct"]
    assert derive(know, "strict")["correct"] and not derive(know, "strict")["judge_failed"]
    # empty / untagged judge outputs pass in the reference, fail in strict
    empty = {"acknowledge": "", "violate": "The response violates it.", "hallucinate": "", "helpful": None}
    ref = derive(empty)
    assert ref["correct"] and ref["judge_failed"]
    strict = derive(empty, "strict")
    assert strict["judge_failed"] and strict["correct"] is None
    # an echoed "Yes/No" template counts as yes in the reference, ambiguous in strict
    echo = raw(ack="<answer>Yes/No</answer>")
    assert derive(echo)["acknowledged"] and derive(echo, "strict")["judge_failed"]
    # hallucinate is not read when not acknowledged: its garbage does not fail the sample
    assert not derive(raw(hall="garbage"), "strict")["judge_failed"]
    assert derive(raw(ack="<answer>Yes</answer>", hall="garbage"), "strict")["judge_failed"]
    assert derive(raw(ack="<preference>vegan</preference><answer>Yes</answer>"))["extracted_preference"] == "vegan"


def test_fill_prompt_is_plain_replacement_in_reference_order():
    t = "Q: {question}\nR: {end_generation}"
    # acknowledge replaces {end_generation} first, so a response quoting "{question}" gets it filled
    assert fill_prompt("acknowledge", t, question="Where?", end_generation="see {question}") == "Q: Where?\nR: see Where?"
    assert fill_prompt("violate", "{preference}|{question}", preference="{question}", question="Q") == "Q|Q"
    assert fill_prompt("hallucinate", '"{preference}" "{assistant_restatement}"', preference="p",
                       assistant_restatement="") == '"p" ""'


def test_judge_requests_read_reference_prompts(tmp_path):
    data = require_data("prefeval", "error_type", "check_acknowledge.txt").parents[2]
    cfg = PrefEvalConfig(task="gen")
    s = {"question": "Any hotel in Vegas?", "preference": "No nightlife.",
         "output": "Try the Bellagio.", "judge_acknowledge": "<preference>quiet places</preference><answer>Yes</answer>"}
    attach_assets([s], assets(cfg, data))
    ack = judge_request(cfg, s, "acknowledge")
    assert ack.messages[0].role == "system" and ack.sampling.max_tokens == 100 and ack.sampling.temperature == 0
    text = ack.messages[1].content
    original = (data / "prefeval/error_type/check_acknowledge.txt").read_text()
    assert text == original.replace("{end_generation}", "Try the Bellagio.").replace("{question}", "Any hotel in Vegas?")
    hall = judge_request(cfg, s, "hallucinate").messages[1].content
    assert 'Original user preference: "No nightlife."' in hall and "Assistant's restatement: \"quiet places\"" in hall
    viol = judge_request(cfg, s, "violate").messages[1].content
    assert "User's preference: No nightlife." in viol and "Assistant response: Try the Bellagio." in viol
    custom = tmp_path / "v.txt"
    custom.write_text("{preference} // {end_generation}")
    cfg2 = PrefEvalConfig(task="gen", templates={"judge_violate": str(custom)})
    attach_assets([s], assets(cfg2, data))
    assert judge_request(cfg2, s, "violate").messages[1].content == "No nightlife. // Try the Bellagio."


def _rows(mode):
    y, n = "<answer>Yes</answer>", "<answer>No</answer>"
    raws = [(raw(), "zero-shot", 2), (raw(viol=y), "zero-shot", 2), (raw(helpful=n), "reminder", 2),
            ({"acknowledge": "", "violate": "", "hallucinate": "", "helpful": ""}, "reminder", 10)]
    return [{"status": "ok", "topic": "t", "form": "explicit", "method": m, "turns": t, **derive(r, mode)}
            for r, m, t in raws] + [{"status": "over_context", "method": "zero-shot", "turns": 298}]


def test_gen_metrics_reference_and_strict():
    m = gen_metrics(_rows("reference"), "reference")
    assert m["accuracy"] == 0.5 and m["unaware_violation"] == 0.25 and m["unhelpful"] == 0.25
    assert m["judge_failed"] == 1 and m["judge_failure_rate"] == 0.25 and m["over_context"] == 1
    assert m["accuracy.method.zero-shot"] == 0.5 and m["accuracy.turns.10"] == 1.0
    assert m["unhelpful.method.reminder"] == 0.5 and m["accuracy.cell.explicit.reminder.2"] == 0.0
    s = gen_metrics(_rows("strict"), "strict")
    assert s["n_scored"] == 3 and s["accuracy"] == pytest.approx(1 / 3) and s["judge_failed"] == 1
    assert math.isnan(gen_metrics([], "reference")["accuracy"])


def test_score_contract(tmp_path):
    cases = [(raw(), "zero-shot", 2), (raw(viol="<answer>Yes</answer>"), "zero-shot", 2),
             (raw(helpful="<answer>No</answer>"), "reminder", 2), (dict(raw(), acknowledge=None, helpful=""), "reminder", 10)]
    lines = [{"sample_id": str(i), **r, "method": m, "turns": t} for i, (r, m, t) in enumerate(cases)]
    p = tmp_path / "p.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = score_file("prefeval-gen", p)
    m = out["metrics"]
    for k in ("accuracy", "unaware_violation", "hallucinated_violation", "inconsistent_violation", "unhelpful"):
        assert 0.0 <= m[k] <= 1.0
    assert m["accuracy"] == 0.5 and m["unaware_violation"] == 0.25 and m["unhelpful"] == 0.25
    assert m["judge_failed"] == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"sample_id": "1", "acknowledge": "", "violate": ""}) + "\n")
    with pytest.raises(DataError, match="line 1 lacks"):
        score_file("prefeval-gen", bad)


def test_run_metrics_equal_score_of_predictions():
    rows = [{"sample_id": str(i), "task": "gen", "status": "ok", "method": "zero-shot", "turns": 2, "form": "explicit",
             "topic": "t", **{f"judge_{c}": v for c, v in r.items()}} for i, r in
            enumerate([raw(), raw(viol="<answer>Yes</answer>"), raw(helpful="")])]
    cfg = PrefEvalConfig(task="gen")
    for r in rows:
        r.update(BENCHMARK.score(cfg, r))
    from llmrec.pipelines.benchmarks.prefeval.gen_metrics import score_predictions

    preds = BENCHMARK.predictions(rows, None)
    assert score_predictions(preds)["accuracy"] == BENCHMARK.aggregate(cfg, rows, None)["accuracy"] == pytest.approx(2 / 3)

"""Config loading: unknown keys fail naming the key and the allowed ones; --set overrides apply."""

import pytest

from llmrec.config import apply_overrides, parse_override
from llmrec.errors import ConfigError
from llmrec.pipelines.runner.run_config import load_run_config

BASE = """
benchmark: {name: prefeval, topics: [travel_hotel], per_topic: 1}
engine: {type: fake}
"""


def write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_valid_config_and_defaults(tmp_path):
    cfg = load_run_config(write(tmp_path, BASE))
    assert cfg.benchmark.name == "prefeval" and cfg.benchmark.forms == ["explicit"]
    assert cfg.engine.type == "fake"
    assert cfg.execution.mode == "actors"


def test_unknown_top_level_key_names_allowed_keys(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_run_config(write(tmp_path, BASE + "executon: {}\n"))
    msg = str(e.value)
    assert "executon" in msg and "execution" in msg and "tracking" in msg


def test_unknown_nested_engine_key(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_run_config(write(tmp_path, BASE.replace("{type: fake}", "{type: fake, max_model_lenn: 3}")))
    assert "engine.max_model_lenn" in str(e.value)
    assert "default" in str(e.value)  # an allowed key of the fake engine is listed


def test_unknown_benchmark_key_and_bad_value(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_run_config(write(tmp_path, BASE.replace("per_topic: 1", "per_topic: 1, turnz: [2]")))
    assert "benchmark.turnz" in str(e.value) and "turns" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_run_config(write(tmp_path, BASE.replace("per_topic: 1", "turns: [400]")))
    assert "benchmark.turns" in str(e.value) and "298" in str(e.value)


def test_unknown_names_list_available(tmp_path):
    with pytest.raises(ConfigError, match="Unknown engine 'gpt'.*fake"):
        load_run_config(write(tmp_path, BASE.replace("type: fake", "type: gpt")))
    with pytest.raises(ConfigError, match="Unknown benchmark 'prefevl'.*prefeval"):
        load_run_config(write(tmp_path, BASE.replace("name: prefeval", "name: prefevl")))


def test_overrides(tmp_path):
    cfg = load_run_config(write(tmp_path, BASE), ["benchmark.turns=[2,10]", "execution.batch_size=8",
                                                  "engine.default=<choice>C</choice>"])
    assert cfg.benchmark.turns == [2, 10] and cfg.execution.batch_size == 8
    assert cfg.engine.default == "<choice>C</choice>"
    assert parse_override("a.b=3") == (["a", "b"], 3)
    assert apply_overrides({"a": {"b": 1}}, ["a.c=x"]) == {"a": {"b": 1, "c": "x"}}
    with pytest.raises(ConfigError):
        parse_override("novalue")


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_run_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="YAML"):
        load_run_config(write(tmp_path, "benchmark: [unclosed"))


def test_set_addresses_list_entries_by_index():
    data = {"benchmarks": [{"config": "a.yaml"}, {"entry": "b", "execution": {"batch_size": 2}}], "x": [1, 2]}
    assert parse_override("benchmarks[0].execution.concurrency=2") == (
        ["benchmarks", "0", "execution", "concurrency"], 2)
    for key in ("benchmarks.0.execution.concurrency", "benchmarks[0].execution.concurrency"):
        out = apply_overrides(data, [f"{key}=2"])
        assert out["benchmarks"][0] == {"config": "a.yaml", "execution": {"concurrency": 2}}
    assert apply_overrides(data, ["benchmarks.1.execution.batch_size=4"])["benchmarks"][1]["execution"] == {
        "batch_size": 4}
    assert apply_overrides(data, ["x[1]=5", "x.-2=0"])["x"] == [0, 5]
    assert data["benchmarks"][0] == {"config": "a.yaml"}  # the input is not changed
    with pytest.raises(ConfigError, match=r"'benchmarks' has 2 entries \(indexes 0 to 1\); to add one, give the "
                                          r"whole list: --set benchmarks=\["):
        apply_overrides(data, ["benchmarks.2.entry=c"])
    with pytest.raises(ConfigError, match=r"'benchmarks' is a list of 2 entries; address an entry by its index, "
                                          r"e\.g\. --set benchmarks\.0\.execution=… \(or benchmarks\[0\]\.execution"):
        apply_overrides(data, ["benchmarks.execution.concurrency=2"])
    with pytest.raises(ConfigError, match=r"'benchmarks\.0\.config' is str 'a\.yaml', not a mapping or a list"):
        apply_overrides(data, ["benchmarks.0.config.x=1"])
    with pytest.raises(ConfigError, match="--set expects key=value"):
        apply_overrides(data, ["benchmarks..x=1"])


def billion_laughs(levels: int = 9) -> str:
    """About a kilobyte of YAML whose nested aliases expand to 9**levels values."""
    out = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    out += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(out) + "\n" + BASE


@pytest.mark.parametrize("text, said", [
    ("x: &r [*r]\n" + BASE, "recursive alias"),
    ("x: &r {a: *r}\n" + BASE, "recursive alias"),
    (billion_laughs(), "billion laughs"),
])
def test_aliases_that_expand_without_end_are_refused_naming_the_file(tmp_path, text, said):
    """A recursive alias and a "billion laughs" config are refused in one error naming the file and line, in well
    under a second (not a traceback, not a load that runs until killed)."""
    import time

    start = time.monotonic()
    with pytest.raises(ConfigError, match=said) as e:
        load_run_config(write(tmp_path, text))
    assert str(tmp_path / "c.yaml") in str(e.value) and ", line " in str(e.value)
    assert time.monotonic() - start < 5
    if "*r" in text:  # the same value given with --set
        with pytest.raises(ConfigError, match="--set 'x=.*recursive alias"):
            parse_override("x=" + text.splitlines()[0].split(": ", 1)[1])


def test_shared_aliases_and_merge_keys_still_load(tmp_path):
    from llmrec.config import read_yaml

    got = read_yaml(write(tmp_path, "base: &b {batch_size: 4}\nexecution: {<<: *b, retries: 1}\nsame: [*b, *b]\n"))
    assert got["execution"] == {"batch_size": 4, "retries": 1} and got["same"] == [{"batch_size": 4}] * 2


def test_a_run_directorys_config_with_a_recursive_alias_is_a_clear_error(tmp_path):
    from llmrec.errors import DataError
    from llmrec.rundir import RunDir

    (tmp_path / RunDir.CONFIG).write_text("x: &r [*r]\n")
    with pytest.raises(DataError, match="not readable YAML.*recursive alias"):
        RunDir(tmp_path).config()

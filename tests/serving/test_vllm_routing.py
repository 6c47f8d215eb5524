"""Prefix affinity across ray.serve.llm replicas (serving/engines/vllm/routing.py), without vLLM."""

from __future__ import annotations

from types import SimpleNamespace

from llmrec.serving.engine import engine_config
from llmrec.serving.engines.vllm.routing import AffinityTable, PrefixAffinityRouter, routing_key
from llmrec.serving.engines.vllm.serve import VLLMServeClient, llm_config_kwargs
from llmrec.types import Message, Request


def test_a_request_is_keyed_by_its_user_field_else_its_first_prompt_tokens():
    ids = list(range(1000))
    assert routing_key([SimpleNamespace(user="pair/7", prompt=ids)], 256) == ("user", "pair/7")
    assert routing_key([SimpleNamespace(user=None, prompt=ids)], 256) == ("ids", tuple(range(256)))
    assert routing_key([SimpleNamespace(prompt=[ids + [5]])], 256) == routing_key([SimpleNamespace(prompt=ids)], 256)
    assert routing_key([SimpleNamespace(prompt="x" * 2000)], 256) == ("text", "x" * 1024)
    assert routing_key([SimpleNamespace(messages=[{"role": "user", "content": "hi"}])], 256) is None
    assert routing_key([], 256) is None


def test_a_prefix_group_stays_on_the_replica_that_took_it_and_new_groups_go_to_the_least_loaded():
    t = AffinityTable()
    # two new groups arrive before either is routed: they still land on different replicas
    assert t.rank("g1", ["r1", "r2"]) == [["r1"], ["r2"]]
    assert t.rank("g2", ["r1", "r2"]) == [["r2"], ["r1"]]
    t.routed("g1", "r1")
    t.routed("g2", "r2")
    t.routed("g1", "r1")  # a follower of g1: r1 now has two requests in flight
    assert t.rank("g1", ["r1", "r2"]) == [["r1"], ["r2"]]  # the owner first, however loaded
    assert t.rank("g3", ["r1", "r2"])[0] == ["r2"]  # the least loaded
    t.routed("g3", "r2")
    t.completed("r1"), t.completed("r1")
    assert t.rank("g4", ["r1", "r2"])[0] == ["r1"]
    t.routed("g1", "r2")  # Serve fell back (r1 was full): the group follows its prefix to r2
    assert t.rank("g1", ["r1", "r2"])[0] == ["r2"]
    t.forget("r2")  # a replica died: its groups are placed again
    assert t.rank("g2", ["r1", "r3"])[0] == ["r3"] and t.owner["g2"] == "r3"
    assert t.rank(None, ["r1"]) == [["r1"], []] and None not in t.owner  # no key: load only


def test_the_table_forgets_the_least_recently_routed_keys():
    t = AffinityTable(max_keys=2)
    for k in ("a", "b", "c"):
        t.routed(k, "r1")
    assert list(t.owner) == ["b", "c"]


def test_serve_mode_deploys_the_affinity_router_and_the_client_sends_the_group_key():
    kw = llm_config_kwargs(engine_config({"type": "vllm", "model": "m", "shared_prefix_first": 128}), "m", 2, 1, 0)
    router = kw["deployment_config"]["request_router_config"]
    assert router == {"request_router_class": PrefixAffinityRouter, "request_router_kwargs": {"prefix_tokens": 128}}
    off = llm_config_kwargs(engine_config({"type": "vllm", "model": "m", "prefix_affinity": False}), "m", 2, 1, 0)
    assert off["deployment_config"] == {"num_replicas": 2}  # Serve's default router
    client = VLLMServeClient(engine_config({"type": "vllm", "model": "m", "base_url": "http://127.0.0.1:1/v1"}))
    grouped = Request(messages=[Message(role="user", content="x")], prefix_key="travel/persona/0003")
    assert client._body(grouped, [1, 2])["user"] == "travel/persona/0003"
    assert "user" not in client._body(grouped.model_copy(update={"prefix_key": None}), [1, 2])

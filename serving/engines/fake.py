"""A scripted engine for unit tests. It never counts as a feature; it exercises the real pipeline.

Replies are chosen by the first ``rules`` entry whose ``contains`` text occurs in the last
user message, else ``default``. With a ``choices`` constraint and no matching reply among
the choices, the first choice is returned. Tokens are whitespace-separated words.
"""

from __future__ import annotations

import json
import os
import time
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from llmrec.errors import ContextOverflow, EngineError
from llmrec.serving.engine import EngineBase, EngineConfig, config_identity, path_tail, register_engine
from llmrec.types import Request, Result


class FakeRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    contains: str
    reply: str


class FakeEngineConfig(EngineConfig):
    not_in_identity: ClassVar[dict[str, str]] = {
        "delay_s": "a pause before each reply, not the reply",
        "start_log": "a test's record of engine starts",
        "request_log": "a test's record of the requests received",
    }

    type: Literal["fake"] = "fake"
    model: str = Field("fake-model", description="name reported as the model")
    default: str = Field("<choice>A</choice>", description="reply when no rule matches")
    rules: list[FakeRule] = Field(default_factory=list, description="substring → reply rules")
    fail_first: int = Field(0, ge=0, description="raise EngineError on the first N calls (fault tests)")
    delay_s: float = Field(0.0, ge=0.0, description="sleep per request")
    report_pid: bool = Field(False, description="append ' pid=<process id>' to every reply (tests check which "
                                                "process answered)")
    start_log: str | None = Field(None, description="append a line to this file at every start (tests count "
                                                    "engine starts)")
    request_log: str | None = Field(None, description="append a line to this file per request received (tests "
                                                      "count the requests an engine got)")

    @property
    def label(self) -> str:
        return path_tail(self.model)


@register_engine("fake", FakeEngineConfig)
class FakeEngine(EngineBase):
    def __init__(self, config: FakeEngineConfig):
        self.config = config
        self.calls = 0

    def start(self) -> None:
        if self.config.start_log:
            with open(self.config.start_log, "a", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()}\n")

    def identity(self) -> dict:
        return config_identity(self.config)

    @property
    def context_limit(self) -> int | None:
        return self.config.context_length

    def count_tokens(self, request: Request) -> int:
        return sum(len(m.content.split()) + 2 for m in request.messages)

    def _reply(self, request: Request) -> str:
        last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        reply = next((r.reply for r in self.config.rules if r.contains in last), self.config.default)
        c = request.constraint
        if c is not None and c.choices is not None and reply not in c.choices:
            reply = c.choices[0]
        if c is not None and c.json_schema is not None:
            try:
                json.loads(reply)
            except ValueError:
                reply = "{}"
        return reply

    def generate(self, requests: list[Request]) -> list[Result]:
        out = []
        if self.config.request_log and requests:
            with open(self.config.request_log, "a", encoding="utf-8") as fh:
                fh.writelines(f"{os.getpid()} {req.request_id}\n" for req in requests)
        for req in requests:
            self.calls += 1
            if self.calls <= self.config.fail_first:
                raise EngineError(f"fake failure {self.calls}/{self.config.fail_first}")
            t0 = time.perf_counter()
            n_prompt = self.count_tokens(req)
            if self.config.context_length and n_prompt > self.config.context_length:
                out.append(Result.over_context(req, ContextOverflow(n_prompt, self.config.context_length)))
                continue
            if self.config.delay_s:
                time.sleep(self.config.delay_s)
            reply = self._reply(req) + (f" pid={os.getpid()}" if self.config.report_pid else "")
            words = reply.split(" ")
            text = " ".join(words[: req.sampling.max_tokens])
            finish = "length" if len(words) > req.sampling.max_tokens else "stop"
            out.append(Result(text=text, prompt_tokens=n_prompt, completion_tokens=min(len(words), req.sampling.max_tokens),
                              finish_reason=finish, latency_s=time.perf_counter() - t0, request_id=req.request_id))
        return out

    def check_health(self) -> bool:
        return True

    def close(self) -> None:
        pass

"""Request / Result: what every engine takes and returns (plain, picklable, JSON-able).

These types sit below both the benchmarks (which render requests and read results) and
the engines (which serve them), so neither imports the other.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from llmrec.redact import redact_text

from llmrec.errors import ContextOverflow


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


class SamplingParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(0.0, ge=0.0, description="0 = greedy")
    max_tokens: int = Field(256, ge=1, description="completion token cap")
    stop: list[str] = Field(default_factory=list, description="stop strings")
    seed: int | None = Field(0, description="sampling seed (None = engine default)")
    top_p: float = Field(1.0, gt=0.0, le=1.0)


class Constraint(BaseModel):
    """Restrict the output: a JSON schema, or exactly one of a closed set of strings."""

    model_config = ConfigDict(extra="forbid")
    json_schema: dict[str, Any] | None = None
    choices: list[str] | None = None

    @model_validator(mode="after")
    def _one(self) -> "Constraint":
        if (self.json_schema is None) == (self.choices is None):
            raise ValueError("a Constraint needs exactly one of json_schema or choices")
        if self.choices is not None and not self.choices:
            raise ValueError("choices must not be empty")
        return self


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[Message]
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    constraint: Constraint | None = None
    prefix_key: str | None = Field(None, description="requests sharing it share a prompt prefix")
    request_id: str | None = None

    def cache_payload(self) -> dict:
        """What identifies the request's answer (not its id or routing hint)."""
        return self.model_dump(mode="json", exclude={"request_id", "prefix_key"})


FinishReason = Literal["stop", "length", "error", "over_context"]


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    context_limit: int | None = Field(
        None, description="over_context only: the engine's context (prompt + completion tokens), None if not reported")
    cached_prompt_tokens: int = Field(0, description="prompt tokens served from a prefix/KV cache")
    finish_reason: FinishReason = "stop"
    latency_s: float = 0.0
    # an engine's error names where it failed: URLs in it lose their credentials (it is logged and stored)
    error: Annotated[str | None, AfterValidator(lambda e: redact_text(e) if e else e)] = None
    from_cache: bool = False
    computed_for: str | None = Field(
        None, description="from_cache only: the run (its directory) whose engine call produced this answer, when that "
                          "is another run than the one asking; '(not recorded)' for a cache entry written before the "
                          "cache recorded its runs. None: the asking run's own call")
    request_id: str | None = None
    retry_after_s: float | None = Field(
        None, exclude=True, description="error only: how long the server asked the caller to wait before it retries "
                                        "(HTTP Retry-After); a hint to the retry policy, never stored")
    prompt_text: str | None = Field(
        None, description="the prompt text the engine received after llmrec's own rendering of the messages (an "
                          "engine that renders them itself: llama.cpp, transformers, vLLM); None: the messages went "
                          "as they are. The runner stores it once per run (llmrec.transcripts), not in each record, "
                          "and the request cache does not keep it")

    @property
    def ok(self) -> bool:
        return self.finish_reason in ("stop", "length")

    @classmethod
    def over_context(cls, request: Request, overflow: ContextOverflow, error: str | None = None) -> "Result":
        """The request's prompt does not fit the engine's context (final: retrying cannot help). The
        numbers come typed from ``overflow``; ``error`` is the text to keep (default: the overflow's)."""
        return cls(finish_reason="over_context", prompt_tokens=overflow.prompt_tokens,
                   context_limit=overflow.context_limit, error=error or str(overflow), request_id=request.request_id)

    @classmethod
    def failure(cls, request: Request, error: str, retry_after_s: float | None = None) -> "Result":
        """The request failed on its own; the caller may retry it (after ``retry_after_s``, when the server said)."""
        return cls(finish_reason="error", error=error, request_id=request.request_id, retry_after_s=retry_after_s)

"""Engines for the engine-pool fault tests, referenced as ``type: "tests.serving.dying_engine:DYING"``.

DYING: its first ``generate`` raises ``EngineDead`` (as vLLM's dead EngineCore does); ``marker`` is a
file: absent = die (and create it), present = answer. BROKEN: ``start`` raises (a missing model file)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from llmrec.errors import ConfigError, EngineDead
from llmrec.serving.engine import EngineSpec
from llmrec.serving.engines.fake import FakeEngine, FakeEngineConfig


class DyingConfig(FakeEngineConfig):
    type: str = "tests.serving.dying_engine:DYING"  # type: ignore[assignment]
    marker: str = Field(description="file whose absence makes the next generate raise EngineDead")


class DyingEngine(FakeEngine):
    def generate(self, requests):
        marker = Path(self.config.marker)
        if not marker.exists():
            marker.write_text("died once")
            raise EngineDead("fake engine core died")
        return super().generate(requests)


DYING = EngineSpec("dying", DyingConfig, DyingEngine)


class BrokenEngine(FakeEngine):
    """Cannot start (as a missing model file would): the pool must fail at start, naming why."""

    def start(self) -> None:
        raise ConfigError(f"model file {self.config.marker} not found")


BROKEN = EngineSpec("broken", DyingConfig, BrokenEngine)

"""An engine whose first ``generate`` in a run raises ``EngineDead`` (as vLLM's dead EngineCore does),
for the engine-pool recovery test. ``marker``: a file; absent = die (and create it), present = answer.
Referenced as ``type: "tests.serving.dying_engine:DYING"``."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from llmrec.errors import EngineDead
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

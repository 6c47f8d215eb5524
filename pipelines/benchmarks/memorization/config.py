"""MemorizationConfig: which catalogue is probed, how many of its items, and every option that changes what is
measured (each deliberate difference from the reference code is one of them, recorded in the protocol tag)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from llmrec.pipelines.protocol import BenchmarkConfig

Catalogue = Literal["ml-100k", "ml-1m", "lastfm", "amazon-beauty"]


class MemorizationConfig(BenchmarkConfig):
    name: Literal["memorization"] = "memorization"
    probe: Literal["item", "user", "interaction", "year", "genres"] = Field(
        "item", description="item: the title from the item ID; user: the user's whole line (demographics) from the "
        "user ID (ML-100K u.user, ML-1M users.dat); interaction: a user's next rating row (user, item) after their "
        "earlier rows in file order (ML-100K u.data, ML-1M ratings.dat); year: the release year from the title without "
        "it; genres: the genres from the ID and title (MovieLens)")
    catalogue: Catalogue = Field("ml-100k", description="ml-100k (u.item, popularity from u.data), ml-1m "
                                 "(movies.dat; popularity from ratings.dat when the folder has it), lastfm "
                                 "(HetRec 2011 artists.dat, popularity from user_artists.dat), amazon-beauty (All "
                                 "Beauty product titles, popularity from the reviews)")
    path: Path | None = Field(None, description="the catalogue's folder, relative to the data directory (default: "
                              "ml-100k, ml-1m, hetrec2011-lastfm-2k, amazon-all-beauty-2023)")
    items: int | None = Field(None, ge=1, description="probe this many items (users) drawn at random (seeded), kept in "
                              "file order; absent: every one in the file, as the reference does")
    seed: int = Field(0, description="seed of the item (user) draw")
    history: int = Field(10, ge=1, description="interaction probe: the user's earlier rows shown before the asked one "
                         "(the reference keeps every earlier row of the user in the conversation)")
    per_user: int = Field(5, ge=1, description="interaction probe: rows asked per user (the rows after the first "
                          "`history`; the reference asks every row of 150 users)")
    shots: int = Field(3, ge=0, le=20, description="real lines shown before the asked ID: the first lines of the "
                       "file, skipping the asked item (reference: 3, the first three at the start)")
    fuzzy_threshold: float | None = Field(None, ge=0, le=100, description="an answer is memorized when its "
                                          "similarity to the real value (rapidfuzz fuzz.ratio, 0-100) is above this; "
                                          "absent: the reference's rule, > 80 for items, >= 90 for user lines, > 90 "
                                          "for interaction rows")
    answer_cut: Literal["none", "line"] = Field("none", description="none: the whole answer with the '<id><sep>' "
                                                "echo removed (reference); line: also keep only its first line "
                                                "and cut it at the next field separator")
    popularity_buckets: list[float] = Field(default_factory=lambda: [0.2, 0.8], min_length=1,
                                            description="cumulative shares of the popularity ranking where buckets "
                                            "end; the last bucket always ends at the least popular item "
                                            "(reference: [0.2, 0.8], which makes two buckets: top 20%, the rest)")
    temperature: float = Field(0.0, ge=0, description="sampling temperature (reference: 0 for API models)")
    max_tokens: int = Field(48, ge=1, description="answer tokens")
    stop: list[str] = Field(default_factory=list, description="stop strings, e.g. [\"\\n\"] for a model that goes on "
                            "with the next lines of the file (reference: none)")

    @field_validator("popularity_buckets")
    @classmethod
    def _shares(cls, v: list[float]) -> list[float]:
        if any(not 0 < p <= 1 for p in v) or v != sorted(v):
            raise ValueError(f"must be increasing shares in (0, 1], got {v}")
        return v

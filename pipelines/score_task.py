"""``llmrec score``'s side of a benchmark (``HasScoreTasks``): a :class:`ScoreTask` recomputes metrics from a
predictions file without a model, its options checked against a schema before the file is read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from pydantic import BaseModel, ValidationError

from llmrec.errors import ConfigError
from llmrec.pipelines.common.jsonio import PredictionLine

Sample = dict[str, Any]


def prediction_lines(line: type[PredictionLine], rows: Iterable[Sample]) -> list[dict]:
    """Rows as lines of a predictions file whose schema is ``line``: each row's value of every field the
    model declares, in the model's field order (None where the row has none). For ``HasScoreTasks.predictions``
    whose lines are the row's own fields, so the keys are written once, on the model."""
    keys = tuple(line.model_fields)
    return [{k: r.get(k) for k in keys} for r in rows]


@dataclass(frozen=True)
class ScoreTask:
    """``llmrec score NAME``: recompute metrics from a predictions file without a model.

    ``line`` is the schema every line must match (``common.jsonio.PredictionLine``: types, allowed
    values, the fields that identify a line); ``run(lines, options) -> metrics``. ``streams``: ``run``
    reads ``lines`` once, in order, so they are given as an iterator over the file (memory flat in its
    length) instead of a list. ``option_schema``: a model of the options' types and ranges (each field one of
    ``options``, with its default and description); ``llmrec score`` checks the given values against it, before
    the file is read, and hands ``run`` the checked values.
    """

    name: str
    line: type[PredictionLine]
    run: Callable[[list[dict], dict], dict[str, Any]]
    description: str = ""
    options: tuple[str, ...] = ()
    streams: bool = False
    option_schema: type[BaseModel] | None = None

    def __post_init__(self) -> None:
        extra = sorted(set(self.option_schema.model_fields) - set(self.options)) if self.option_schema else []
        if extra:
            raise ValueError(f"score task {self.name!r}: option_schema fields {extra} are not among its options "
                             f"{list(self.options)}")

    def checked_options(self, given: dict, flag: Callable[[str], str] = str) -> dict:
        """``given`` options checked against ``option_schema`` (values as typed, or as the text ``--option``
        gives): every option of the schema, the given ones converted, the others at their defaults. A wrong
        type or a value out of range is one ``ConfigError`` naming the option (as ``flag`` spells it), the
        value and what it allows. Without a schema: ``given`` unchanged."""
        if self.option_schema is None:
            return dict(given)
        try:
            return self.option_schema.model_validate(given).model_dump()
        except ValidationError as e:
            problems = []
            for err in e.errors():
                key = str(err["loc"][0]) if err["loc"] else "?"
                field = self.option_schema.model_fields.get(key)
                allowed = f" ({field.description})" if field is not None and field.description else ""
                if err["type"] == "missing":
                    problems.append(f"{flag(key)} is required{allowed}")
                else:
                    problems.append(f"{flag(key)}={given.get(key)!r}: {err['msg'].removeprefix('Value error, ')}"
                                    f"{allowed}")
            raise ConfigError(f"score task '{self.name}': " + "; ".join(problems)) from None

    def describe_options(self) -> str:
        """``confidence (…; default 0.95), seed (…)``: the options as ``llmrec list`` shows them."""
        fields = self.option_schema.model_fields if self.option_schema is not None else {}
        out = []
        for name in self.options:
            f = fields.get(name)
            default = "" if f is None or f.is_required() or f.default is None else f"; default {f.default}"
            out.append(f"{name} ({f.description}{default})" if f is not None and f.description else name)
        return ", ".join(out)


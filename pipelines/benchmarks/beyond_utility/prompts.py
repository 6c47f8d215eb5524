"""The reference's templates → prompt text.

Template files hold one paraphrase per line (5, except the one-line ``llmrank.txt`` and
``template_wohistory.txt``). ``{user_history}`` / ``{candidate_list}`` are Python ``str()`` of
the title lists and every ``"`` of the final prompt becomes ``'`` (reference notebook cell 10).
The LLMRank-style prompt shows numbered lines instead (its template says "in order"), with
the file's literal ``\\n`` read as newlines.
"""

from __future__ import annotations

from pathlib import Path

from llmrec.errors import ConfigError
from llmrec.pipelines.common.seeding import stable_rng
from llmrec.pipelines.common.templates import fill

PACKAGE_DIR = Path(__file__).resolve().parent

# prompt strategy -> reference template file
TEMPLATE_FILES = {
    "history": "template.txt",
    "candidates_first": "template_candidate_first.txt",
    "profile": "template_profile.txt",
    "profile_history": "template_profile_history.txt",
    "llmrank": "llmrank.txt",
    "in_context": "template_in_context.txt",
    "no_history": "template_wohistory.txt",
    "profile_generate": "template_user_profile_generate.txt",
}


def system_prompt() -> str:
    return (PACKAGE_DIR / "templates" / "system.txt").read_text(encoding="utf-8").strip()


def read_paraphrases(templates_dir: Path, strategy: str) -> list[str]:
    path = Path(templates_dir) / TEMPLATE_FILES[strategy]
    if not path.is_file():
        raise ConfigError(f"template file not found: {path} (benchmark.templates_dir points at the reference's "
                          "eva/templates folder, relative to the data dir)")
    lines = [line.rstrip("\n") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if strategy == "llmrank":
        lines = [line.replace("\\n", "\n") for line in lines]
    return lines


def pick_paraphrase(n: int, mode: str, index: int, seed: int, user_id: str, strategy: str) -> int:
    """The line used for this user: stable per (seed, user, strategy) or the fixed index."""
    if mode == "fixed":
        return min(index, n - 1)
    return stable_rng(seed, user_id, strategy, "paraphrase").randrange(n)


def py_list(titles: list[str]) -> str:
    return str(list(titles))


def numbered(titles: list[str]) -> str:
    return "\n".join(f"{n}. {t}" for n, t in enumerate(titles))


def render(template: str, strategy: str, *, dataset: str, user_name: str, history: list[str],
           candidates: list[str], profile: str = "") -> str:
    """Fill one paraphrase for ``strategy``; ``history`` is the shown history (oldest first)."""
    if strategy == "llmrank":
        text = fill(template, user_history=numbered(history), candidate_list=numbered(candidates))
        return text.replace('"', "'")
    values = {"dataset": dataset, "user_name": user_name, "candidate_list": py_list(candidates),
              "user_history": py_list(history), "user_profile": profile}
    if strategy == "in_context":  # the user's latest item is the demonstration answer
        values.update(last_history=py_list(history[:-1]), last_item=history[-1] if history else "")
    return fill(template, **values).replace('"', "'")


def last_paragraph(text: str) -> str:
    """Profile runs inject only the last paragraph of the generated profile (reference cells 21-22)."""
    paragraphs = [p.strip() for p in text.strip().split("\n") if p.strip()]
    return paragraphs[-1] if paragraphs else ""

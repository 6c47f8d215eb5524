"""PerRecBench prompts: user-data blocks built as the reference builds them, filled into
template files (this package's ``templates/`` or the reference's own files).

Block layout (reference ``utils.py``): a history item is ``### Item Title\\n{title}\\n``
[``### Item Author\\n{author}\\n``] ``### User[i] Rating\\n{rating}``; a user block is
``<|The Start of User[i] Data|>\\n`` [profile, most common and average rating] then each
retrieved item wrapped in newlines, then ``<|The End of User[i] Data|>\\n``. Point items are
wrapped ``\\n{}\\n``, pair items ``\\n{}\\n\\n``, list blocks number their users and end ``\\n\\n``.

Template files use named placeholders ``{users}``, ``{query}``, ``{user_a}``, ``{user_b}``,
``{history}``, replaced in one pass (a value containing a placeholder is never refilled).
The reference's positional ``str.format`` files are converted on load, applying the same
number of format passes the reference applies (two for point/list, so ``{{{{`` → ``{``).
"""

from __future__ import annotations

import re
from pathlib import Path

from llmrec.errors import DataError
from llmrec.pipelines.common.templates import load_template
from llmrec.pipelines.benchmarks.perrecbench.config import PromptConfig
from llmrec.types import Message

HERE = Path(__file__).parent
_PLACEHOLDER = re.compile(r"\{(users|query|user_a|user_b|history)\}")

# mode → (reference user template, reference system template, number of reference format passes)
_REFERENCE = {
    "point": ("templates_point/0ours/0ours{i}{cot}.txt", "templates_point/0ours/0ours{i}_sys{cot}.txt", 2),
    "list": ("templates_list/0ours/0ours{i}{cot}.txt", "templates_list/0ours/0ours{i}_sys{cot}.txt", 2),
    "pair": ("template_pair/0ours0{cot}.txt", "template_pair/0ours0_sys.txt", 1),
}
_FIELDS = {"point": ("users", "query"), "list": ("users", "query"), "pair": ("user_a", "user_b", "query")}


def fill(template: str, **values: str) -> str:
    """Replace the named placeholders in one pass; unknown braces are left alone."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


def _from_reference(text: str, fields: tuple[str, ...], passes: int) -> str:
    named = ["{" + f + "}" for f in fields]
    try:
        text = text.format(*named)
        if passes == 2:
            text = text.format(**{f: "{" + f + "}" for f in fields})
    except (IndexError, KeyError, ValueError) as e:
        raise DataError(f"reference template does not take {len(fields)} positional fields: {e}") from e
    return text


def load_templates(cfg: PromptConfig, mode: str, data_dir: Path | None) -> dict[str, str]:
    """``{"system", "user", "profile"}`` texts for ``mode``, ready for ``fill``."""
    cot = "_cot" if cfg.cot else ""
    if cfg.templates == "builtin":
        sys_name = f"{mode}_sys{cot if mode != 'pair' else ''}.txt"
        return {"system": load_template(HERE, sys_name, None),
                "user": load_template(HERE, f"{mode}{cot}.txt", None),
                "profile": load_template(HERE, "profile.txt", None)}
    root = cfg.reference_templates if cfg.reference_templates.is_absolute() else (data_dir or Path.cwd()) / \
        cfg.reference_templates
    user_rel, sys_rel, passes = _REFERENCE[mode]
    user_path = root / user_rel.format(i=cfg.template_index, cot=cot)
    sys_path = root / sys_rel.format(i=cfg.template_index, cot=cot)
    prof_path = root / "template_profile/gen_profile.txt"
    for p in (user_path, sys_path, prof_path):
        if not p.is_file():
            raise DataError(f"reference template not found: {p} (prompt.templates=reference, the default, reads "
                            f"the reference's code/ folder at prompt.reference_templates={cfg.reference_templates}; "
                            f"fetch it into the data dir, or set prompt.templates: builtin for this package's "
                            f"own wording)")
    return {"system": load_template(HERE, "", sys_path),
            "user": _from_reference(load_template(HERE, "", user_path), _FIELDS[mode], passes),
            "profile": _from_reference(load_template(HERE, "", prof_path), ("history",), 1)}


def fmt_rating(value: float) -> str:
    """A rating as the reference prints it (the JSON float: ``4.0``, ``4.5``)."""
    return str(float(value))


def encode_item(item: dict, index: int | None = None) -> str:
    """One history item: title, optional author, the user's rating (``User{index}`` in list mode)."""
    text = f"### Item Title\n{item['title']}\n"
    if item.get("author"):
        text += f"### Item Author\n{item['author']}\n"
    who = "User" if index is None else f"User{index}"
    return text + f"### {who} Rating\n{fmt_rating(item['rating'])}"


def encode_query(item: dict) -> str:
    text = f"<|The Start of Query Item Information|>\n### Item Title\n{item['title']}\n"
    if item.get("author"):
        text += f"### Item Author\n{item['author']}\n"
    return text + "<|The End of Query Item Information|>"


def _profile_lines(user: dict, profile: str | None) -> str:
    return (f"## User Profile\n{profile or ''}\n\n"
            f"## User Most Common Rating\n{user['most_common_rating']:.1f}\n\n"
            f"## User Average Rating\n{user['avg_rating']:.1f}\n")


def user_block(user: dict, profile: str | None, style: str, index: int | None = None) -> str:
    """One user's data block. ``profile`` None = the 'without profile' variant (no profile and
    no rating lines, as the reference). ``style``: point | pair | list (list needs ``index``)."""
    name = "User" if style != "list" else f"User{index}"
    text = f"<|The Start of {name} Data|>\n"
    if profile is not None:
        text += _profile_lines(user, profile)
    wrap = "\n{}\n\n" if style == "pair" else "\n{}\n"
    for item in user["retrieved"]:
        text += wrap.format(encode_item(item, index if style == "list" else None))
    text += f"<|The End of {name} Data|>\n"
    return text + ("\n" if style == "list" else "")


def point_prompt(template: str, user: dict, profile: str | None, query: dict) -> str:
    return fill(template, users=user_block(user, profile, "point"), query=encode_query(query))


def list_prompt(template: str, users: list[dict], profiles: list[str | None], query: dict) -> str:
    blocks = "".join(user_block(u, p, "list", i + 1) for i, (u, p) in enumerate(zip(users, profiles)))
    return fill(template, users=blocks, query=encode_query(query))


def pair_prompt(template: str, a: dict, b: dict, profile_a: str | None, profile_b: str | None,
                query: dict) -> str:
    return fill(template, user_a=user_block(a, profile_a, "pair"), user_b=user_block(b, profile_b, "pair"),
                query=encode_query(query))


def profile_prompt(template: str, items: list[dict]) -> str:
    """The profile generator's input: the user's most recent items before the query."""
    return fill(template, history="\n\n".join(encode_item(it) for it in items))


def with_answer(prompt: str, answer: str) -> str:
    """A few-shot demonstration: the rendered prompt, then its gold answer (reference layout)."""
    return f"{prompt}\n{answer}\n\n"


def messages(system: str, user: str, system_in_user: bool) -> list[Message]:
    """``[system, user]``; with ``system_in_user`` one user message ``system + "\\n\\n" + user``
    (the reference's handling of models without a system role)."""
    if system_in_user:
        return [Message(role="user", content=f"{system}\n\n{user}")]
    return [Message(role="system", content=system), Message(role="user", content=user)]

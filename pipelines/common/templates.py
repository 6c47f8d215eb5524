"""Prompt templates as files: packaged defaults, overridable by a path in config."""

from __future__ import annotations

import re
from pathlib import Path

from llmrec.errors import ConfigError, read_utf8


def _read(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"template file not found: {p}")
    return read_utf8(p)


def load_template(package_dir: Path, name: str, override: Path | None) -> str:
    """``override`` if given, else ``<package_dir>/templates/<name>``."""
    return _read(str(override) if override is not None else str(Path(package_dir) / "templates" / name))


def read_templates(package_dir: Path, overrides: dict[str, Path | None], suffix: str = ".txt") -> dict[str, str]:
    """``name → text`` of every named template: the override file where one is given, else
    ``<package_dir>/templates/<name><suffix>``. Meant for a benchmark's ``assets`` (read once on
    the driver): stages render from these texts and open no file, since on a cluster a path from
    the config exists only on the machine the driver runs on."""
    return {name: load_template(package_dir, f"{name}{suffix}", path) for name, path in overrides.items()}


def missing_placeholders(path: Path, required: tuple[str, ...]) -> str | None:
    """Why the template file at ``path`` cannot stand in for its default: it lacks one of the ``required``
    placeholders (``"question"`` → ``{question}``), whose text would then never reach the model; None when it is
    fit. Meant for config validation, before any work. A file that is not there is not judged here: the driver reads
    every template when it builds the run (``read_templates``, which names a missing file), and a config validated
    again on a worker, where the file need not exist (it travels in the assets), must not fail for it."""
    p = Path(path)
    if not p.is_file():
        return None
    text = read_utf8(p)
    lacking = [f"{{{name}}}" for name in required if f"{{{name}}}" not in text]
    return f"{p} lacks the placeholder(s) {', '.join(lacking)}" if lacking else None


def fill(template: str, **values: str) -> str:
    """Replace ``{key}`` placeholders in one pass (no str.format: data may contain braces,
    and a value that itself contains ``{other_key}`` is left as it is)."""
    if not values:
        return template
    pattern = re.compile("|".join(re.escape("{" + k + "}") for k in values))
    return pattern.sub(lambda m: values[m.group(0)[1:-1]], template)

"""What the repository ships, read as a user would meet it: every file in ``configs/`` with the loader of its kind,
and the commands the Makefile's evaluation targets run (``make demo``, ``make demo-suite``, ...), parsed from the
Makefile (and from the shell script a target calls) so that a test runs them as written."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
# the Makefile targets that run an evaluation (each is run in a cheap form by tests/test_shipped.py)
EVAL_TARGETS = ("demo", "demo-suite", "demo-beyond-utility", "demo-lrworld", "demo-sft", "chaos")


class UnknownKind(Exception):
    """A file in configs/ that no loader reads."""


def config_kind(path: Path) -> str:
    """Which loader reads a shipped config file: decided by its top-level keys (``UnknownKind`` otherwise)."""
    from llmrec.config import read_yaml

    if path.suffix == ".json":
        raw = json.loads(path.read_text())
        if "num_hidden_layers" in raw:
            return "model-architecture"  # `llmrec plan`'s model config (engine.model_config_path)
        raise UnknownKind(f"{path}: a JSON file of no known kind (keys {sorted(raw)})")
    if path.suffix not in (".yaml", ".yml"):
        raise UnknownKind(f"{path}: neither YAML nor JSON")
    raw = read_yaml(path)
    if "subjects" in raw:
        return "suite"
    if "benchmark" in raw and "engine" in raw:
        return "run"
    if "base_model" in raw:
        return "sft"
    if "candidates" in raw and "models" in raw:
        return "baselines"
    if "sources" in raw:
        return "lrworld-build"
    if "model" in raw and "train" in raw:
        return "tune" if "tune" in raw else "train"
    raise UnknownKind(f"{path}: no loader reads a config with the keys {sorted(raw)}; teach "
                      "tests/shipped.py:config_kind its kind")


def load_shipped(path: Path, overrides: list[str] | None = None):
    """The validated config of a shipped file, by the loader its verb uses (relative paths: from the repository
    root, where the Makefile runs)."""
    from llmrec.config import load_config

    kind = config_kind(path)
    sets = list(overrides or [])
    if kind == "model-architecture":
        from llmrec.serving.engines.vllm.planning import ModelShape

        return ModelShape.from_config(json.loads(path.read_text()))
    if kind == "suite":
        from llmrec.pipelines.runner.suite_config import load_suite_config

        return load_suite_config(path, sets)
    if kind == "run":
        from llmrec.pipelines.runner.run_config import load_run_config

        return load_run_config(path, sets)
    if kind == "sft":
        from llmrec.tuning.sft.config import SFTConfig

        return load_config(SFTConfig, path, sets)
    if kind == "baselines":
        from llmrec.pipelines.baselines.config import BaselinesConfig

        return load_config(BaselinesConfig, path, sets)
    if kind == "lrworld-build":
        from llmrec.pipelines.benchmarks.lrworld.cli import _build_config

        return _build_config(path, sets, [], [], [])
    from llmrec.tuning.config import TrainConfig, TuneConfig

    return load_config(TuneConfig if kind == "tune" else TrainConfig, path, sets)


def shipped_configs() -> list[Path]:
    return sorted(p for p in CONFIGS.rglob("*") if p.is_file())


@dataclass(frozen=True)
class Command:
    target: str
    argv: tuple[str, ...]  # "llmrec" or "python" first
    line: str  # as written (Makefile or script)


def _joined(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1].rstrip() + " " + line.strip()
        else:
            out.append(line)
    return out


def make_recipes(makefile: Path = REPO / "Makefile") -> dict[str, list[str]]:
    """target → its recipe lines (continuations joined), from a Makefile's ``target: deps`` rules."""
    recipes: dict[str, list[str]] = {}
    current = None
    for line in _joined(makefile.read_text().splitlines()):
        if line.startswith("\t"):
            if current is not None:
                recipes[current].append(line.strip().lstrip("@"))
            continue
        m = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?![=:])", line)
        current = None
        if m and not line.startswith("."):
            names = m.group(1).split()
            current = names[0]
            recipes[current] = []
    return recipes


def _script_function(script: Path, name: str) -> list[str]:
    """The command lines of shell function ``name`` in ``script``, with ``local x=...`` and ``for x in a b; do``
    expanded (the forms tuning/sft/demo.sh uses)."""
    text = _joined(script.read_text().splitlines())
    start = next(i for i, line in enumerate(text) if re.match(rf"^{re.escape(name)}\(\)\s*{{", line))
    body: list[str] = []
    for line in text[start + 1:]:
        if line.startswith("}"):
            break
        body.append(line.strip())
    variables: dict[str, str] = {}
    out: list[str] = []
    loop: tuple[str, list[str], list[str]] | None = None

    def expand(line: str, extra: dict[str, str]) -> str:
        values = {**variables, **extra}
        return re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), m.group(0)), line)

    for line in body:
        if not line or line.startswith("#") or line.startswith("step "):
            continue
        if m := re.match(r"^local (\w+)=(\S+)$", line):
            variables[m.group(1)] = expand(m.group(2), {})
        elif m := re.match(r"^for (\w+) in ([^;]+); do$", line):
            loop = (m.group(1), m.group(2).split(), [])
        elif line == "done" and loop is not None:
            var, values, lines = loop
            out += [expand(x, {var: v}) for v in values for x in lines]
            loop = None
        elif loop is not None:
            loop[2].append(line)
        else:
            out.append(expand(line, {}))
    return out


def target_commands(target: str) -> list[Command]:
    """The llmrec / python commands a Makefile target runs, in order: its recipe lines with ``$(LLMREC)`` and
    ``$(PY)`` named as such, and, for a line that calls a shell script's function (``tuning/sft/demo.sh
    perrecbench``), that function's ``$LLMREC`` lines."""
    out: list[Command] = []
    for line in make_recipes()[target]:
        words = shlex.split(line.replace("$(LLMREC)", "llmrec").replace("$(PY)", "python"))
        while words and re.match(r"^\w+=", words[0]):  # VAR=value before the command
            words = words[1:]
        if words[:1] == ["nice"]:
            words = words[3:] if words[1:2] == ["-n"] else words[1:]
        if words and words[0].endswith(".sh"):
            for sub in _script_function(REPO / words[0], words[1]):
                argv = shlex.split(sub.replace("$LLMREC", "llmrec"))
                if argv and argv[0] == "llmrec":
                    out.append(Command(target, tuple(argv), sub))
        elif words:
            out.append(Command(target, tuple(words), line))
    return out


def options(argv: tuple[str, ...], name: str) -> list[str]:
    """The values of a repeatable option (``--set``) in ``argv``."""
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]


def config_argument(argv: tuple[str, ...]) -> Path | None:
    """The config file a command names (the first argument under configs/)."""
    return next((REPO / a for a in argv if a.startswith("configs/")), None)

"""No verb writes over its inputs: a file a verb writes (``--out``, ``--plot``) is refused when it lies inside a run
directory (``llmrec.rundir.refuse_inside_runs``), is one of the files the verb reads, or a results file (metrics,
config, samples, suite index) inside a folder it reads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from llmrec.errors import ConfigError
from llmrec.rundir import RunDir, SuiteDir, refuse_inside_runs

# what a run or suite directory holds that readers read: never an output's target
RESULT_FILES = frozenset({RunDir.CONFIG, RunDir.METRICS, RunDir.SAMPLES, RunDir.PREDICTIONS, RunDir.FACTS,
                          RunDir.PROTOCOL, RunDir.MLFLOW_ID, SuiteDir.INDEX, "comparison.json"})


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def refuse_overwriting_inputs(out: Path | None, inputs: Iterable[Path | str | None], flag: str = "--out") -> None:
    """Raise a ``ConfigError`` when writing the file ``out`` would replace an input: an input file itself, or a
    results file inside an input folder. Storage URIs among the inputs are read into temporary copies: skipped."""
    if out is None:
        return
    refuse_inside_runs(out, flag)
    out = Path(out).expanduser()
    for given in inputs:
        if given is None or "://" in str(given):
            continue
        src = Path(given).expanduser()
        if src.is_dir():
            inside = out.resolve().is_relative_to(src.resolve())
            if inside and out.name in RESULT_FILES:
                raise ConfigError(f"{flag} {out}: would overwrite the results file {out.name} of the input folder "
                                  f"{src}; write the output elsewhere")
        elif _same(out, src):
            raise ConfigError(f"{flag} {out}: is the input file {src} itself; writing it would replace the input. "
                              "Write the output elsewhere")

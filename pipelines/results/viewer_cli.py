"""`llmrec view`: the samples of run and suite directories in a local web viewer, or one sample in the terminal."""

from __future__ import annotations

import sys
from typing import Optional

import typer
from rich.console import Console

console = Console(width=None if sys.stdout.isatty() else 160)


def view(
    sources: list[str] = typer.Argument(..., help="Run directories (what `llmrec run` writes) and suite directories "
                                                  "(suite.json): local folders or storage URIs (s3://…)."),
    sample: Optional[str] = typer.Option(None, "--sample", help="Print this sample's transcript in the terminal "
                                                                 "(no server), e.g. for a session over SSH."),
    run: Optional[str] = typer.Option(None, "--run", help="With --sample in a suite: the run's number in the list "
                                                          "(the viewer's run=K); default: the first run holding it."),
    full: bool = typer.Option(False, "--full", help="With --sample: every message, no folded middle."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (default: this machine only)."),
    port: int = typer.Option(0, "--port", min=0, max=65535, help="Port (default 0: a free one, printed)."),
    compare: bool = typer.Option(False, "--compare", help="Two sources A B (two runs, or two suites: their runs "
                                                          "paired by subject and entry): pair the samples by id and "
                                                          "show what changed, A and B side by side with word diffs."),
) -> None:
    """Browse every sample's transcript: messages, raw output, tokens, timing, answer, gold, verdict, reason.

    Each engine call of a sample (subject, judge, every re-ask) is shown with the messages it was sent. The list filters by benchmark, subject, entry, setting, verdict (right / wrong / missed / failed) and text,
    e.g. http://127.0.0.1:PORT/samples?benchmark=prefeval&verdict=wrong (the report's links name these paths).
    Reads the directories once; stop with Ctrl-C. E.g. `llmrec view runs/suite-demo`, or
    `llmrec view RUN_DIR --sample travel_restaurant/explicit/0000/t002/zero-shot`.
    With --compare A B: the list at /pairs shows both verdicts per sample, filtered by change (right→wrong first,
    then wrong→right), unchanged, only in A / B; a sample's page shows both runs' calls side by side with word
    diffs of the outputs and requests.
    """
    from llmrec.errors import ConfigError
    from llmrec.pipelines.results.viewer import open_viewer, print_sample, serve

    pairs = None
    if compare:
        from llmrec.pipelines.results.viewer_pairs import PairIndex

        if len(sources) != 2:
            raise ConfigError(f"--compare takes two sources (A B), got {len(sources)}")
        if sample is not None:
            raise ConfigError("--compare serves the pair pages; --sample prints one run's sample (give one source)")
        pairs = PairIndex.open(sources[0], sources[1])
        viewer = pairs.viewer
    else:
        viewer = open_viewer(list(sources))
    if sample is not None:
        try:
            print_sample(viewer, sample, console, run, full)
        except KeyError as e:
            raise ConfigError(str(e.args[0])) from None
        return
    n = len(viewer.index)

    def ready(url: str) -> None:
        if pairs is not None:
            changed = sum(pairs.counts.get(c, 0) for c in ("right→wrong", "wrong→right", "verdict changed"))
            console.print(f"llmrec view: {len(pairs.index)} paired samples ({changed} changed verdicts) of "
                          f"{len(pairs.pairs)} run pair(s) at {url}/pairs  (Ctrl-C stops)", markup=False,
                          highlight=False)
        else:
            console.print(f"llmrec view: {n} samples of {len(viewer.runs)} run(s) at {url}/samples  (Ctrl-C stops)",
                          markup=False, highlight=False)
        sys.stdout.flush()

    serve(viewer, host, port, ready, pairs)


def register(app: typer.Typer) -> None:
    app.command("view")(view)

"""`llmrec view`: the samples of run and suite directories in a local web viewer, or one sample in the terminal."""

from __future__ import annotations

import sys
from pathlib import Path
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
    annotate: bool = typer.Option(False, "--annotate", help="Let a person label samples (right / wrong, or agree "
                                                            "/ disagree with each judged decision) in the browser: "
                                                            "labels are appended to each run's labels.jsonl, never "
                                                            "to its metrics; writing needs the token in the printed "
                                                            "address."),
    who: Optional[str] = typer.Option(None, "--who", help="With --annotate or --import-labels: whose labels "
                                                          "(default: the login name)."),
    queue: int = typer.Option(0, "--queue", min=0, help="With --annotate: serve N samples chosen to be "
                                                        "informative (stratified by setting; where judges disagree "
                                                        "first: a jury's jurors, a rejudge and its source run) as "
                                                        "the list's labelling queue."),
    export_labels: Optional[Path] = typer.Option(None, "--export-labels", help="Write the run's labels as CSV to "
                                                                               "this file (no server)."),
    import_labels: Optional[Path] = typer.Option(None, "--import-labels", help="Append the labels of this CSV "
                                                                               "(columns as --export-labels writes) "
                                                                               "to the run's labels (no server)."),
    compare: Optional[bool] = typer.Option(None, "--compare/--together", help="Two sources A B (two runs, or two "
                                           "suites: their runs paired by subject and entry) are compared by "
                                           "default: samples paired by id, what changed first, A and B side by side "
                                           "with word diffs. --together lists both sources' samples in one list "
                                           "instead."),
) -> None:
    """Browse every sample's transcript: messages, raw output, tokens, timing, answer, gold, verdict, reason.

    Each engine call of a sample (subject, judge, every re-ask) is shown with the messages it was sent. The list filters by benchmark, subject, entry, setting, verdict (right / wrong / missed / failed) and text,
    e.g. http://127.0.0.1:PORT/samples?benchmark=prefeval&verdict=wrong (the report's links name these paths).
    Reads the directories once; stop with Ctrl-C. E.g. `llmrec view runs/suite-demo`, or
    `llmrec view RUN_DIR --sample travel_restaurant/explicit/0000/t002/zero-shot`.
    Two sources, `llmrec view A B`, are compared: the list at /pairs shows both verdicts per sample, filtered by
    change (right→wrong first, then wrong→right), unchanged, only in A / B; a sample's page shows both runs' calls
    side by side with word diffs of the outputs and requests (--together: one list of both instead).
    """
    from llmrec.errors import ConfigError
    from llmrec.pipelines.results.viewer import open_viewer, print_sample, serve

    if queue and not annotate:
        raise ConfigError("--queue serves samples to label: give --annotate with it")
    if export_labels is not None or import_labels is not None:
        return _labels_io(list(sources), export_labels, import_labels, who)
    pairs = None
    if compare is None:  # two sources are compared, unless a sample is asked for
        compare = len(sources) == 2 and sample is None
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
    annotator = None
    if annotate:
        import getpass

        from llmrec.pipelines.results.labels import Annotator, choose_queue

        annotator = Annotator.open(viewer.runs, who or getpass.getuser())
        if queue:
            annotator.queue = choose_queue(viewer, queue, annotator)

    def ready(url: str) -> None:
        if pairs is not None:
            changed = sum(pairs.counts.get(c, 0) for c in ("right→wrong", "wrong→right", "verdict changed"))
            console.print(f"llmrec view: {len(pairs.index)} paired samples ({changed} changed verdicts) of "
                          f"{len(pairs.pairs)} run pair(s) at {url}/pairs  (Ctrl-C stops)", markup=False,
                          highlight=False)
        else:
            console.print(f"llmrec view: {n} samples of {len(viewer.runs)} run(s) at {url}/samples  (Ctrl-C stops)",
                          markup=False, highlight=False)
        if annotator is not None:
            start = f"{url}/samples?" + ("queue=1&" if annotator.queue else "") + f"token={annotator.token}"
            console.print(f"labelling as {annotator.who}: open {start}  (the token lets this browser write "
                          f"labels; {len(annotator.queue)} samples queued)" if annotator.queue else
                          f"labelling as {annotator.who}: open {start}  (the token lets this browser write labels)",
                          markup=False, highlight=False, soft_wrap=True)
        sys.stdout.flush()

    serve(viewer, host, port, ready, pairs, annotator)


def _labels_io(sources: list[str], export: Optional[Path], source: Optional[Path], who: Optional[str]) -> None:
    """--export-labels / --import-labels of one run directory."""
    import getpass

    from llmrec.errors import ConfigError
    from llmrec.pipelines.results.labels import decisions_of, export_csv, import_csv
    from llmrec.pipelines.results.viewer import open_viewer
    from llmrec.rundir import refuse_inside_runs

    viewer = open_viewer(sources)
    if len(viewer.runs) != 1:
        raise ConfigError(f"--export-labels / --import-labels take one run directory ({len(viewer.runs)} runs given)")
    run = viewer.runs[0]
    if export is not None:
        refuse_inside_runs(export, "--export-labels")
        got = export_csv(run, export)
        console.print(f"wrote {got} label(s) of {run.dir.uri} to {export}", markup=False, highlight=False)
    if source is not None:
        decisions = {}
        for i, row in enumerate(viewer.rows[run.key]):
            ex = viewer.explained[(run.key, i)]
            decisions[str(row.get("sample_id"))] = decisions_of(run, row, ex.verdict)
        got = import_csv(run, source, who or getpass.getuser(), decisions)
        console.print(f"appended {got} label(s) from {source} to {run.dir.uri}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("view")(view)

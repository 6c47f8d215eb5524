"""How every ``llmrec`` verb ends: one handler turns errors into a printed line and an exit code.

The root command group (``ErrorsToExitCodes``) wraps every verb, the ones mounted from benchmarks
and layers included, so verbs just raise ``LlmrecError`` and never catch it themselves.
"""

from __future__ import annotations

import errno

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from llmrec.errors import (EXIT_BUDGET, EXIT_FAILED, EXIT_INCONCLUSIVE, EXIT_NOT_REPRODUCED, EXIT_REGRESSION,
                           EXIT_USAGE, LlmrecError, wrapped_llmrec_error)

EXIT_CODES_HELP = (
    f"Exit codes: 0 success; {EXIT_FAILED} the work ran and did not succeed (a run with more failed samples than "
    "execution.max_failed_share, whose results are stored and whose re-run retries them; a run or rejudge whose "
    "judge's answers could not be read for more than execution.max_judge_failed_share of the judged units; a Ray "
    "job that ended "
    "FAILED or STOPPED; an unexpected internal error, printed with its traceback); "
    f"{EXIT_USAGE} nothing was done: a usage, config or data error, printed as one 'error: ...' line; "
    f"{EXIT_BUDGET} a run reached its execution.budget (finished samples stored; a re-run with a larger budget "
    "resumes); "
    f"{EXIT_REGRESSION} a check's answer is no: `llmrec gate` found a regression (the candidate worse than the "
    "pinned baseline by more than the margin), `llmrec reproduce` found fewer re-run engine calls identical than "
    f"its --threshold; {EXIT_INCONCLUSIVE} `llmrec gate` had not enough evidence either way.")

_stderr = Console(stderr=True, soft_wrap=True, highlight=False)


def print_error(message: str) -> None:
    """``error: <message>`` on stderr, the message as plain text (never read as Rich markup)."""
    _stderr.print(Text.assemble(("error:", "bold red"), " ", message))


def exit_on_error(fn, *args):
    """``fn(*args)``, an ``LlmrecError`` printed and turned into its exit code (for work done before
    any verb runs, e.g. discovering the benchmarks, which checks each against the protocol)."""
    try:
        return fn(*args)
    except LlmrecError as e:
        print_error(str(e))
        raise SystemExit(e.exit_code) from e


# Errors of the machine, not of llmrec: a full or read-only disk, a name too long. Named with their file, one line.
ENVIRONMENT_ERRNOS = {errno.ENOSPC: "no space left on the device (free some and re-run: finished samples are kept)",
                      errno.EDQUOT: "disk quota exceeded (free some and re-run: finished samples are kept)",
                      errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
                      errno.ENAMETOOLONG: "file name too long", errno.ENOTDIR: "a path component is not a folder",
                      errno.EISDIR: "is a folder, not a file"}


class ErrorsToExitCodes(TyperGroup):
    """The root group: an ``LlmrecError`` from any verb becomes ``error: …`` and its ``exit_code``.

    A ``UnicodeDecodeError`` that escaped a reader (one that does not use ``errors.read_utf8``), an
    ``OSError`` of the machine (:data:`ENVIRONMENT_ERRNOS`: disk full, read-only, name too long) and an
    ``LlmrecError`` raised in a Ray actor or task are reported the same way rather than as a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except LlmrecError as e:
            inner = wrapped_llmrec_error(e) if type(e).__module__.startswith("ray.") else e
            print_error(str(inner or e))
            raise typer.Exit((inner or e).exit_code) from e
        except OSError as e:
            if e.errno not in ENVIRONMENT_ERRNOS:
                raise
            where = f"{e.filename}: " if e.filename else ""
            print_error(f"{where}{ENVIRONMENT_ERRNOS[e.errno]}")
            raise typer.Exit(EXIT_FAILED) from e
        except UnicodeDecodeError as e:
            print_error(f"an input file is not UTF-8 text (byte 0x{e.object[e.start]:02x}: {e.reason}); "
                        "save it as UTF-8")
            raise typer.Exit(EXIT_USAGE) from e
        except Exception as e:
            import click

            # e.g. a RayTaskError whose cause is an LlmrecError (never click's own exits and usage errors)
            inner = None if isinstance(e, (click.ClickException, click.exceptions.Exit, click.Abort)) else \
                wrapped_llmrec_error(e)
            if inner is None:
                raise
            print_error(str(inner))
            raise typer.Exit(inner.exit_code) from e

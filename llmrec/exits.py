"""How every ``llmrec`` verb ends: one handler turns errors into a printed line and an exit code.

The root command group (``ErrorsToExitCodes``) wraps every verb, the ones mounted from benchmarks
and layers included, so verbs just raise ``LlmrecError`` and never catch it themselves.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from llmrec.errors import EXIT_FAILED, EXIT_USAGE, LlmrecError

EXIT_CODES_HELP = (
    f"Exit codes: 0 success; {EXIT_FAILED} the work ran and did not succeed (a run with more failed samples than "
    "execution.max_failed_share, whose results are stored and whose re-run retries them; a Ray job that ended "
    "FAILED or STOPPED; an unexpected internal error, printed with its traceback); "
    f"{EXIT_USAGE} nothing was done: a usage, config or data error, printed as one 'error: ...' line.")

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


class ErrorsToExitCodes(TyperGroup):
    """The root group: an ``LlmrecError`` from any verb becomes ``error: …`` and its ``exit_code``.

    A ``UnicodeDecodeError`` that escaped a reader (one that does not use ``errors.read_utf8``) is
    reported the same way rather than as a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except LlmrecError as e:
            print_error(str(e))
            raise typer.Exit(e.exit_code) from e
        except UnicodeDecodeError as e:
            print_error(f"an input file is not UTF-8 text (byte 0x{e.object[e.start]:02x}: {e.reason}); "
                        "save it as UTF-8")
            raise typer.Exit(EXIT_USAGE) from e

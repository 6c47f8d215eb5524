"""The error types user-facing code raises (always chained with ``from e``).

Every ``llmrec`` verb turns an ``LlmrecError`` into one ``error: …`` line on stderr and exits with
the error's ``exit_code`` (``llmrec.exits``), never a traceback.
"""

from __future__ import annotations

from pathlib import Path

EXIT_FAILED = 1  # the work ran and did not succeed (e.g. too many failed samples); see llmrec.exits
EXIT_USAGE = 2  # nothing was done: a usage, config or data error
EXIT_BUDGET = 3  # a run stopped by its execution.budget: finished samples stored, a re-run with a larger one resumes
EXIT_REGRESSION = 4  # `llmrec gate`: the candidate is worse than the pinned baseline by more than the margin
EXIT_INCONCLUSIVE = 5  # `llmrec gate`: not enough evidence either way
EXIT_NOT_REPRODUCED = EXIT_REGRESSION  # `llmrec reproduce`: fewer engine calls than --threshold came out identical
# (4 is a check's "no": the gate's regression, reproduce's difference)

import re


class LlmrecError(Exception):
    """Base class: an error whose message is meant for the user as is."""

    exit_code = EXIT_USAGE


def wrapped_llmrec_error(e: BaseException) -> LlmrecError | None:
    """The ``LlmrecError`` an exception carries when it crossed a process boundary: Ray re-raises an
    actor's or task's error wrapped (``RayTaskError``, ``cause``) and Ray Data wraps a batch function's
    (``UserCodeException``, ``__cause__``). The innermost one, whose message is its own."""
    found, seen, todo = None, set(), [e]
    while todo:
        cur = todo.pop()
        if not isinstance(cur, BaseException) or id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, LlmrecError) and not type(cur).__module__.startswith("ray."):
            found = cur
        todo.extend([getattr(cur, "cause", None), cur.__cause__])  # explicit chains only, never __context__
    if found is None and type(e).__module__.startswith("ray."):
        # Ray Data hands back a batch function's error as text only (UserCodeException, its cause lost): the
        # last "llmrec.<module>.<Error>: message" line of the remote traceback, as a run failure (exit 1)
        said = _REMOTE_LLMREC_ERROR.findall(str(e))
        if said:
            found = RunFailed(said[-1])
    return found


_REMOTE_LLMREC_ERROR = re.compile(r"^llmrec(?:\.\w+)*\.\w*Error: (.+)$", re.MULTILINE)


class ConfigError(LlmrecError):
    """A configuration file, key or value is wrong."""


class DataError(LlmrecError):
    """An input file is missing or malformed; the message names the file and record."""


class NotUtf8(DataError):
    """A text file (config, predictions, data) that is not UTF-8: names the file, the byte offset and line."""

    def __init__(self, path: str | Path, e: UnicodeDecodeError):
        line = e.object[:e.start].count(b"\n") + 1
        super().__init__(f"{path}: not UTF-8 text: byte 0x{e.object[e.start]:02x} at offset {e.start} (line {line}, "
                         f"{e.reason}); save the file as UTF-8")


def read_utf8(path: str | Path) -> str:
    """The whole text of a UTF-8 file, newlines translated as ``Path.read_text`` does (decoded at
    once, so a bad byte's offset is the file's)."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise NotUtf8(path, e) from e
    return text.replace("\r\n", "\n").replace("\r", "\n")


class RunFailed(LlmrecError):
    """The work ran but its outcome is a failure (e.g. too many samples failed); results are kept."""

    exit_code = EXIT_FAILED


class BudgetReached(LlmrecError):
    """A run reached its ``execution.budget``: its finished samples are stored, the rest were not run."""

    exit_code = EXIT_BUDGET


class MissingDependency(LlmrecError):
    """A package is not installed; the message names the extra that provides it (``extra=None``: one of
    llmrec's own dependencies, which a complete install has)."""

    def __init__(self, feature: str, package: str, extra: str | None):
        how = (f"Install it with: pip install 'llmrec[{extra}]'" if extra else
               "It is a dependency of llmrec itself: reinstall llmrec with its dependencies (pip install llmrec)")
        super().__init__(f"{feature} needs the package '{package}', which is not installed. {how}")
        self.feature, self.package, self.extra = feature, package, extra


class EngineError(LlmrecError):
    """An engine call failed (unreachable server, bad reply, crash)."""


class EngineDead(EngineError):
    """The engine itself is gone (e.g. vLLM's engine core died): not retried in-process;
    raised so that Ray restarts the actor or replica that holds the engine."""


class ContextOverflow(EngineError):
    """The prompt does not fit the engine's context window. ``prompt_tokens`` and ``context_limit``
    (None when the engine did not say) are typed: nothing downstream reads numbers out of the message."""

    def __init__(self, prompt_tokens: int, context_limit: int | None, max_tokens: int | None = None):
        room = f" + {max_tokens} completion tokens" if max_tokens else ""
        size = f"is {context_limit}" if context_limit is not None else "size was not reported"
        super().__init__(f"prompt has {prompt_tokens} tokens{room}; the engine's context {size}")
        self.prompt_tokens, self.context_limit, self.max_tokens = prompt_tokens, context_limit, max_tokens

    @classmethod
    def from_server_text(cls, text: str, fallback_prompt: int) -> "ContextOverflow":
        """Read a server's over-context message once, at the engine edge. Wordings read: vLLM's
        "maximum context length is 2048 tokens. However, you requested 2100 tokens (2050 in the messages, ...)",
        "... However, your request has 2050 input tokens", "... your prompt contains [at least] 2050 input
        tokens", "... and your request has 2050 input tokens", OpenAI's "... your messages resulted in 2050
        tokens", and vLLM's engine "The decoder prompt (length 2050) is longer than the maximum model length of
        2048". A count the text does not give is ``fallback_prompt`` (the client's own count) / None."""
        limit = _SERVER_LIMIT.search(text)
        prompt = _SERVER_PROMPT.search(text)
        n_prompt = int(next(g for g in prompt.groups() if g)) if prompt else fallback_prompt
        return cls(n_prompt, int(next(g for g in limit.groups() if g)) if limit else None)


_SERVER_LIMIT = re.compile(r"maximum context length is (\d+)|maximum model length of (\d+)", re.IGNORECASE)
_SERVER_PROMPT = re.compile(r"(\d+) (?:tokens )?in the messages|(?:request has|prompt contains|prompt has|messages "
                            r"resulted in|prompt is) (?:at least )?(\d+)|prompt \(length (\d+)\)", re.IGNORECASE)

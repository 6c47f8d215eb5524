"""The three error types user-facing code raises (always chained with ``from e``)."""


class LlmrecError(Exception):
    """Base class: an error whose message is meant for the user as is."""


class ConfigError(LlmrecError):
    """A configuration file, key or value is wrong."""


class DataError(LlmrecError):
    """An input file is missing or malformed; the message names the file and record."""


class MissingDependency(LlmrecError):
    """An optional package is not installed; the message names the extra that provides it."""

    def __init__(self, feature: str, package: str, extra: str):
        super().__init__(
            f"{feature} needs the package '{package}', which is not installed. "
            f"Install it with: pip install 'llmrec[{extra}]'"
        )
        self.feature, self.package, self.extra = feature, package, extra


class EngineError(LlmrecError):
    """An engine call failed (unreachable server, bad reply, crash)."""


class EngineDead(EngineError):
    """The engine itself is gone (e.g. vLLM's engine core died): not retried in-process;
    raised so that Ray restarts the actor or replica that holds the engine."""


class ContextOverflow(EngineError):
    """The prompt does not fit the engine's context window."""

    def __init__(self, prompt_tokens: int, context_length: int, max_tokens: int | None = None):
        room = f" + {max_tokens} completion tokens" if max_tokens else ""
        super().__init__(f"prompt has {prompt_tokens} tokens{room}; the engine's context is {context_length}")
        self.prompt_tokens, self.context_length, self.max_tokens = prompt_tokens, context_length, max_tokens

"""Chat formats: messages → one prompt string, for models whose weights carry no chat template (the
embedded Gemma 3 270M GGUF is a base model). Shared by the engines that render prompts themselves
(llama.cpp, transformers, vLLM) and by ``llmrec sft``, so that no engine owns them."""

from __future__ import annotations

from llmrec.types import Message

OWN_FORMATS = ("gemma", "plain")  # llmrec's own chat formats: an engine using one reports the prompt it rendered


def render_gemma(messages: list[Message]) -> str:
    """Gemma turns; system text goes before the first user turn (Gemma has no system role)."""
    pending = "\n\n".join(m.content for m in messages if m.role == "system")
    parts = []
    for m in messages:
        if m.role == "system":
            continue
        text = m.content
        if m.role == "user" and pending:
            text, pending = f"{pending}\n\n{text}", ""
        role = "model" if m.role == "assistant" else "user"
        parts.append(f"<start_of_turn>{role}\n{text}<end_of_turn>\n")
    if pending:
        parts.insert(0, f"<start_of_turn>user\n{pending}<end_of_turn>\n")
    return "".join(parts) + "<start_of_turn>model\n"


def render_plain(messages: list[Message]) -> str:
    names = {"user": "User", "assistant": "Assistant"}
    lines = [m.content + "\n" if m.role == "system" else f"{names[m.role]}: {m.content}" for m in messages]
    return "\n".join(lines) + "\nAssistant:"

"""The item probe's prompt, after the reference code's: a system message that casts the model as the dataset
(answer a lookup key with the exact value, only the value, ``Unknown`` when the key is unknown), then each shot as
a user turn ``Input: <id><sep>`` and an assistant turn ``<id><sep><title>``, then the asked ``Input: <id><sep>``.
The lines are the catalogue file's own format (``1|Toy Story (1995)`` for ML-100K, ``1::Toy Story (1995)`` for
ML-1M). The reference replaces its shots by the last three correctly recalled items and keeps a batch's earlier
answers in the conversation, which makes every prompt depend on the answers before it; here each item is asked
on its own with fixed shots (the first lines of the file), so items run in parallel and a run resumes item by
item."""

from __future__ import annotations

from llmrec.types import Message

SYSTEM = ("You are the {dataset} dataset. When you are given a lookup key (e.g., an ID), reply with the exact "
          "value that the dataset stores for it. Reply with the value only. If you do not know the key, reply "
          "'Unknown'. The examples below show queries and their correct replies. Follow this pattern strictly. "
          "Let's think step by step.")


def messages(dataset: str, sep: str, shots: list[list[str]], item_id: str) -> list[Message]:
    out = [Message(role="system", content=SYSTEM.format(dataset=dataset))]
    for sid, title in shots:
        out += [Message(role="user", content=f"Input: {sid}{sep}"),
                Message(role="assistant", content=f"{sid}{sep}{title}")]
    out.append(Message(role="user", content=f"Input: {item_id}{sep}"))
    return out

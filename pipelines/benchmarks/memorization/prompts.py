"""The probes' prompts, after the reference code's: a system message that casts the model as the dataset (answer a
lookup key with the exact value, only the value, ``Unknown`` when the key is unknown), then each shot as a user
turn and an assistant turn, then the asked key.

- item: user ``Input: <id><sep>``, assistant ``<id><sep><title>``; the lines are the catalogue file's own format
  (``1|Toy Story (1995)`` for ML-100K, ``1::Toy Story (1995)`` for ML-1M).
- user: user ``<id><sep>``, assistant the whole user line (``1::F::1::10::48067``).
- year / genres (not in the reference): user ``Input: <id><sep><title without its year><sep>``, assistant the line
  with the year (``1|Toy Story|1995``); user ``Input: <id><sep><title><sep>``, assistant the line with the genres.
- interaction: the reference's recommender-system message; user ``<user><sep>``, assistant ``<user><sep><item>``
  for the file's first rows (of other users), then for the user's rows just before the asked one.

The reference replaces its shots by the last three correctly recalled keys and keeps a batch's earlier answers in
the conversation, which makes every prompt depend on the answers before it; here each key is asked on its own with
fixed shots (the first lines of the file), so keys run in parallel and a run resumes key by key."""

from __future__ import annotations

from llmrec.types import Message

INTERACTION_SYSTEM = ("You are a recommender system. Continue the user-item interaction list with the next "
                      "interaction from the {dataset} dataset. When you are given a UserID, reply with "
                      "'UserID{sep_text}NextItemID'. The examples below show queries and their correct replies. "
                      "Follow this pattern strictly. Let's think step by step.")
ATTRIBUTE = {"year": "release year", "genres": "genres ('|'-separated)"}
SYSTEM = ("You are the {dataset} dataset. When you are given a lookup key (e.g., {example}), reply with the exact "
          "{what} that the dataset stores for it. Reply with the value only. If you do not know the key, reply "
          "'Unknown'. The examples below show queries and their correct replies. Follow this pattern strictly. "
          "Let's think step by step.")


def messages(row: dict) -> list[Message]:
    probe = row.get("probe") or "item"
    user = probe == "user"
    ask = "{key}{sep}" if probe in ("user", "interaction") else "Input: {key}{sep}"
    what = f"{row.get('fields')} values" if user else "value"
    if probe == "interaction":
        sep_text = " (a tab) " if row["sep"] == "\t" else row["sep"]
        system = INTERACTION_SYSTEM.format(dataset=row["dataset"], sep_text=sep_text)
    elif probe in ATTRIBUTE:
        system = SYSTEM.format(dataset=row["dataset"], what=ATTRIBUTE[probe], example="a MovieID and its title")
    else:
        system = SYSTEM.format(dataset=row["dataset"], what=what, example="a UserID" if user else "an ID")
    out = [Message(role="system", content=system)]
    for key, line in row["_shots"]:
        out += [Message(role="user", content=ask.format(key=key, sep=row["sep"])),
                Message(role="assistant", content=line)]
    out.append(Message(role="user", content=ask.format(key=row["key"], sep=row["sep"])))
    return out

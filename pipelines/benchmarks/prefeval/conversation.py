"""Message sequences a PrefEval sample sends, per stage and method.

context      = [system] + the layout's blocks (preference turns with the live reply,
               extra/conflicting statements with their replies, inter-turn pairs)
answer       = context + [user: final question of the method]   (self-critic: the zero-shot question)
critique     = context + [user: question, assistant: initial answer, user: critique request]
revision     = critique + [assistant: critique, user: revision request]
"""

from __future__ import annotations

from llmrec.pipelines.protocol import sample_assets
from llmrec.pipelines.benchmarks.prefeval import prompts, rag
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.types import Message


def corpus(sample: dict) -> list[dict]:
    """The inter-turn messages, from the shared assets the runner attached (see data.assets)."""
    return sample_assets(sample)["inter_turn_messages"]


def _blocks(sample: dict, pref_reply: str | None, drop: int) -> list[tuple[str, list[Message]]]:
    """(kind, messages) per layout block, the ``drop`` oldest inter-turn pairs left out."""
    chats = corpus(sample)
    statements = dict(sample.get("_statements") or [])
    replies = sample.get("statement_replies") or {}
    out: list[tuple[str, list[Message]]] = []
    for block in sample["_layout"]:
        if block[0] == "pref":
            msgs = [Message(**m) for m in sample["_preference"]]
            if sample["form"] == "explicit":
                reply = pref_reply if pref_reply is not None else sample.get("pref_reply")
                msgs.append(Message(role="assistant", content=reply or ""))
            out.append(("pref", msgs))
        elif block[0] == "stmt":
            out.append(("stmt", [Message(role="user", content=statements[block[1]]),
                                 Message(role="assistant", content=replies.get(block[1], ""))]))
        else:
            a, b = block[1], block[2]
            skip = min(drop, b - a)
            drop -= skip
            out.append(("inter", [Message(**m) for m in chats[2 * (a + skip): 2 * b]]))
    return out


def context_messages(cfg: PrefEvalConfig, sample: dict, pref_reply: str | None = None) -> list[Message]:
    msgs = prompts.system(cfg)
    for _, block in _blocks(sample, pref_reply, int(sample.get("dropped_pairs") or 0)):
        msgs += block
    return msgs


def rag_retrieval(cfg: PrefEvalConfig, sample) -> dict:
    """The top-k earlier messages (the whole history, before any truncation) most similar to the question:
    ``rag_retrieved`` (positions in the history) and ``rag_pref_hit`` (a preference message was among them).
    A sample that already carries them keeps them; otherwise retrieval runs once per sample and process (the
    answer stage renders, then stores these fields)."""
    if "rag_retrieved" in sample:
        return {"rag_retrieved": sample["rag_retrieved"], "rag_pref_hit": sample.get("rag_pref_hit")}
    history = [(kind, m) for kind, block in _blocks(sample, None, 0) for m in block]
    key = (cfg.rag_top_k, str(cfg.rag_model), sample["sample_id"], sample["question"])
    if key not in _RETRIEVED:
        if len(_RETRIEVED) > 4096:
            _RETRIEVED.clear()
        _RETRIEVED[key] = rag.retrieve(sample["question"], [m.content for _, m in history], cfg.rag_top_k,
                                       cfg.rag_model)
    idx = _RETRIEVED[key]
    return {"rag_retrieved": list(idx), "rag_pref_hit": any(history[i][0] == "pref" for i in idx)}


_RETRIEVED: dict[tuple, list[int]] = {}  # per process: (top_k, model, sample_id, question) → positions


def rag_exchanges(cfg: PrefEvalConfig, sample) -> list[tuple[str, str]]:
    """The retrieved exchanges (``rag_retrieval``) as (role, content), in history order of retrieval."""
    history = [m for _, block in _blocks(sample, None, 0) for m in block]
    return [(history[i].role, history[i].content) for i in rag_retrieval(cfg, sample)["rag_retrieved"]]


def method_prefix(cfg: PrefEvalConfig, sample: dict, method: str) -> str:
    if method == "cot":
        return prompts.template(prompts.texts(sample), "cot")
    if method == "rag":
        return prompts.rag_prefix(prompts.texts(sample), rag_exchanges(cfg, sample))
    return ""


def final_question(cfg: PrefEvalConfig, sample: dict, method: str | None = None) -> str:
    """The last user message of the answer stage (self-critic asks the zero-shot question first)."""
    method = method or sample["method"]
    if method == "self-critic":
        method = "zero-shot"
    prefix = method_prefix(cfg, sample, method)
    if cfg.task == "mcq":
        return prompts.mcq_question(prompts.texts(sample), sample["question"], sample["options"], method, prefix)
    return prompts.gen_question(cfg, prompts.texts(sample), sample["question"], method, prefix)


def answer_messages(cfg: PrefEvalConfig, sample: dict) -> list[Message]:
    return context_messages(cfg, sample) + [Message(role="user", content=final_question(cfg, sample))]


def _asked(cfg: PrefEvalConfig, sample: dict) -> str:
    """The question as the self-critic transcript shows it: the reference shows the bare question
    (generation) or the question with its options (MCQ), without the word limit."""
    if cfg.task == "mcq":
        return prompts.mcq_question(prompts.texts(sample), sample["question"], sample["options"], "zero-shot")
    return sample["question"]


def critique_messages(cfg: PrefEvalConfig, sample: dict) -> list[Message]:
    return context_messages(cfg, sample) + [
        Message(role="user", content=_asked(cfg, sample)),
        Message(role="assistant", content=sample.get("initial_output") or ""),
        Message(role="user", content=prompts.critique_request(cfg, prompts.texts(sample))),
    ]


def revision_messages(cfg: PrefEvalConfig, sample: dict) -> list[Message]:
    return critique_messages(cfg, sample) + [
        Message(role="assistant", content=sample.get("critique") or ""),
        Message(role="user", content=prompts.revision_request(cfg, prompts.texts(sample), sample["question"],
                                                                sample.get("options"))),
    ]


def conversation(cfg: PrefEvalConfig, sample: dict, pref_reply: str | None) -> list[Message]:
    """Full answer prompt with the given live reply (MCQ and generation alike)."""
    return context_messages(cfg, sample, pref_reply) + [Message(role="user", content=final_question(cfg, sample))]


def inter_pair_chars(sample: dict) -> list[int]:
    """Characters of each inter-turn pair still in the conversation, oldest first."""
    chats = corpus(sample)
    drop = int(sample.get("dropped_pairs") or 0)
    pairs = [p for b in sample["_layout"] if b[0] == "inter" for p in range(b[1], b[2])][drop:]
    return [len(chats[2 * p]["content"]) + len(chats[2 * p + 1]["content"]) for p in pairs]

"""A tiny randomly initialised HF causal LM (character-level tokenizer), built in the test folder."""

from __future__ import annotations

import string
from pathlib import Path


def build_tiny_model(path: Path, seed: int = 0) -> Path:
    """Save a 2-layer Llama with a character vocabulary to ``path`` (no download; ~1 s)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    chars = list(string.printable)
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3, **{c: i + 4 for i, c in enumerate(chars)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    from tokenizers import decoders
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                                   unk_token="<unk>")
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=True)
    LlamaForCausalLM(cfg).save_pretrained(path)
    fast.save_pretrained(path)
    return path

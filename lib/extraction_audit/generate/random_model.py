"""Random-weight GPT-2-shaped models and a small byte-level tokenizer, built offline.

Throughput does not depend on the weights, so the generation benchmark (and tests that
need *a* causal LM rather than a trained one) use these instead of downloading GPT-2.
``124m`` matches GPT-2 small's shape (12 layers, 768 wide, 50,257 ids, 1,024
positions) and ``1.5b`` GPT-2 XL's (48 layers, 1,600 wide); ids beyond the small
tokenizer's vocabulary decode to nothing, which is fine for throughput.  Reads and writes no tables.
"""

from __future__ import annotations

from pathlib import Path

SHAPES = {
    "tiny": dict(n_layer=2, n_embd=64, n_head=2, n_positions=256),
    "small": dict(n_layer=4, n_embd=256, n_head=4, n_positions=512),
    "124m": dict(n_layer=12, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257),
    "1.5b": dict(n_layer=48, n_embd=1600, n_head=25, n_positions=1024, vocab_size=50257),
}

_WORDS = ("the of and to in is was for on that with as by at from it an be this are or his her which not "
          "poem company book data model bank account name phone number street city river house year day "
          "report patient record letter note customer service reply agent time people world water light").split()


def filler_text(n_lines: int = 400, seed: int = 0) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(_WORDS, size=int(rng.integers(5, 20)))).capitalize() + "." for _ in range(n_lines)]


def build_tokenizer(path: str | Path, texts: list[str] | None = None, vocab_size: int = 512) -> str:
    """A GPT-2-style byte-level BPE tokenizer with ``<|endoftext|>`` as BOS/EOS/pad."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    eot = "<|endoftext|>"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[eot],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts or filler_text(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=eot, eos_token=eot, pad_token=eot)
    fast.save_pretrained(str(path))
    return str(path)


def build_random_gpt2(path: str | Path, tokenizer_path: str | Path, shape: str = "tiny", seed: int = 0) -> str:
    """Save a random-weight GPT-2 of ``shape`` whose special ids match the tokenizer."""
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tok = AutoTokenizer.from_pretrained(str(tokenizer_path))
    dims = dict(SHAPES[shape])
    vocab = max(int(dims.pop("vocab_size", 0)), len(tok))
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                        pad_token_id=tok.pad_token_id, **dims)
    model = GPT2LMHeadModel(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(str(path))
    return str(path)


def build_random_assets(root: str | Path, shape: str = "tiny", seed: int = 0) -> tuple[str, str]:
    """(model_dir, tokenizer_dir) under ``root``, built once and reused."""
    root = Path(root)
    tokenizer_dir = root / "tokenizer"
    model_dir = root / f"model-{shape}"
    if not (tokenizer_dir / "tokenizer.json").exists():
        build_tokenizer(tokenizer_dir)
    if not (model_dir / "config.json").exists():
        build_random_gpt2(model_dir, tokenizer_dir, shape=shape, seed=seed)
    return str(model_dir), str(tokenizer_dir)

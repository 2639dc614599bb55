"""A byte-level BPE tokenizer trained from scratch on local text, with a ChatML chat template.

Byte-level BPE maps every byte to a symbol before merging, so any source code (tabs, unicode,
odd whitespace) encodes and decodes back exactly. The special tokens and the template follow the
Qwen convention (`<|im_start|>role\\n...<|im_end|>\\n`, eos = `<|im_end|>`), so the same prompt code
and stop tokens work for the tiny model and for real Qwen3 checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD = "<|endoftext|>"
SPECIAL_TOKENS = [PAD, IM_START, IM_END]

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def build_tokenizer(texts: Iterable[str], vocab_size: int = 4096, min_frequency: int = 2) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts` and wrap it as a transformers tokenizer with the chat template.

    Training is deterministic for a given sequence of texts (the BPE trainer breaks count ties by
    pair order), so the same corpus always gives the same vocabulary.
    """
    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size {vocab_size} is below the 256 byte symbols plus special tokens")
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(list(texts), trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=IM_END,
        pad_token=PAD,
        additional_special_tokens=[IM_START],
        clean_up_tokenization_spaces=False,
        model_max_length=1_000_000,
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok

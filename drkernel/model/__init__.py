"""The tiny offline policy of the embedded default: a locally trained tokenizer and a small Qwen3."""

from drkernel.model.tiny import build_tiny_model, save_tiny_base
from drkernel.model.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS, build_tokenizer

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_model", "build_tokenizer", "save_tiny_base"]

"""The RL prompt stream, where the runtime imports it from: see drkernel.data.stream.

The stream itself has no Ray in it (validation, order and cursor are pure and tested there); this
module keeps the import path the rollout side uses.
"""

from __future__ import annotations

from drkernel.data.stream import PromptStream, order_key, order_keys

__all__ = ["PromptStream", "order_key", "order_keys"]

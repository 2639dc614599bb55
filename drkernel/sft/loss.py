"""Next-token cross entropy on response tokens only.

The LM head is applied only at positions that carry a label. Prompt positions never need logits,
and for a real model (vocabulary ~150k, sequences ~18k tokens) full logits would be the largest
tensor of the step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from drkernel.sft.data import IGNORE_INDEX


def response_loss_sum(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Summed cross entropy over labelled tokens of `batch`, and how many tokens were summed.

    Returning the sum (not the mean) lets gradient accumulation divide by the token count of the
    whole optimizer step, so every response token weighs the same however micro-batches are cut.
    """
    hidden = model.get_decoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    targets = batch["labels"][:, 1:]
    keep = targets != IGNORE_INDEX
    logits = model.get_output_embeddings()(hidden[:, :-1][keep])
    loss = F.cross_entropy(logits.float(), targets[keep], reduction="sum")
    return loss, int(keep.sum())

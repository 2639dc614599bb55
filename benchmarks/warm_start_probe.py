"""How much room to learn does a warm start leave at a sampling temperature? For the learning experiment's SFT
checkpoints (benchmarks/learning.py's `warm_start`, one per `--epochs`), per task and temperature: the exact
probability of each shipped solution as the whole answer (the product of its token probabilities after the
temperature), how many of its tokens sit below probability 0.9, and `--samples` sampled answers sorted by exact
match into the shipped solutions, "other" code or no code block. No verifier: an exact copy of a shipped solution
is correct by construction, "other" is nearly always wrong for the tiny model (one unlikely token, then more),
so the counts bound the correct rate from below. About 15 s per checkpoint to make, seconds per probe.

    .venv/bin/python benchmarks/warm_start_probe.py --epochs 140 160 --temperatures 0.8 1.0 --samples 16 \\
        --root /tmp/probe
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from learning import recipe, warm_start

from drkernel.data.prompts import extract_code, first_turn_messages
from drkernel.sft.data import code_response, prompt_ids
from drkernel.tasks.loader import load_task


@torch.no_grad()
def answer_logprobs(model, prompt: list[int], answer: list[int], temperature: float) -> torch.Tensor:
    """Log-prob of every answer token after the prompt, from logits divided by the temperature (as the trainer)."""
    logits = model(torch.tensor([prompt + answer])).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(answer)[:, None])[:, 0]


@torch.no_grad()
def sampled_kinds(model, tok, prompt: list[int], solutions: dict[str, str], temperature: float, n: int) -> dict:
    """`n` answers sampled at `temperature` (seed 0), counted by exact match of their code to a shipped solution."""
    torch.manual_seed(0)
    ids = torch.tensor([prompt] * n)
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=512,
        do_sample=True,
        temperature=temperature,
        top_k=0,
        top_p=1.0,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.eos_token_id,
    )
    kinds = dict.fromkeys([*sorted(solutions), "other", "no code"], 0)
    for row in out:
        code = extract_code(tok.decode(row[len(prompt) :].tolist(), skip_special_tokens=True))
        same = [label for label, s in solutions.items() if code is not None and code.strip() == s.strip()]
        kinds[same[0] if same else ("other" if code is not None else "no code")] += 1
    return kinds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, nargs="+", default=[160])
    ap.add_argument("--temperatures", type=float, nargs="+", default=[1.0])
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--tasks", nargs="+", default=["relu", "scale_shift"])
    ap.add_argument("--taught-wrong", action="store_true", help="as benchmarks/learning.py --taught-wrong")
    ap.add_argument("--root", default="runs/warm-start-probe", help="recipe copy and one warm-start folder per epochs")
    a = ap.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    root = Path(a.root).resolve()
    for epochs in a.epochs:
        folder = warm_start(root / f"warm{epochs}", recipe(root / "recipe", a.tasks, epochs, a.taught_wrong))
        tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        for name in a.tasks:
            task = load_task(root / "recipe" / "tasks" / name)
            prompt = prompt_ids(tok, first_turn_messages(task.reference, entry_point="Model", style="compact"))
            for t in a.temperatures:
                parts = []
                for label, solution in sorted(task.solutions.items()):
                    answer = tok.encode(code_response(solution), add_special_tokens=False) + [tok.eos_token_id]
                    lp = answer_logprobs(model, prompt, answer, t)
                    unsure = int((lp.exp() < 0.9).sum())
                    parts.append(f"P({label}) {math.exp(lp.sum()):.3f} ({unsure} of {len(answer)} tokens < 0.9)")
                kinds = sampled_kinds(model, tok, prompt, task.solutions, t, a.samples)
                print(f"epochs {epochs} {name} T={t:g}: {', '.join(parts)}; {a.samples} samples {kinds}", flush=True)


if __name__ == "__main__":
    main()

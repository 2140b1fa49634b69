"""The paper's experiments on the default model; each writes JSON (and a PNG when matplotlib is installed).

Run them through demo.py (python demo.py --help); the functions here are also the library for them.
"""
import math
import time

import torch
import torch.nn.functional as F

import llama
import msrnn


@torch.no_grad()
def nll(model, ids: torch.Tensor, policy=None, size=None) -> torch.Tensor:
    """Negative log-likelihood of every next token, (T - 1,), for one chunk ids (T,).

    Runs the masked transformer view, which gives the token-by-token MSRNN's logits
    (test_policies.py) several times faster: the projections and MLPs see all tokens at once.
    """
    logits, _ = msrnn.masked_forward(model, ids[None], policy, size)
    return F.cross_entropy(logits[0, :-1].float(), ids[1:], reduction="none")


def perplexity(model, ids: torch.Tensor, policy=None, size=None, chunk=4096, progress=None) -> dict:
    """Perplexity of a token sequence cut into chunks of `chunk` tokens (each chunk starts afresh)."""
    pieces = [ids[i:i + chunk] for i in range(0, len(ids), chunk)]
    pieces = [p for p in pieces if len(p) > 1]
    losses, per_chunk = [], []
    for i, p in enumerate(pieces):
        loss = nll(model, p, policy, size)
        losses.append(loss)
        per_chunk.append(math.exp(loss.mean().item()))
        if progress:
            progress(i + 1, len(pieces))
    return {"ppl": math.exp(torch.cat(losses).mean().item()), "tokens": sum(len(l) for l in losses),
            "chunks": len(pieces), "ppl_per_chunk": per_chunk}

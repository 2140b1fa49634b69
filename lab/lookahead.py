"""A bound, not a policy: the lookahead reads the text's future, which no policy can.

In the spirit of Belady's optimal cache replacement (1966), it keeps the rows that the full-cache
model's same layer will attend to most over the rest of the text. It is built for one text, so
`lookahead(model, tokens)` returns the policy for that text; `demo.py check` says it reads ahead.
tests/test_policies.py compares it with a list-based reference.
"""
import math
import sys

import torch

from engine import guards
import llama
from policies import label


@label("Lookahead", horizon=(0, math.inf))
def lookahead(model, tokens, horizon=0):
    """Not a policy but a bound for policies, in the spirit of Belady's optimal cache replacement (1966):
    keep the rows that the full-cache model's same layer will attend to most over the rest of `tokens`
    (or the next `horizon` steps), averaged over its query heads. It reads the future, which no
    policy can (`demo.py check` says so), so it is built for one text: lookahead(model, tokens) is the
    policy for that text and that model (run on another text of the same length, or with another model, it
    cannot tell: the rows it is shown carry no tokens; `specs.Named.on` builds it for each text). It is not
    guaranteed optimal for perplexity; it is a reference point."""
    future = FutureAttention(model, tokens, horizon)

    def lookahead_policy(rows):
        if rows.pos.shape[0] != future.B:
            raise ValueError(f"this lookahead was built for {future.B} sequence(s), and is run on {rows.pos.shape[0]}")
        return future.after(rows.layer, rows.t).gather(1, rows.pos[:, 0])[:, None]  # (B, T) -> (B, 1, n)
    return lookahead_policy


class FutureAttention:
    """after(layer, t)[b, j]: the attention position j receives from the full-cache model's queries
    t+1 .. t+horizon (to the end of the text if horizon is 0) in that layer, averaged over query heads.

    Memory stays bounded: it keeps every layer's queries and keys (the model's own activations) and
    one layer's (B, T + 1, T) sums at a time, computed in blocks of queries. That suits prefill and
    the masked view, which finish a layer before starting the next. A step near the end of the text
    (generation after a prompt) is summed directly from the few queries after it."""
    BLOCK = 256
    KEEP_BYTES = 2**30  # every layer's sums kept when they fit in this; else one layer's at a time

    def __init__(self, model, tokens, horizon=0):
        if not guards.integer(horizon) or horizon < 0:
            raise ValueError(f"horizon must be an integer of at least 0 (0: to the end of the text), got {horizon!r}")
        tokens = guards.check_tokens(model, tokens)                 # (B, T): a list or (1, 1, T) named here
        (self.B, self.T), self.horizon, self.layer, self.sums = tokens.shape, horizon, None, None
        c, (B, T) = model.config, tokens.shape
        # read token by token, the layers alternate at every step: every layer's sums kept where they fit
        self.keep = c.n_layers * B * (T + 1) * T * llama.wide(model.dtype).itemsize <= self.KEEP_BYTES
        self.kept, self.built, self.warned = {}, set(), False
        guards.check_memory(((c.n_heads + c.n_kv_heads) * c.head_dim * c.n_layers + T + 1) * B * T * model.embed.element_size(),
                           f"the lookahead of {T} tokens (every layer's queries and keys, one layer's sums)")
        self.mask = llama.causal_mask(self.T, model.config.sliding_window, model.device)  # (T, T) the model's own, sliding window too
        self.qk = captured(model, tokens, self.mask)

    def attention(self, layer, i0, i1):
        """Head-averaged attention of queries i0 .. i1-1 over all T positions, (B, i1 - i0, T)."""
        q, k = self.qk[layer]
        s = q[:, :, :, i0:i1] @ k[:, :, :, :i1].mT / math.sqrt(q.shape[-1])  # (B, Hkv, G, i1 - i0, i1)
        a = s.masked_fill(~self.mask[i0:i1, :i1], -math.inf).softmax(-1, dtype=llama.wide(s.dtype)).mean((1, 2))
        return torch.nn.functional.pad(a, (0, self.T - i1))         # later positions receive nothing

    def summed(self, layer):
        """sums[:, i] = the attention layer's positions receive from queries i .. T-1, built from the end."""
        q = self.qk[layer][0]
        sums = q.new_zeros(q.shape[0], self.T + 1, self.T, dtype=llama.wide(q.dtype))  # (B, T + 1, T)
        for i0 in range(self.T - (self.T - 1) % self.BLOCK - 1, -1, -self.BLOCK):
            i1 = min(i0 + self.BLOCK, self.T)
            sums[:, i0:i1] = self.attention(layer, i0, i1).flip(1).cumsum(1).flip(1) + sums[:, i1:i1 + 1]
        if self.keep:
            self.kept[layer] = sums
        elif layer in self.built and not self.warned:  # built again: read token by token, O(L·T³)
            self.warned = True
            print(f"[msrnn] the lookahead is read token by token and every layer's sums do not fit in "
                  f"{self.KEEP_BYTES / 2**30:.0f} GiB: each layer's are built again at every step, about "
                  f"{len(self.qk)}·T³ operations; fast.prefill or msrnn.masked_forward read it layer by layer", file=sys.stderr)
        self.built.add(layer)
        return sums

    # Looked up by position in Python, not a tensor operation: torch.compile (prefill's compile=True)
    # leaves it out of the graph, where it would otherwise be specialised to each step's t
    @torch.compiler.disable
    def after(self, layer, t):
        if t >= self.T:
            raise ValueError(f"lookahead knows the {self.T} tokens it was built for; step {t} is past them")
        end = self.T if not self.horizon else min(self.T, t + 1 + self.horizon)
        if self.layer != layer and self.T - t - 1 <= self.BLOCK:  # near the end of the text: sum directly
            return self.attention(layer, t + 1, end).sum(1)              # no queries after the last step: zeros
        if self.layer != layer:
            self.sums = self.kept[layer] if layer in self.kept else self.summed(layer)
            self.layer = layer
        return self.sums[:, t + 1] - self.sums[:, end]


def captured(model, tokens, mask):
    """Every layer's (queries, keys) of the full-cache model on tokens (B, T), RoPE applied: one forward
    pass, made again for every lookahead (a bound costs far more than it; a kept copy was served after the
    weights changed in ways no version counter sees, `.data` or a tensor replaced)."""
    qk = []

    def keep_qk(layer, q, k, v):                                     # q (B, Hkv, G, T, hd); k, v (B, Hkv, 1, T, hd)
        qk.append((q, k))
        return llama.softmax_attention(q, k, v, mask if model.config.sliding_window else None)
    llama.forward(model, tokens, keep_qk, last=True)
    return qk

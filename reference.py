"""The paper in 60 lines: a finite multi-state RNN with its rows in plain Python lists.

Oren et al. 2024: every layer keeps a set of (key, value, position) rows. At each token it
appends the token's row, attends over all its rows, and, if it now holds more than `size`, drops
the rows a policy scores lowest. That is all. This file says it with lists, one sequence row by row,
so that it is easy to check by eye; msrnn.py says the same with fixed slots, fast.py faster. The
tests hold both to this one (test_policies.py, float64, 1e-10). It plugs into llama.step in place
of msrnn.MultiState, so the decoder around it is the same.
"""
import math

import torch

import llama
import msrnn


class ListMultiState:
    """One layer's rows: rows[b][h] is the list of [key, value, position, attention received, the
    policy's last score] of sequence b's KV head h, oldest first."""

    def __init__(self, batch, kv_heads, size, layer, window=None, oneshot=0):
        self.rows = [[[] for _ in range(kv_heads)] for _ in range(batch)]
        self.size, self.layer, self.window, self.oneshot = size, layer, window, oneshot

    def attend(self, q, k, v, t, policy):
        """q (B, Hkv, G, hd), k and v (B, Hkv, hd) of the token at position t -> output (B, Hkv, G, hd)."""
        out, attn = torch.empty_like(q), {}
        for b, heads in enumerate(self.rows):
            for h, rows in enumerate(heads):
                rows.append([k[b, h], v[b, h], t, 0.0, math.nan])         # 1. append the token's row
                K, V = torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])  # (n, hd)
                s = q[b, h] @ K.T / math.sqrt(q.shape[-1])               # (G, n)
                if self.window:  # Mistral's sliding window: rows W or more steps old are not seen
                    s[:, [t - r[2] >= self.window for r in rows]] = -math.inf
                attn[b, h] = s.softmax(-1)                                # 2. attend
                out[b, h] = attn[b, h] @ V
                for r, a in zip(rows, attn[b, h].sum(0).tolist()):       # what H2O accumulates
                    r[3] += a
        n = len(self.rows[0][0])
        if self.size is None or n <= self.size or t < self.oneshot - 1:
            return out
        # 3. drop: the policy scores every row (msrnn.Rows), and the n - size lowest go; ties go
        # against the older row (msrnn.py: the earlier slot; a policy should break its own ties)
        B, H = len(self.rows), len(self.rows[0])
        field = lambda i: [[[r[i] for r in self.rows[b][h]] for h in range(H)] for b in range(B)]
        rows = msrnn.Rows(attn=torch.stack([torch.stack([attn[b, h] for h in range(H)]) for b in range(B)]),
                          pos=torch.tensor(field(2)), score=torch.tensor(field(3), dtype=llama.wide(q.dtype)),
                          keys=torch.stack([torch.stack([torch.stack(ks) for ks in kb]) for kb in field(0)]),
                          values=torch.stack([torch.stack([torch.stack(vs) for vs in vb]) for vb in field(1)]),
                          query=q, prev=torch.tensor(field(4), dtype=llama.wide(q.dtype)), t=t, size=self.size,
                          layer=self.layer)
        scores = policy(rows).expand(B, H, n).tolist()
        for b in range(B):
            for h in range(H):
                for r, s in zip(self.rows[b][h], scores[b][h]):          # what the policy sees next time
                    r[4] = s
                lowest = sorted(range(n), key=lambda i: (scores[b][h][i], i))[:n - self.size]
                self.rows[b][h] = [r for i, r in enumerate(self.rows[b][h]) if i not in lowest]
        return out


@torch.no_grad()
def run(model: llama.Model, tokens: torch.Tensor, policy=None, size=None, oneshot=0) -> torch.Tensor:
    """msrnn.run, with list-based multi-states: logits (B, T, vocab) for tokens (B, T)."""
    c = model.config
    state = msrnn.State([ListMultiState(tokens.shape[0], c.n_kv_heads, size, i, c.sliding_window, oneshot)
                         for i in range(c.n_layers)])
    return torch.stack([llama.step(model, tokens[:, t], state, policy) for t in range(tokens.shape[1])], 1)

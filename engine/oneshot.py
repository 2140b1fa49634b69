"""The one-shot prompt regime of the official TOVA code and kvpress, beside the paper's per-step one.

The paper's MSRNN (msrnn.py) evicts at every step, prompt included. The official code and kvpress
read a prompt of P tokens with full attention and, at its last token, cut the state once to the
`size` rows the policy scores highest; from then on they evict one row per step, as msrnn.py does.
`OneShot` is msrnn.MultiState with that cut; test_equivalence.py's list reference states the same
regime in one line, and tests/test_policies.py holds every view of it to that reference (1e-10).
"""
from dataclasses import dataclass

import torch

from engine import guards
import llama
import msrnn


@dataclass
class OneShot(msrnn.MultiState):
    """A layer's multi-state whose first `prompt` rows are all held; at the step of position prompt - 1
    the policy scores every row and all but the `size` best go."""
    prompt: int = 0
    cut: bool = False  # whether the prompt's last token has been read (and the state cut, if it had to be)

    def evict(self, attn, q, t, policy):
        if t < self.prompt - 1:  # the prompt is read in full
            return
        self.cut = True
        if self.n <= self.size + 1:  # one row to drop: after the cut, or a prompt of at most size + 1 rows
            return super().evict(attn, q, t, policy)
        scores = self.scores(attn, q, t, policy)                     # (B, 1 or Hkv, n)
        B, H, n = *self.free.shape, self.n
        drop = lowest(scores, self.pos[:, :, :n], n - self.size)     # (B, Hkv, n - size)
        # keep the rest in slot order, in fresh buffers of size + 1 slots
        kept = torch.ones(B, H, n, dtype=torch.bool, device=drop.device).scatter_(-1, drop, False)
        keep = torch.arange(n, device=drop.device).expand(B, H, n)[kept].view(B, H, self.size)  # (B, Hkv, size) slots

        def gather(x):                                               # (B, Hkv, cap[, hd]) -> (B, Hkv, size + 1[, hd])
            idx = keep if x.dim() == 3 else keep[..., None].expand(-1, -1, -1, x.shape[-1])
            out = x.gather(2, idx)
            return torch.cat([out, out[:, :, :1]], 2)  # slot `size` is written by the next token
        self.k, self.v, self.pos, self.score = gather(self.k), gather(self.v), gather(self.pos), gather(self.score)
        self.prev, self.n = gather(self.prev), self.size

    def make_room(self):
        if self.n == self.k.shape[2] and not self.cut:  # the prompt's rows are all held until the cut
            return self._grow()
        super().make_room()

    def _grow(self, at_least=0):
        if not self.cut:  # room for every prompt row (MultiState._grow stops at size + 1 otherwise)
            at_least = max(at_least, min(max(2 * self.k.shape[2], 16), self.prompt))
        super()._grow(at_least)


def lowest(scores, pos, count: int) -> torch.Tensor:
    """The `count` lowest-scored slots, (B, Hkv, count), of scores (B, 1 or Hkv, n) of the rows at
    positions pos (B, Hkv, n); of equal scores the oldest row goes first (msrnn.lowest's rule)."""
    by_age = pos.argsort(dim=-1, stable=True)                         # (B, Hkv, n) slots, oldest row first
    ranked = scores.expand(pos.shape).gather(-1, by_age).sort(dim=-1, stable=True).indices  # stable: age breaks ties
    return by_age.gather(-1, ranked[..., :count])


def init_state(model: llama.Model, batch: int = 1, size: int | None = None, prompt: int = 0) -> msrnn.State:
    """msrnn.init_state in the one-shot regime for a prompt of `prompt` tokens (0: the per-step regime)."""
    guards.check_state_args(batch, size, prompt)
    state = msrnn.init_state(model, batch, size)
    if prompt:
        state.layers = [OneShot(**vars(ms), prompt=prompt) for ms in state.layers]
    return state


def run(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None, prompt: int = 0):
    """msrnn.run in the one-shot regime: logits (T, vocab) or (B, T, vocab)."""
    ids = guards.check_tokens(model, tokens)                         # (B, T)
    return msrnn.run(model, tokens, policy, size, init_state(model, ids.shape[0], size, prompt))


def masked_forward(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None, prompt: int = 0):
    """msrnn.masked_forward in the one-shot regime: (logits, state)."""
    ids = guards.check_tokens(model, tokens)                         # (B, T)
    return msrnn.masked_forward(model, tokens, policy, size, init_state(model, ids.shape[0], size, prompt))

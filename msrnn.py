"""The multi-state RNN around llama.step (Oren et al. 2024, "Transformers are Multi-State RNNs").

A layer's multi-state is a set of rows (key, value, original position). Unbounded, it gains one
row per token and the MSRNN is the transformer. Bounded to `size` rows, it is a fixed number of
slots, like any RNN's state: each step writes the new token into the slot the policy freed the
step before, attends over at most size+1 rows, then the policy frees one slot again.
A step therefore costs O(size) and never copies the state.
"""
import math
from dataclasses import dataclass

import torch

import llama


@dataclass
class Rows:
    """What a policy sees of one layer when it must drop a row. n = size + 1 rows, in slot order."""
    attn: torch.Tensor   # (B, Hkv, G, n) the current query's attention over the rows, G query heads per KV head
    pos: torch.Tensor    # (B, Hkv, n) each row's original position; the current token's is t
    score: torch.Tensor  # (B, Hkv, n) attention each row has received, summed over steps and its G heads
    keys: torch.Tensor   # (B, Hkv, n, head_dim) keys, RoPE applied
    t: int               # current position
    size: int            # rows to keep
    layer: int           # which layer (policies may treat layers differently)


@dataclass
class MultiState:
    """One layer's multi-state; rows live in slots [0, n) of fixed buffers."""
    k: torch.Tensor      # (B, Hkv, capacity, head_dim)
    v: torch.Tensor      # (B, Hkv, capacity, head_dim)
    pos: torch.Tensor    # (B, Hkv, capacity) long; -1 marks a freed slot
    score: torch.Tensor  # (B, Hkv, capacity) accumulated attention (read by H2O)
    free: torch.Tensor   # (B, Hkv) long: the slot the next token is written to
    n: int = 0           # slots in use
    size: int | None = None  # rows kept after each step; None = unbounded
    window: int | None = None  # the model's own sliding window (Mistral), if any
    layer: int = 0

    def attend(self, q, k, v, t, policy):
        """One step of a layer's multi-state: append the current token's row, attend, drop a row.
        q (B, Hkv, G, hd); k, v (B, Hkv, hd) -> attention output (B, Hkv, G, hd)."""
        K, V, pos = self.append(k, v, t)                             # (B, Hkv, n, hd), .., (B, Hkv, n)
        attn = self.attention(q, K, pos, t)                          # (B, Hkv, G, n)
        out = attn @ V                                               # (B, Hkv, G, hd)
        self.compress(attn, t, policy)  # after attending: the current token may be the one dropped
        return out

    def attention(self, q, K, pos, t):
        """Softmax attention weights of the current query over the held rows, (B, Hkv, G, n)."""
        scores = q @ K.mT / math.sqrt(q.shape[-1])                  # (B, Hkv, G, n)
        if self.window is not None:  # rows W or more steps old are invisible to the model itself
            scores = scores.masked_fill((pos <= t - self.window)[:, :, None], float("-inf"))
        return scores.softmax(-1)

    def append(self, k, v, t):
        """Write the current token's row; return the rows to attend over (keys, values, positions)."""
        if self.size is None and self.n == self.k.shape[2]:
            self._grow()  # only the unbounded state grows: doubled, so amortised O(1) per step
        if self.n < self.k.shape[2]:  # still filling: the next unused slot, the same for every head
            i, self.n = self.n, self.n + 1
            self.k[:, :, i], self.v[:, :, i], self.pos[:, :, i], self.score[:, :, i] = k, v, t, 0.0
        else:  # full: the slot the policy freed last step, which a head-wise policy chose per KV head
            slot = self.free[..., None]                              # (B, Hkv, 1)
            idx = slot[..., None].expand(-1, -1, 1, k.shape[-1])     # (B, Hkv, 1, hd)
            self.k.scatter_(2, idx, k[:, :, None])
            self.v.scatter_(2, idx, v[:, :, None])
            self.pos.scatter_(2, slot, t)
            self.score.scatter_(2, slot, 0.0)  # a new row has received no attention yet
        # slots [0, n) are all live here: the slot freed last step was just refilled
        n = self.n
        return self.k[:, :, :n], self.v[:, :, :n], self.pos[:, :, :n]

    def compress(self, attn, t, policy):
        """After attention: accumulate it, and if more than `size` rows are held, drop one."""
        n = self.n
        if self.size is None:  # unbounded: nothing to drop, nothing to score
            return
        # H2O's score: attention each row receives, summed over steps and over the KV head's G queries
        self.score[:, :, :n] += attn.sum(2)
        if n <= self.size:
            return
        rows = Rows(attn, self.pos[:, :, :n], self.score[:, :, :n], self.k[:, :, :n], t, self.size, self.layer)
        drop = policy(rows)
        B, H = self.free.shape
        # a user's policy gets a clear error rather than a silent wrong drop
        name = getattr(policy, "__name__", policy)
        if not (isinstance(drop, torch.Tensor) and drop.dtype == torch.long and drop.dim() == 2
                and drop.shape[0] == B and drop.shape[1] in (1, H)):
            got = f"{drop.dtype} {tuple(drop.shape)}" if isinstance(drop, torch.Tensor) else type(drop).__name__
            raise ValueError(f"policy {name} must return a long tensor of shape ({B}, 1) or ({B}, {H}) "
                             f"(a row per sequence, for the layer or per KV head), got {got}")
        # the dropped row's slot is where the next token goes; -1 marks it empty until then
        self.free.copy_(drop.expand(B, H))
        try:
            self.pos.scatter_(2, self.free[..., None], -1)
        except RuntimeError:  # scatter_ already checks the range 0..n-1 (n is the capacity here)
            raise ValueError(f"policy {name} chose a row outside 0..{n - 1}: {drop.tolist()}") from None

    def _grow(self):
        cap = max(2 * self.k.shape[2], 16)
        pad = lambda x, fill: torch.cat([x, x.new_full((*x.shape[:2], cap - x.shape[2], *x.shape[3:]), fill)], 2)
        self.k, self.v = pad(self.k, 0.0), pad(self.v, 0.0)
        self.pos, self.score = pad(self.pos, -1), pad(self.score, 0.0)


@dataclass
class State:
    layers: list[MultiState]  # one multi-state per layer
    t: int = 0                # position of the next token

    def __iter__(self):
        return iter(self.layers)

    @property
    def rows(self) -> int:
        """Rows held per layer and head (the same in every layer)."""
        return min(self.layers[0].n, self.layers[0].size or self.layers[0].n)


def init_state(model: llama.Model, batch: int = 1, size: int | None = None) -> State:
    """An empty multi-state per layer: `size` rows (size + 1 slots), or unbounded if size is None."""
    if size is not None and (not isinstance(size, int) or size < 1):
        raise ValueError(f"multi-state size must be a positive integer or None, got {size!r}")
    c = model.config
    cap = 16 if size is None else size + 1  # a bounded state holds size + 1 rows while it attends
    def empty(layer):
        z = torch.zeros(batch, c.n_kv_heads, cap, c.head_dim, dtype=model.dtype)
        return MultiState(k=z, v=z.clone(), pos=torch.full((batch, c.n_kv_heads, cap), -1),
                          score=torch.zeros(batch, c.n_kv_heads, cap, dtype=model.dtype),
                          free=torch.zeros(batch, c.n_kv_heads, dtype=torch.long), size=size,
                          window=c.sliding_window, layer=layer)
    return State([empty(i) for i in range(c.n_layers)])


def _check(policy, size):
    if (policy is None) != (size is None):
        raise ValueError("give both a policy and a size (a bounded MSRNN) or neither (the unbounded one); "
                         f"got policy={getattr(policy, '__name__', policy)}, size={size}")


@torch.no_grad()
def feed(model: llama.Model, tokens: torch.Tensor, state: State, policy=None) -> torch.Tensor:
    """Feed tokens (B, T) one step at a time, continuing `state` in place; logits (B, T, vocab)."""
    _check(policy, state.layers[0].size)
    if tokens.shape[0] != state.layers[0].free.shape[0]:
        raise ValueError(f"tokens have batch {tokens.shape[0]}, the state was made for {state.layers[0].free.shape[0]}")
    out = []
    for i in range(tokens.shape[1]):
        logits, _ = llama.step(model, tokens[:, i], state.t, state.layers, policy)
        state.t += 1
        out.append(logits)
    return torch.stack(out, 1)


def run(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None) -> torch.Tensor:
    """The MSRNN on tokens (T,) or (B, T): logits (T, vocab) or (B, T, vocab).

    policy=None, size=None is the unbounded MSRNN, i.e. the transformer itself.
    """
    _check(policy, size)
    single = tokens.dim() == 1
    tokens = tokens.view(1, -1) if single else tokens
    logits = feed(model, tokens, init_state(model, tokens.shape[0], size), policy)
    return logits[0] if single else logits


@torch.no_grad()
def generate(model, prompt, max_new: int, policy=None, size=None, state=None, temperature: float = 0.0,
             top_k: int | None = None, seed: int = 0):
    """Yield (B,) new tokens one at a time: greedy when temperature is 0, sampled otherwise.

    prompt: (T,) or (B, T), at least one token, fed first. Pass `state` to continue from it: its
    size and position carry on, and it is updated in place, so a caller can watch it grow.
    """
    prompt = prompt.view(1, -1) if prompt.dim() == 1 else prompt
    if state is None:
        _check(policy, size)
        state = init_state(model, prompt.shape[0], size)
    if prompt.shape[1] == 0:
        raise ValueError("generate needs at least one prompt token to condition on")
    gen = torch.Generator().manual_seed(seed)
    logits = feed(model, prompt, state, policy)[:, -1]
    for i in range(max_new):
        if temperature == 0:
            tok = logits.argmax(-1)
        else:
            logits = logits / temperature
            if top_k is not None:
                kth = logits.topk(top_k, -1).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            tok = torch.multinomial(logits.softmax(-1).float(), 1, generator=gen)[:, 0]
        yield tok
        if i + 1 < max_new:  # the last token is not fed: pass it as the prompt to continue
            logits = feed(model, tok[:, None], state, policy)[:, -1]


@torch.no_grad()
def prefill(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None):
    """`feed` for a whole sequence from an empty state, faster: (logits (B, T, vocab), state).

    Only attention carries state from one position to the next; projections, RoPE and MLPs act on
    each position alone, so they run on all positions at once (matrix-matrix products, the
    transformer's way). Attention is the multi-state: its first `size` steps drop nothing, so they
    are causal attention, computed at once; then it steps through the positions with the same
    MultiState.attend as `feed`. Logits and state are the token-by-token run's (test_policies.py).
    """
    def stepped(ms, q, k, v):                                        # q (B, Hkv, G, T, hd); k, v (B, Hkv, 1, T, hd)
        T = q.shape[3]
        f = min(size, T)  # the steps before the first drop, at once
        first = _fill(ms, q[:, :, :, :f], k[:, :, 0, :f], v[:, :, 0, :f], llama.causal_mask(model.config, f))
        # then a step per position; position-major copies make each step's slices contiguous
        q, k, v = (x[:, :, :, f:].movedim(3, 0).contiguous() for x in (q, k, v))  # (T - f, B, Hkv, G or 1, hd)
        steps = [ms.attend(q[i], k[i, :, :, 0], v[i, :, :, 0], f + i, policy) for i in range(T - f)]
        return torch.cat([first, torch.stack(steps, 3)], 3) if steps else first  # (B, Hkv, G, T, hd)
    return _parallel(model, tokens, policy, size, stepped)


@torch.no_grad()
def masked_forward(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None):
    """The transformer view of a finite MSRNN: (logits, state) for tokens (B, T).

    Each layer computes all queries and keys at once, derives row by row which keys every query
    may see under the policy (static for window/sink, from that layer's attention for H2O and TOVA:
    Oren et al. 2024, app. E), and attends under that mask with ordinary softmax attention. The
    returned state is the one the token-by-token run reaches, so generation can continue from it.
    """
    causal = llama.causal_mask(model.config, tokens.shape[1])        # (T, T) the model's own sliding window, if any

    def under_mask(ms, q, k, v):                                     # q (B, Hkv, G, T, hd); k, v (B, Hkv, 1, T, hd)
        B, H, _, T, _ = q.shape
        held = torch.zeros(B, H, 1, T, T, dtype=torch.bool)          # held[..., i, j]: row j in the state at step i
        for i in range(T):  # the policy's decisions, step by step, from this layer's attention
            K, _, pos = ms.append(k[:, :, 0, i], v[:, :, 0, i], i)   # (B, Hkv, n, hd), (B, Hkv, n)
            held[:, :, 0, i].scatter_(-1, pos, True)
            ms.compress(ms.attention(q[:, :, :, i], K, pos, i), i, policy)  # as in MultiState.attend
        if (held == held[:, :1]).all():  # a layer-wise policy: one mask for all heads is cheaper to apply
            held = held[:, :1]
        return llama.softmax_attention(q, k, v, held & causal)
    return _parallel(model, tokens, policy, size, under_mask)


FILL_BLOCK = 256  # queries _fill handles at once: its memory is O(FILL_BLOCK * size), not O(size²)


def _fill(ms, q, k, v, visible):
    """The first steps of an empty bounded multi-state, at once. Until it holds `size` rows nothing
    is dropped, so these steps are the transformer's: each query attends to every row so far under
    the model's own mask `visible` (f, f), and each row's score is the attention it received.
    q (B, Hkv, G, f, hd); k, v (B, Hkv, f, hd), f <= size. Fills the state; returns (B, Hkv, G, f, hd)."""
    f = q.shape[3]
    out = torch.empty_like(q)
    for i0 in range(0, f, FILL_BLOCK):  # a block of queries i0..i1-1, which see rows 0..i1-1 at most
        i1 = min(i0 + FILL_BLOCK, f)
        scores = q[:, :, :, i0:i1] @ k[:, :, None, :i1].mT / math.sqrt(q.shape[-1])  # (B, Hkv, G, i1 - i0, i1)
        attn = scores.masked_fill(~visible[i0:i1, :i1], float("-inf")).softmax(-1)
        out[:, :, :, i0:i1] = attn @ v[:, :, None, :i1]
        ms.score[:, :, :i1] += attn.sum((2, 3))  # summed over the KV head's G queries, as in compress
    ms.k[:, :, :f], ms.v[:, :, :f], ms.pos[:, :, :f], ms.n = k, v, torch.arange(f), f
    return out


def _parallel(model, tokens, policy, size, bounded_attention):
    """llama.forward, building each layer's multi-state as it goes; bounded_attention(ms, q, k, v)
    computes a layer's attention under a policy and fills its multi-state."""
    _check(policy, size)
    B, T = tokens.shape
    state = init_state(model, B, size)
    causal = None if model.config.sliding_window is None else llama.causal_mask(model.config, T)  # (T, T)

    def attention(layer, q, k, v):                                   # q (B, Hkv, G, T, hd); k, v (B, Hkv, 1, T, hd)
        ms = state.layers[layer]
        if policy is not None:
            return bounded_attention(ms, q, k, v)
        # unbounded: every row kept, so the state is all of k and v, and attention is the transformer's
        ms.k, ms.v = k[:, :, 0].contiguous(), v[:, :, 0].contiguous()
        ms.pos = torch.arange(T).expand(B, ms.k.shape[1], T).contiguous()
        ms.score = torch.zeros(ms.pos.shape, dtype=model.dtype)  # accumulated attention is read only by policies
        ms.n = T
        return llama.softmax_attention(q, k, v, causal)

    logits = llama.forward(model, tokens, attention)
    state.t = T
    return logits, state

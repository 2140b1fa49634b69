"""The multi-state RNN around llama.step (Oren et al. 2024, "Transformers are Multi-State RNNs").

A layer's multi-state is a set of rows (key, value, original position). Unbounded, it gains one
row per token and the MSRNN is the transformer. Bounded to `size` rows it is a finite MSRNN:
at every step the new token's row is appended, the query attends over at most size + 1
rows, and a policy scores them so that the lowest-scored row is dropped. test_equivalence.py states
the same in plain Python lists; this file keeps the rows in fixed slots, so that once the state is
full a step costs O(size) and moves no row. The policy sees `Rows`. engine/fast.py computes the
same faster, and engine/oneshot.py adds the official code's prompt regime (read in full, cut once).
"""
import math
from dataclasses import dataclass

import torch

from engine import guards
import llama


@dataclass
class Rows:
    """What a policy sees of one layer when it must drop rows, in slot order: n = size + 1 rows at a
    step (every prompt row at engine/oneshot.py's cut). B sequences, Hkv KV heads, G query heads per KV head."""
    attn: torch.Tensor   # (B, Hkv, G, n) the current query's attention over the rows
    pos: torch.Tensor    # (B, Hkv, n) each row's original position; the current token's is t
    score: torch.Tensor  # (B, Hkv, n) attention each row has received, summed over steps and its G heads
    keys: torch.Tensor   # (B, Hkv, n, hd) keys, RoPE applied
    values: torch.Tensor  # (B, Hkv, n, hd) values
    query: torch.Tensor  # (B, Hkv, G, hd) the current token's queries, RoPE applied
    prev: torch.Tensor   # (B, Hkv, n) the scores this policy gave each row at its last call in this layer,
                         # NaN for a row added since: a policy may be recurrent
    t: int               # current position
    size: int            # rows to keep
    layer: int           # which layer (policies may treat layers differently)


def lowest(scores, pos):
    """The slot whose row is dropped in each sequence and KV head, (B, Hkv), from the policy's scores
    (B, 1 or Hkv, n) of the rows at positions pos (B, Hkv, n): the lowest score, and of equal lowest
    scores the oldest row. A slot says nothing about age once rows have been dropped, a position
    does: so a constant score is Window, in every view (the tie rule of policies.py's contract)."""
    scores = scores.expand(pos.shape)
    tied = scores == scores.amin(-1, keepdim=True)                   # (B, Hkv, n) the lowest, maybe several
    return pos.masked_fill(~tied, torch.iinfo(pos.dtype).max).argmin(-1)


@dataclass
class MultiState:
    """One layer's multi-state: its rows live in slots [0, n) of fixed buffers, in slot order (not
    position order). Bounded, it ends at size + 1 slots: at each step the new token's row is written
    (`append`) into the slot the policy emptied at the last step (`free`, its pos -1), so a full
    state never moves a row. With size 3:

        after t=3:  pos [0, 1, 2, 3]    4 = size + 1 slots in use; the policy drops position 1
                    pos [0, -1, 2, 3]   free = 1
        at t=4:     pos [0, 4, 2, 3]    row 4 takes slot 1; the policy drops position 0
                    pos [-1, 4, 2, 3]   free = 0, for row 5
    """
    k: torch.Tensor      # (B, Hkv, capacity, head_dim)
    v: torch.Tensor      # (B, Hkv, capacity, head_dim)
    pos: torch.Tensor    # (B, Hkv, capacity) long; -1 marks a freed slot
    score: torch.Tensor  # (B, Hkv, capacity) attention received so far (Rows.score, read by H2O)
    prev: torch.Tensor   # (B, Hkv, capacity) the policy's scores at its last call (Rows.prev); NaN: none yet
    free: torch.Tensor   # (B, Hkv) long: the slot the next token is written to once the state is full
    n: int = 0           # slots in use
    size: int | None = None  # rows kept after each step; None = unbounded
    window: int | None = None  # the model's own sliding window (Mistral), if any
    layer: int = 0

    def attend(self, q, k, v, t, policy):
        """One step of a layer's multi-state: append the current token's row, attend, drop a row.
        q (B, Hkv, G, hd); k, v (B, Hkv, hd) -> attention output (B, Hkv, G, hd)."""
        K, V, pos = self.append(k, v, t)                             # (B, Hkv, n, hd), .., (B, Hkv, n)
        attn = self.attention(q / math.sqrt(q.shape[-1]) @ K.mT, pos, t)  # (B, Hkv, G, n)
        out = attn.to(V.dtype) @ V                                   # (B, Hkv, G, hd)
        self.keep(attn, q, t, policy)
        return out

    def attention(self, scores, pos, t):
        """Softmax attention weights of the current query over the held rows, from its scores q·k/√hd
        (B, Hkv, G, n), in float32 at least (llama.wide): the policies read them."""
        if self.window is not None:  # rows W or more steps old are invisible to the model itself
            scores = scores.masked_fill((pos <= t - self.window)[:, :, None], float("-inf"))
        return scores.softmax(-1, dtype=llama.wide(scores.dtype))

    def keep(self, attn, q, t, policy):
        """After attending (so that the current token may be the one dropped): add to each row's score
        the attention it received, summed over the KV head's G queries; then let the policy drop."""
        if self.size is not None:  # an unbounded state never drops, so it needs no scores
            self.score[:, :, :self.n] += attn.sum(2)
            self.evict(attn, q, t, policy)

    def evict(self, attn, q, t, policy):
        """Once the state holds size + 1 rows, let the policy score them and drop the lowest: its slot
        is where the next token goes, and -1 marks it empty until then."""
        if self.n <= self.size:
            return
        scores = self.scores(attn, q, t, policy)                     # (B, 1 or Hkv, n)
        self.free.copy_(lowest(scores, self.pos[:, :, :self.n]))
        self.pos[self._slots()] = -1

    def scores(self, attn, q, t, policy):
        """The policy's scores of the n held rows, (B, 1 or Hkv, n), kept for its next call (Rows.prev)."""
        n = self.n
        rows = Rows(attn=attn, pos=self.pos[:, :, :n], score=self.score[:, :, :n], keys=self.k[:, :, :n],
                    values=self.v[:, :, :n], query=q, prev=self.prev[:, :, :n], t=t, size=self.size, layer=self.layer)
        with guards.policy_call(policy, rows):                       # names a policy that raises or writes into rows
            scores = policy(rows)                                    # (B, 1 or Hkv, n)
        guards.check_scores(policy, rows, scores)                    # a float (B, 1 or Hkv, n), no NaN
        self.prev[:, :, :n] = scores.expand(*self.free.shape, n)
        return scores

    # ---- where a row is written: the slots (speed and memory, not the paper; the list reference appends)

    def append(self, k, v, t):
        """Write the current token's row; return the rows to attend over (keys, values, positions).

        The slot invariant, which attend and evict rely on: while a state fills, slots [0, n) hold its
        rows and the next row goes to slot n. Once a bounded state is full (size + 1 slots), between
        steps every slot holds a row except one per sequence and KV head, `free`, which the policy
        emptied at the last step (its pos is -1); the next token's row is written there. So during a
        step all n slots hold rows. Which slot holds which row depends on the history of drops (the
        class's docstring draws one)."""
        self.make_room()
        if self.n < self.k.shape[2]:  # still filling: the next unused slot, the same for every head
            i, self.n = self.n, self.n + 1
            self.k[:, :, i:i + 1], self.v[:, :, i:i + 1] = k[:, :, None], v[:, :, None]
            self.pos[:, :, i:i + 1], self.score[:, :, i:i + 1], self.prev[:, :, i:i + 1] = t, 0.0, math.nan
        else:  # full: the slot the policy freed last step, chosen per KV head by a head-wise policy
            slot = self._slots()                                     # [b, h, free[b, h]] for every (b, h)
            self.k[slot], self.v[slot], self.pos[slot] = k, v, t
            self.score[slot], self.prev[slot] = 0.0, math.nan  # a new row: no attention yet, never scored
        n = self.n  # by the invariant, all n slots hold rows now
        return self.k[:, :, :n], self.v[:, :, :n], self.pos[:, :, :n]

    def _slots(self):
        """An index for the slot `free` names in each (sequence, KV head): x[self._slots()] is (B, Hkv, ...)."""
        B, H = self.free.shape
        return torch.arange(B, device=self.free.device)[:, None], torch.arange(H, device=self.free.device), self.free

    def make_room(self):
        """Grow the buffers if the next row would find no free slot (`_grow`)."""
        if self.n == self.k.shape[2] and (self.size is None or self.n <= self.size):
            self._grow()

    def _grow(self, at_least=0):
        """Copy the rows into buffers of twice the slots (amortised O(1) a row); a bounded state stops
        at size + 1 slots, allocated as it fills, so a large size costs nothing on a short text."""
        cap = max(2 * self.k.shape[2], 16, at_least)
        if self.size is not None:
            cap = max(at_least, min(cap, self.size + 1))
        B, H, _, hd = self.k.shape
        # a slot: its key and value, and pos, score, prev of 8 bytes at most each
        guards.check_memory(B * H * cap * (2 * hd * self.k.element_size() + 24), f"a multi-state of {cap} rows")
        pad = lambda x, fill: torch.cat([x, x.new_full((*x.shape[:2], cap - x.shape[2], *x.shape[3:]), fill)], 2)
        self.k, self.v = pad(self.k, 0.0), pad(self.v, 0.0)
        self.pos, self.score, self.prev = pad(self.pos, -1), pad(self.score, 0.0), pad(self.prev, math.nan)


@dataclass
class State:
    """The MSRNN's whole state: a multi-state per layer, and the next token's position (llama.step advances
    it; the views that read a text at once, the guards' rollback and the benchmarks set it too)."""
    layers: list[MultiState]  # one multi-state per layer
    t: int = 0                # position of the next token

    def __iter__(self):
        return iter(self.layers)

    @property
    def n_rows(self) -> int:
        """Rows held per layer and KV head (the same in every layer): the slots not marked empty (pos -1)."""
        return int((self.layers[0].pos[0, 0, :self.layers[0].n] >= 0).sum())  # a prompt not yet cut: all of it


def state_bytes(model: llama.Model, rows: int) -> int:
    """Bytes of keys and values that one sequence holds with `rows` rows per layer and KV head (Table 1)."""
    c = model.config
    return 2 * c.n_layers * c.n_kv_heads * rows * c.head_dim * model.embed.element_size()


def init_state(model: llama.Model, batch: int = 1, size: int | None = None) -> State:
    """An empty multi-state per layer: `size` rows (size + 1 slots), or unbounded if size is None."""
    guards.check_state_args(batch, size, model=model)
    c = model.config
    # slots are allocated as rows arrive (MultiState._grow); a bounded state ends at size + 1 slots,
    # since it holds size + 1 rows while it attends
    cap = 16 if size is None else min(size + 1, 16)
    def empty(layer):
        z = torch.zeros(batch, c.n_kv_heads, cap, c.head_dim, dtype=model.dtype, device=model.device)
        wide = torch.zeros(batch, c.n_kv_heads, cap, dtype=llama.wide(model.dtype), device=model.device)
        return MultiState(k=z, v=z.clone(), pos=torch.full((batch, c.n_kv_heads, cap), -1, device=model.device),
                          score=wide, prev=wide.clone().fill_(math.nan),
                          free=torch.zeros(batch, c.n_kv_heads, dtype=torch.long, device=model.device), size=size,
                          window=c.sliding_window, layer=layer)
    return State([empty(i) for i in range(c.n_layers)])


@torch.no_grad()
def feed(model: llama.Model, tokens: torch.Tensor, state: State, policy=None) -> torch.Tensor:
    """Feed tokens (B, T) one step at a time, continuing `state` in place; logits (B, T, vocab)."""
    guards.check_multistate(state)
    guards.check_policy(policy, state.layers[0].size)
    tokens = guards.check_tokens(model, tokens, dims=(2,))           # on the model's device
    guards.check_batch(tokens, state)
    guards.check_positions(model, state.t + tokens.shape[1])
    logits = torch.stack([llama.step(model, tokens[:, i], state, policy) for i in range(tokens.shape[1])], 1)
    return logits                                    # checked finite in llama.step's guard (all_or_nothing)


def run(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None, state=None):
    """The MSRNN on tokens (T,) or (B, T): logits (T, vocab) or (B, T, vocab).

    policy=None, size=None is the unbounded MSRNN, i.e. the transformer itself. state: a state to go on
    from instead of init_state's empty one (engine/oneshot.py passes its own; the tokens follow its t).
    """
    if state is not None:  # a multi-state, of the size asked for (size=None takes the state's)
        guards.check_multistate(state, "any" if size is None else size)
    guards.check_policy(policy, size if state is None else state.layers[0].size)
    ids = guards.check_tokens(model, tokens)                         # (B, T) on the model's device
    logits = feed(model, ids, init_state(model, ids.shape[0], size) if state is None else state, policy)
    return logits[0] if tokens.dim() == 1 else logits


@torch.no_grad()
def generate(model, prompt, max_new: int, policy=None, size=None, state=None, temperature: float = 0.0,
             top_k: int | None = None, seed: int = 0, step=llama.step):
    """Yield (B,) new tokens one at a time: greedy when temperature is 0, sampled otherwise.

    prompt: (T,) or (B, T), at least one token, fed first, one step at a time (fast.generate reads it
    at once, or in full before one cut with regime="full"). Pass `state` to continue from it
    instead: its size and position carry on, and it is updated in place, so a caller can watch it
    grow. step: llama.step, or one with its signature (fast.compiled_step()).
    """
    prompt = guards.check_tokens(model, prompt)                      # (B, T)
    guards.check_sampling(model, max_new, temperature, top_k, seed, "step", state, size, step)
    if state is None:
        guards.check_policy(policy, size)
        state = init_state(model, prompt.shape[0], size)
    guards.check_positions(model, state.t + prompt.shape[1] + max_new)
    # the random numbers come from the model's device (meta tensors, tests/test_devices.py, have none to give)
    gen = torch.Generator(model.device).manual_seed(seed) if model.device.type != "meta" else None
    logits = feed(model, prompt, state, policy)[:, -1]
    for i in range(max_new):
        if temperature == 0:
            tok = logits.argmax(-1)
        else:
            logits = logits.to(llama.wide(logits.dtype)) / temperature
            if top_k is not None:
                kth = logits.topk(top_k, -1).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            tok = torch.multinomial(logits.softmax(-1), 1, generator=gen)[:, 0]
        yield tok
        if i + 1 < max_new:  # the last token is not fed: pass it as the prompt to continue
            logits = guards.step_logits(step, state.t, step(model, tok, state, policy), model, state, len(tok))


# ---------------------------------------------------------------- the transformer view of a finite MSRNN

@torch.no_grad()
def masked_forward(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None, state=None):
    """The transformer view of a finite MSRNN, as the paper's experiments run one: (logits, state) for tokens
    (B, T) or (T,), logits shaped as llama.forward's. state: a fresh one to fill (init_state's), or none.

    Each layer computes all queries and keys at once, derives row by row which keys every query may
    see under the policy (`held_mask`: the recurrence's own drops, whatever the policy), and attends
    under that mask with ordinary softmax attention. The returned state is the one the token-by-token
    run reaches, so generation can continue from it.
    """
    guards.check_policy(policy, size)
    ids = guards.check_tokens(model, tokens)                         # (B, T) on the model's device
    if state is not None:
        guards.check_fresh_state(model, state, size, ids)
    state = init_state(model, ids.shape[0], size) if state is None else state
    causal = llama.causal_mask(ids.shape[1], model.config.sliding_window, model.device)  # (T, T) the model's own mask

    def attention(i, q, k, v):                                       # q (B, Hkv, G, T, hd); k, v (B, Hkv, 1, T, hd)
        return llama.softmax_attention(q, k, v, held_mask(state.layers[i], q, k, v, policy) & causal)
    logits = llama.forward(model, tokens, attention)                  # (checked finite there)
    state.t = ids.shape[1]
    return logits, state


def held_mask(ms: MultiState, q, k, v, policy) -> torch.Tensor:
    """held[b, h, 0, i, j]: whether row j is in the multi-state when query i attends, (B, Hkv or 1, 1, T, T).
    The mask is the recurrence's own output: this runs MultiState.attend step by step over the layer's
    queries and keys (computed at once) and records which rows each step held. Attention under it is
    then ordinary softmax attention: a finite MSRNN is the transformer under this mask."""
    B, Hkv, G, T, _ = q.shape
    # this mask, and per query head softmax_attention's copy of it and the float mask SDPA makes of that
    guards.check_memory(B * Hkv * T * (T + 1) + B * Hkv * G * T * T * (1 + q.element_size()), f"the masks of {T} tokens")
    out = torch.zeros(B, Hkv, 1, T, T + 1, dtype=torch.bool, device=q.device)  # column T collects freed slots (pos -1)
    for i in range(T):
        live = ms.pos[:, :, :ms.n]                                   # (B, Hkv, n): the rows kept after step i - 1
        out[:, :, 0, i].scatter_(-1, live.where(live >= 0, T), True)
        out[:, :, 0, i, i] = True                                    # and the current token
        ms.attend(q[:, :, :, i], k[:, :, 0, i], v[:, :, 0, i], i, policy)
    out = out[..., :T]
    # a layer-wise policy: one mask is cheaper to apply (meta tensors, tests/test_devices.py, have no values to compare)
    return out[:, :1] if out.device.type != "meta" and (out == out[:, :1]).all() else out

"""Parts 2, 3, 5 and 6 of the course (course/README.md): `MultiState.append`, `attention` and
`attend` (part 2); `lowest`, `keep`, `evict`, `scores` and append's full branch (part 3); `held_mask` and
`masked_forward` (part 5); `state_bytes` (part 6).

The multi-state RNN around llama.step (Oren et al. 2024, "Transformers are Multi-State RNNs").

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
    """Part 3. The slot whose row is dropped in each sequence and KV head, (B, Hkv) long, from the
    policy's scores (B, 1 or Hkv, n) of the rows at positions pos (B, Hkv, n): the lowest score, and
    of equal lowest scores the oldest row (the smallest pos, not the earliest slot: once rows have
    been dropped a slot says nothing about age), so that a constant score is Window."""
    raise NotImplementedError


@dataclass
class MultiState:
    """One layer's multi-state: its rows live in slots [0, n) of fixed buffers.

    The slot invariant, which append, attend and evict rely on: while a state fills, slots [0, n)
    hold its rows and the next row goes to slot n. Once a bounded state is full (size + 1 slots),
    between steps every slot holds a row except one per sequence and KV head, `free`, which the
    policy emptied at the last step (its pos is -1); the next token's row is written there. So during
    a step all n slots hold rows, and a full state never moves a row. Which slot holds which row
    depends on the history of drops: rows are in slot order, not position order.
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
        """Part 2. One step of a layer's multi-state: append the current token's row, attend, drop.
        q (B, Hkv, G, hd); k, v (B, Hkv, hd) -> attention output (B, Hkv, G, hd).

        append (k, v) at position t; the scores q·k/√hd of the queries against every held key;
        attention weights from `attention` (float32 at least); the output is those weights, cast
        to the values' dtype, times the values; then self.keep(attn, q, t, policy), which drops a row if the
        state is bounded (part 3), and return the output."""
        raise NotImplementedError

    def attention(self, scores, pos, t):
        """Part 2. Softmax attention weights of the current query over the held rows, from its
        scores q·k/√hd (B, Hkv, G, n), in float32 at least (llama.wide): the policies read them.
        With Mistral's sliding window (self.window), rows `window` or more steps old (pos <= t - window)
        get no weight."""
        raise NotImplementedError

    def keep(self, attn, q, t, policy):
        """Part 3. After attending (so that the current token may be the one dropped): add to each
        held row's score (self.score) the attention it received, summed over the KV head's G queries;
        then let the policy drop (evict). An unbounded state keeps no scores and drops nothing."""
        if self.size is None:  # an unbounded state keeps no scores and drops nothing
            return
        raise NotImplementedError

    def evict(self, attn, q, t, policy):
        """Part 3. Once the state holds size + 1 rows, score them (self.scores) and drop the lowest in
        each sequence (and KV head, for a head-wise policy's (B, Hkv, n) scores): its slot becomes
        self.free, where the next token goes, and its pos becomes -1 until then. Which slot: `lowest`
        (policies.py's tie rule)."""
        raise NotImplementedError

    def scores(self, attn, q, t, policy):
        """Part 3. The policy's scores of the n held rows, (B, 1 or Hkv, n): build the Rows it sees
        (slots 0 .. n-1 of every buffer), call the policy inside `with guards.policy_call(policy, rows):`
        and check what it returned with guards.check_scores(policy, rows, scores) (guards.score_rows
        does both), and keep the scores, expanded to (B, Hkv, n), in self.prev for its next call
        (Rows.prev)."""
        raise NotImplementedError

    # ---- where a row is written: the slots (speed and memory, not the paper; the list reference appends)

    def append(self, k, v, t):
        """Parts 2 and 3. Write the current token's row (k, v (B, Hkv, hd) at position t); return the
        rows to attend over: keys, values (B, Hkv, n, hd) and positions (B, Hkv, n).

        First self.make_room() (given: it grows the buffers when needed). Part 2, while the state
        fills (n below the capacity self.k.shape[2]): the row goes to slot n, the same for every head,
        and n grows by one; its pos is t, its score 0, its prev NaN. Part 3, once a bounded state is
        full: the row goes to the slot the policy freed at the last step, self.free[b, h] in each
        sequence and KV head (self._slots() indexes it), again with score 0 and prev NaN. Never copy
        or reallocate the buffers here."""
        raise NotImplementedError

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
        guards.check_memory(B * H * cap * (2 * hd * self.k.element_size() + 24), f"a multi-state of {cap} rows")
        pad = lambda x, fill: torch.cat([x, x.new_full((*x.shape[:2], cap - x.shape[2], *x.shape[3:]), fill)], 2)
        self.k, self.v = pad(self.k, 0.0), pad(self.v, 0.0)
        self.pos, self.score, self.prev = pad(self.pos, -1), pad(self.score, 0.0), pad(self.prev, math.nan)


@dataclass
class State:
    """The MSRNN's whole state: a multi-state per layer, and the position of the next token, which
    llama.step advances (nothing else writes it but the views that read a text at once)."""
    layers: list[MultiState]  # one multi-state per layer
    t: int = 0                # position of the next token

    def __iter__(self):
        return iter(self.layers)

    @property
    def n_rows(self) -> int:
        """Rows held per layer and KV head (the same in every layer): the slots not marked empty (pos -1)."""
        return int((self.layers[0].pos[0, 0, :self.layers[0].n] >= 0).sum())  # a prompt not yet cut: all of it


def state_bytes(model: llama.Model, rows: int) -> int:
    """Part 6. Bytes of keys and values that one sequence holds with `rows` rows per layer and KV
    head (the paper's Table 1): every layer, every KV head, a key and a value of head_dim elements
    of the model's dtype each."""
    raise NotImplementedError


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

    policy=None, size=None is the unbounded MSRNN, i.e. the transformer itself. state: an empty
    state to start from instead of init_state's (engine/oneshot.py passes its own).
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
    """Part 5. The transformer view of a finite MSRNN, as the paper runs one: (logits, state)
    for tokens (B, T) or (T,), logits shaped as llama.forward's. state: a fresh one to fill (init_state's), or none.

    Check the policy and tokens as run does, start from init_state (or the given state), and run
    llama.forward with an attention that, in layer i, applies softmax_attention under
    held_mask(state.layers[i], ...) and the model's own causal mask. Set state.t to T and return
    the logits and the state, which is then the one the token-by-token run reaches."""
    raise NotImplementedError


def held_mask(ms: MultiState, q, k, v, policy) -> torch.Tensor:
    """Part 5. held[b, h, 0, i, j]: whether row j is in the multi-state when query i attends,
    (B, Hkv or 1, 1, T, T), bool. q (B, Hkv, G, T, hd), k, v (B, Hkv, 1, T, hd) of one layer.

    The mask is the recurrence's own output: for i = 0 .. T-1, record the rows ms holds before
    step i (their positions, ms.pos[:, :, :ms.n], -1 for a freed slot) and the current token i
    itself, then run ms.attend on query i, key i and value i at position i. Returning the first KV
    head's mask alone, (B, 1, 1, T, T), when every head's is the same is optional: one mask per
    layer is cheaper to apply, and softmax_attention takes either shape."""
    raise NotImplementedError

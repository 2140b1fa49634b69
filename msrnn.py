"""The multi-state RNN around llama.step (Oren et al. 2024, "Transformers are Multi-State RNNs").

A layer's multi-state is a set of rows (key, value, original position). Unbounded, it gains one
row per token and the MSRNN is the transformer. Bounded to `size` rows, it is a fixed number of
slots, like any RNN's state: each step writes the new token into the slot the policy freed the
step before, attends over at most size+1 rows, then the policy frees one slot again.
A step therefore costs O(size) and never copies the state.

A policy scores the held rows; the state drops the lowest-scored row at every step (the paper's
MSRNN, the default), or, in the one-shot regime of the official TOVA code and kvpress, reads a
prompt with full attention and keeps the `size` best rows once, after its last token.
"""
import functools
import inspect
import math
import os
import shutil
import traceback
import warnings
from dataclasses import dataclass

import torch

import llama


@dataclass
class Rows:
    """What a policy sees of one layer when it must drop rows, in slot order: n = size + 1 rows at a
    step, or every prompt row at a one-shot cut."""
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
    oneshot: int = 0     # the first `oneshot` tokens are read in full, then cut to `size` once; 0 = per step

    def attend(self, q, k, v, t, policy):
        """One step of a layer's multi-state: append the current token's row, attend, drop a row.
        q (B, Hkv, G, hd); k, v (B, Hkv, hd) -> attention output (B, Hkv, G, hd)."""
        K, V, pos = self.append(k, v, t)                             # (B, Hkv, n, hd), .., (B, Hkv, n)
        attn = self.attention(q / math.sqrt(q.shape[-1]) @ K.mT, pos, t)  # (B, Hkv, G, n)
        out = attn.to(V.dtype) @ V                                   # (B, Hkv, G, hd)
        self.keep(attn, t, policy)
        return out

    def attention(self, scores, pos, t):
        """Softmax attention weights of the current query over the held rows, from its scores q·k/√hd
        (B, Hkv, G, n), in float32 at least (llama.wide): the policies read them."""
        if self.window is not None:  # rows W or more steps old are invisible to the model itself
            scores = scores.masked_fill((pos <= t - self.window)[:, :, None], float("-inf"))
        return scores.softmax(-1, dtype=self.score.dtype)

    def keep(self, attn, t, policy):
        """After attending (so that the current token may be the one dropped): add to each row's score
        the attention it received, H2O's score, summed over the KV head's G queries; then let the
        policy drop a row if more than `size` remain."""
        if self.size is not None:
            self.score[:, :, :self.n] += attn.sum(2)
            self.evict(attn, t, policy)

    def append(self, k, v, t):
        """Write the current token's row; return the rows to attend over (keys, values, positions)."""
        self.make_room(t)
        if self.n < self.k.shape[2]:  # still filling: the next unused slot, the same for every head
            i, self.n = self.n, self.n + 1
            # written as slices i:i+1, so that torch.compile follows a changing i rather than recompiling for each
            self.k[:, :, i:i + 1], self.v[:, :, i:i + 1] = k[:, :, None], v[:, :, None]
            self.pos[:, :, i:i + 1], self.score[:, :, i:i + 1] = t, 0.0
        else:  # full: the slot the policy freed last step, which a head-wise policy chose per KV head
            # (indexing rather than scatter_, which torch.compile makes a copy of the whole buffer)
            slot = self._slots()                                     # [b, h, free[b, h]] for every (b, h)
            self.k[slot], self.v[slot], self.pos[slot] = k, v, t
            self.score[slot] = 0.0  # a new row has received no attention yet
        # slots [0, n) are all live here: the slot freed last step was just refilled
        n = self.n
        return self.k[:, :, :n], self.v[:, :, :n], self.pos[:, :, :n]

    def evict(self, attn, t, policy):
        """Let the policy score the rows and drop the lowest: one per step, or at the last prompt step
        of the one-shot regime all but the `size` best. Ties go against the earlier slot."""
        n = self.n
        if n <= self.size or t < self.oneshot - 1:
            return
        scores = score_rows(policy, Rows(attn, self.pos[:, :, :n], self.score[:, :, :n], self.k[:, :, :n], t,
                                         self.size, self.layer))  # (B, 1 or Hkv, n)
        B, H = self.free.shape
        if n > self.size + 1:  # the one-shot cut
            return self._cut(lowest(scores, n - self.size).expand(B, H, -1))  # (B, Hkv, n - size)
        # the dropped row's slot is where the next token goes; -1 marks it empty until then. (argmin is
        # lowest(scores, 1), written out: torch.compile would learn n == size + 1 from the count, which
        # its code generation fails on once the size varies.)
        self.free.copy_(scores.argmin(-1).expand(B, H))
        self.pos[self._slots()] = -1

    def _slots(self):
        """An index for the slot `free` names in each (sequence, KV head): x[self._slots()] is (B, Hkv, ...)."""
        B, H = self.free.shape
        return torch.arange(B, device=self.free.device)[:, None], torch.arange(H, device=self.free.device), self.free

    FILL_BLOCK = 64  # queries `fill` handles at once: memory O(FILL_BLOCK * size), not O(size²); of 16-256, fastest here

    def fill(self, q, k, v, policy):
        """The first f steps of an empty multi-state, at once: q (B, Hkv, G, f, hd), k, v (B, Hkv, f, hd)
        -> attention output (B, Hkv, G, f, hd). Until it holds `size` rows (and before a one-shot prompt
        ends) nothing is dropped, so these steps are the transformer's: each query attends to every row
        so far, under the model's own mask, and each row's score is the attention it received."""
        f = q.shape[3]
        if f >= self.k.shape[2]:
            self._grow(f + 1)  # room for the next step's row too: a bounded state ends at size + 1 slots
        self.k[:, :, :f], self.v[:, :, :f], self.pos[:, :, :f], self.n = k, v, torch.arange(f, device=k.device), f
        visible = llama.causal_mask(f, self.window, k.device)         # (f, f)
        if self.size is None:  # no scores to keep: the fused kernel (None is its own causal mask)
            return llama.softmax_attention(q, k[:, :, None], v[:, :, None], None if self.window is None else visible)
        B, H, G, _, hd = q.shape
        out = torch.empty_like(q)
        for i0 in range(0, f, self.FILL_BLOCK):  # a block of queries i0..i1-1, which see rows 0..i1-1 at most
            i1 = min(i0 + self.FILL_BLOCK, f)
            qb = q[:, :, :, i0:i1].reshape(B, H, G * (i1 - i0), hd)   # (B, Hkv, G b, hd): G heads share a KV head
            scores = (qb / math.sqrt(hd) @ k[:, :, :i1].mT).view(B, H, G, i1 - i0, i1)  # (B, Hkv, G, b, i1)
            attn = scores.masked_fill(~visible[i0:i1, :i1], float("-inf")).softmax(-1, dtype=self.score.dtype)
            o = attn.to(v.dtype).view(B, H, G * (i1 - i0), i1) @ v[:, :, :i1]  # (B, Hkv, G b, hd)
            out[:, :, :, i0:i1] = o.view(B, H, G, i1 - i0, hd)
            self.score[:, :, :i1] += attn.sum((2, 3))  # summed over the KV head's G queries, as in attend
        self.evict(attn[:, :, :, -1], f - 1, policy)  # the one-shot cut, when the prompt ends here
        return out

    STEP_BLOCK = 64  # steps `attend_block` takes at once; of 16, 64 and 256, fastest here

    def attend_block(self, q, k, v, t, policy, step=None):
        """The steps at positions t .. t+b-1 when all their queries are known ahead (prefill): what
        `attend` gives at each in turn, but the held keys and values are read once for the block
        rather than at every step. A large state then costs two matrix-matrix products per block, not
        its whole memory traffic per step. q (B, Hkv, G, b, hd); k, v (B, Hkv, b, hd) -> (B, Hkv, G, b, hd).
        The state must have its size + 1 slots already, as `fill` leaves them (the block cannot grow it);
        step: scored_step, or it compiled."""
        B, H, G, b, hd = q.shape
        n0 = self.n
        K = torch.cat([self.k[:, :, :n0], k], 2)                     # (B, Hkv, n0 + b, hd): every row the block
        V = torch.cat([self.v[:, :, :n0], v], 2)                     # can see, the held ones, then the new ones
        S = (q.reshape(B, H, G * b, hd) / math.sqrt(hd) @ K.mT).view(B, H, G, b, n0 + b)  # (B, Hkv, G, b, n0 + b)
        col = torch.arange(self.k.shape[2], device=q.device).repeat(B, H, 1)  # (B, Hkv, slots): the row of K in each
        step, attn = step or MultiState.scored_step, []
        for j in range(b):
            a, col = step(self, S[:, :, :, j], k[:, :, j], v[:, :, j], t + j, n0 + j, col, policy)
            attn.append(a)
        A = torch.stack(attn, 3).to(V.dtype).view(B, H, G * b, n0 + b)  # (B, Hkv, G, b, n0 + b) -> (B, Hkv, G b, n0 + b)
        return (A @ V).view(B, H, G, b, hd)                          # (B, Hkv, G b, hd) -> (B, Hkv, G, b, hd)

    def scored_step(self, S, k, v, t, c, col, policy):
        """One step of attend_block: `attend`, with the query's scores read from S (B, Hkv, G, n0 + b), its
        scores against the block's rows, rather than computed from the keys. col (B, Hkv, slots): which
        row of the block each slot holds; the row written now is row c. -> (the attention spread over
        the block's rows (B, Hkv, G, n0 + b), col)."""
        _, _, pos = self.append(k, v, t)                             # (B, Hkv, n)
        col = col.masked_fill(self.pos == t, c)                      # the slot just written holds row c
        idx = col[:, :, None, :self.n].expand(-1, -1, S.shape[2], -1)  # (B, Hkv, G, n)
        attn = self.attention(S.gather(-1, idx), pos, t)             # (B, Hkv, G, n)
        self.keep(attn, t, policy)
        return torch.zeros_like(S, dtype=attn.dtype).scatter(-1, idx, attn), col

    def _cut(self, drop):
        """Drop slots `drop` (B, Hkv, n - size); keep the rest in slot order, in fresh buffers of size + 1 slots."""
        B, H, n = *drop.shape[:2], self.n
        kept = torch.ones(B, H, n, dtype=torch.bool, device=drop.device).scatter_(-1, drop, False)
        keep = torch.arange(n, device=drop.device).expand(B, H, n)[kept].view(B, H, self.size)  # (B, Hkv, size) slot indices
        def gather(x):                                               # (B, Hkv, cap[, hd]) -> (B, Hkv, size + 1[, hd])
            idx = keep if x.dim() == 3 else keep[..., None].expand(-1, -1, -1, x.shape[-1])
            out = x.gather(2, idx)
            return torch.cat([out, out[:, :, :1]], 2)  # slot `size` is written by the next token
        self.k, self.v, self.pos, self.score = gather(self.k), gather(self.v), gather(self.pos), gather(self.score)
        self.n = self.size

    def make_room(self, t):
        """Grow the buffers if the row of position t would find no free slot: doubled, amortised O(1);
        a bounded state stops at size + 1 slots (after a one-shot prompt)."""
        if self.n == self.k.shape[2] and (self.size is None or self.n <= self.size or t < self.oneshot):
            self._grow()

    def _grow(self, at_least=0):
        cap = max(2 * self.k.shape[2], 16, at_least)
        if self.size is not None and self.n < self.oneshot:  # a one-shot prompt: every row until the cut
            cap = max(at_least, min(cap, self.oneshot))
        elif self.size is not None:  # allocated as it fills, so a large size costs nothing on a short text
            cap = max(at_least, min(cap, self.size + 1))
        B, H, _, hd = self.k.shape
        llama.check_memory(B * H * cap * (2 * hd * self.k.element_size() + 16), f"a multi-state of {cap} rows")
        pad = lambda x, fill: torch.cat([x, x.new_full((*x.shape[:2], cap - x.shape[2], *x.shape[3:]), fill)], 2)
        self.k, self.v = pad(self.k, 0.0), pad(self.v, 0.0)
        self.pos, self.score = pad(self.pos, -1), pad(self.score, 0.0)


def lowest(scores, count: int) -> torch.Tensor:
    """The `count` lowest-scored slots of scores (B, h, n), (B, h, count); ties go against the earlier slot."""
    if count == 1:  # the per-step drop: cheaper than a sort
        return scores.argmin(-1, keepdim=True)
    return scores.sort(dim=-1, stable=True).indices[..., :count]


class PolicyError(ValueError):
    """A policy raised, or returned something other than a score per row."""


def score_rows(policy, rows: Rows) -> torch.Tensor:
    """policy(rows), checked: a float tensor (B, 1, n) for the layer or (B, Hkv, n) per KV head.
    An exception inside the policy is reported at its own file and line, not in this module."""
    try:
        scores = policy(rows)
    except Exception as e:
        err = PolicyError(f"policy {policy_name(policy)} raised {type(e).__name__}: {e} {_where(policy, e)}")
        err.original = e  # what the policy raised (the checker tells a refusal, ValueError, from a crash)
        raise err from None
    B, H, n = rows.pos.shape
    if not (isinstance(scores, torch.Tensor) and scores.dtype.is_floating_point and scores.dim() == 3
            and scores.shape[0] == B and scores.shape[1] in (1, H) and scores.shape[2] == n):
        got = f"{scores.dtype} {tuple(scores.shape)}" if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise PolicyError(f"policy {policy_name(policy)} must return a float tensor of scores, shape ({B}, 1, {n}) "
                          f"for the layer or ({B}, {H}, {n}) per KV head (the lowest is dropped); got {got}")
    return scores


def policy_name(policy) -> str:
    return getattr(policy, "__name__", None) or getattr(getattr(policy, "func", None), "__name__", repr(policy))


def _where(policy, e) -> str:
    """'at file:line: code' for the innermost frame in the policy's own file (else the innermost)."""
    fn = inspect.unwrap(policy)
    try:
        home = inspect.getsourcefile(getattr(fn, "func", fn))
    except TypeError:
        home = None
    frames = traceback.extract_tb(e.__traceback__)[1:]  # [0] is score_rows itself
    mine = [f for f in frames if f.filename == home] or frames
    return f"(at {mine[-1].filename}:{mine[-1].lineno}: {mine[-1].line})" if mine else ""


@dataclass
class State:
    """The MSRNN's whole state: a multi-state per layer, and the position of the next token, which
    llama.step advances (nothing else writes it but prefill, which reads a text at once)."""
    layers: list[MultiState]  # one multi-state per layer
    t: int = 0                # position of the next token

    def __iter__(self):
        return iter(self.layers)

    @property
    def n_rows(self) -> int:
        """Rows held per layer and KV head (the same in every layer)."""
        return min(self.layers[0].n, self.layers[0].size or self.layers[0].n)


def state_bytes(model: llama.Model, rows: int) -> int:
    """Bytes of keys and values that one sequence holds with `rows` rows per layer and KV head."""
    c = model.config
    return 2 * c.n_layers * c.n_kv_heads * rows * c.head_dim * model.embed.element_size()


def init_state(model: llama.Model, batch: int = 1, size: int | None = None, oneshot: int = 0) -> State:
    """An empty multi-state per layer: `size` rows (size + 1 slots), or unbounded if size is None.
    oneshot > 0: the first `oneshot` tokens are read with full attention, then the state is cut to
    `size` rows by the policy at the last of them (the one-shot regime); 0 evicts at every step."""
    if size is not None and (not integer(size) or size < 1):
        raise ValueError(f"multi-state size must be a positive integer or None, got {size!r}")
    if not integer(batch) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    if not integer(oneshot) or oneshot < 0 or (oneshot and size is None):
        raise ValueError(f"oneshot must be a prompt length >= 0 for a bounded state, got {oneshot!r} (size {size})")
    c = model.config
    # slots are allocated as rows arrive (MultiState._grow); a bounded state ends at size + 1 slots,
    # since it holds size + 1 rows while it attends
    cap = 16 if size is None else min(size + 1, 16)
    def empty(layer):
        z = torch.zeros(batch, c.n_kv_heads, cap, c.head_dim, dtype=model.dtype, device=model.device)
        return MultiState(k=z, v=z.clone(), pos=torch.full((batch, c.n_kv_heads, cap), -1, device=model.device),
                          score=torch.zeros(batch, c.n_kv_heads, cap, dtype=llama.wide(model.dtype), device=model.device),
                          free=torch.zeros(batch, c.n_kv_heads, dtype=torch.long, device=model.device), size=size,
                          window=c.sliding_window, layer=layer, oneshot=oneshot)
    return State([empty(i) for i in range(c.n_layers)])


def integer(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)  # True is an int to Python, not a size


def _check(policy, size):
    if (policy is None) != (size is None):
        raise ValueError("give both a policy and a size (a bounded MSRNN) or neither (the unbounded one); "
                         f"got policy={getattr(policy, '__name__', policy)}, size={size}")


@torch.no_grad()
def feed(model: llama.Model, tokens: torch.Tensor, state: State, policy=None) -> torch.Tensor:
    """Feed tokens (B, T) one step at a time, continuing `state` in place; logits (B, T, vocab)."""
    _check(policy, state.layers[0].size)
    tokens = llama.check_tokens(model, tokens, dims=(2,))            # on the model's device
    if tokens.shape[0] != state.layers[0].free.shape[0]:
        raise ValueError(f"tokens have batch {tokens.shape[0]}, the state was made for {state.layers[0].free.shape[0]}")
    llama.check_positions(model, state.t + tokens.shape[1])
    return torch.stack([llama.step(model, tokens[:, i], state, policy) for i in range(tokens.shape[1])], 1)


def run(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None, oneshot: int = 0):
    """The MSRNN on tokens (T,) or (B, T): logits (T, vocab) or (B, T, vocab).

    policy=None, size=None is the unbounded MSRNN, i.e. the transformer itself. oneshot: see init_state.
    """
    _check(policy, size)
    ids = llama.check_tokens(model, tokens)                          # (B, T) on the model's device
    logits = feed(model, ids, init_state(model, ids.shape[0], size, oneshot), policy)
    single = tokens.dim() == 1
    return logits[0] if single else logits


@torch.no_grad()
def generate(model, prompt, max_new: int, policy=None, size=None, state=None, temperature: float = 0.0,
             top_k: int | None = None, seed: int = 0, regime: str = "step", compile: bool = False):
    """Yield (B,) new tokens one at a time: greedy when temperature is 0, sampled otherwise.

    prompt: (T,) or (B, T), at least one token, fed first. regime "step" evicts from the first token
    on; "full" reads the prompt with full attention and cuts the state to `size` once, after it.
    Pass `state` to continue from it instead: its size, regime and position carry on, and it is
    updated in place, so a caller can watch it grow. compile: decode with `compiled_step` (the
    prompt is read as always); worth its compile time only for long generations.
    """
    prompt = llama.check_tokens(model, prompt)                       # (B, T)
    if regime not in ("step", "full"):
        raise ValueError(f"regime must be 'step' or 'full', got {regime!r}")
    _check_sampling(model, max_new, temperature, top_k, seed)
    if state is None:
        _check(policy, size)
        state = init_state(model, prompt.shape[0], size, prompt.shape[1] if regime == "full" and size else 0)
    elif regime != "step":
        raise ValueError("regime is for a new state; a state passed in carries its own (init_state's oneshot)")
    llama.check_positions(model, state.t + prompt.shape[1] + max_new)
    # the random numbers come from the model's device (meta tensors, test_devices.py, have none to give)
    gen = torch.Generator(model.device).manual_seed(seed) if model.device.type != "meta" else None
    logits = feed(model, prompt, state, policy)[:, -1]
    step = compiled_step() if compile else llama.step
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
            logits = step(model, tok, state, policy)


def compiled_step():
    """llama.step compiled (see `compiled`): a function with its signature. Once a state is full
    (bounded) or growing by one row a step (unbounded), every step has the same graph: the position
    and the row count become symbolic after the first recompiles (about 20 s each for the default
    model on 2 cores). A state that must grow is grown before the compiled step, not in it, so that
    each doubling of an unbounded state is not a graph of its own."""
    fast = compiled(llama.step)
    if fast is llama.step:
        return fast

    def step(model, tokens, state, policy=None):
        for ms in state.layers:
            ms.make_room(state.t)
        return fast(model, tokens, state, policy)
    return step


@functools.cache
def compiled(fn):
    """fn compiled by torch.compile (inductor): the same code, its small operations fused into a few
    C++ loops, so that a step costs its memory traffic rather than ~2,000 operator calls. Without a
    C++ compiler, fn itself, with one warning."""
    if shutil.which(os.environ.get("CXX", "g++")) is None:  # inductor's C++ compiler
        warnings.warn("torch.compile needs a C++ compiler (g++), and none was found: running uncompiled")
        return fn
    torch._dynamo.config.recompile_limit = 64  # a graph per policy and state regime: more than the 8 allowed
    return torch.compile(fn)


def _check_sampling(model, max_new, temperature, top_k, seed):
    if not integer(max_new) or max_new < 0:
        raise ValueError(f"max_new must be an integer >= 0, got {max_new!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature < math.inf:
        raise ValueError(f"temperature must be a number >= 0 (0 is greedy), got {temperature!r}")
    if top_k is not None and (not integer(top_k) or not 1 <= top_k <= model.config.vocab_size):
        raise ValueError(f"top_k must be None or an integer from 1 to the vocabulary size "
                         f"{model.config.vocab_size}, got {top_k!r}")
    if not integer(seed):
        raise ValueError(f"seed must be an integer, got {seed!r}")


@torch.no_grad()
def prefill(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None, oneshot: int = 0,
            compile: bool = False):
    """`feed` for a whole sequence (B, T) or (T,) from an empty state, faster: (logits (B, T, vocab) or
    (T, vocab), state).

    Only attention carries state from one position to the next; projections, RoPE and MLPs act on
    each position alone, so they run on all positions at once (matrix-matrix products, the
    transformer's way). Attention is the multi-state: its first `size` steps drop nothing (in the
    one-shot regime, nothing before the prompt's last token), so they are causal attention, computed
    at once (MultiState.fill); then it steps through the positions as `feed` does, in blocks that
    read the held keys and values once each (MultiState.attend_block). Logits and state are the
    token-by-token run's (test_policies.py). compile: each step compiled (`compiled`), a few graphs
    for every layer, position and block.
    """
    ids, single, state = _start(model, tokens, policy, size, oneshot)  # ids (B, T) on the model's device
    B, T = ids.shape
    f = T if size is None else min(max(size, oneshot), T)            # the steps before the first drop
    cos, sin = llama.rope_angles(model, torch.arange(T))             # (T, head_dim/2)
    step = compiled(MultiState.scored_step) if compile else MultiState.scored_step
    x = model.embed[ids]                                             # (B, T, dim)
    for L, ms in zip(model.layers, state.layers):
        q, k, v = llama.attention_inputs(model, L, x, cos, sin)      # (B, Hkv, G, T, hd), (B, Hkv, 1, T, hd) x2
        first = ms.fill(q[:, :, :, :f], k[:, :, 0, :f], v[:, :, 0, :f], policy)  # (B, Hkv, G, f, hd)
        # then a step per position, in blocks that read the state once each
        b = ms.STEP_BLOCK
        rest = [ms.attend_block(q[:, :, :, i:i + b], k[:, :, 0, i:i + b], v[:, :, 0, i:i + b], i, policy, step)
                for i in range(f, T, b)]                             # (B, Hkv, G, b, hd) each
        o = torch.cat([first, *rest], 3)                             # (B, Hkv, G, T, hd)
        x = llama.after_attention(model, L, x, o)
    state.t = T
    logits = llama.output(model, x)
    return logits[0] if single else logits, state


def _start(model, tokens, policy, size, oneshot):
    """What prefill and masked_forward begin with: their arguments checked, tokens as (B, T) on the
    model's device, whether they came as (T,), and an empty state."""
    _check(policy, size)
    ids = llama.check_tokens(model, tokens)
    llama.check_positions(model, ids.shape[1])
    return ids, tokens.dim() == 1, init_state(model, ids.shape[0], size, oneshot)


@torch.no_grad()
def masked_forward(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None, oneshot: int = 0):
    """The transformer view of a finite MSRNN: (logits, state) for tokens (B, T) or (T,), as `prefill`.

    Each layer computes all queries and keys at once, derives row by row which keys every query
    may see under the policy (static for window/sink, from that layer's attention for H2O and TOVA:
    Oren et al. 2024, app. E), and attends under that mask with ordinary softmax attention. The
    returned state is the one the token-by-token run reaches, so generation can continue from it.
    """
    ids, single, state = _start(model, tokens, policy, size, oneshot)  # ids (B, T) on the model's device
    B, T = ids.shape
    causal = llama.causal_mask(T, model.config.sliding_window, model.device)  # (T, T) the model's own mask
    cos, sin = llama.rope_angles(model, torch.arange(T))             # (T, head_dim/2)
    x = model.embed[ids]                                             # (B, T, dim)
    for L, ms in zip(model.layers, state.layers):
        q, k, v = llama.attention_inputs(model, L, x, cos, sin)      # (B, Hkv, G, T, hd), (B, Hkv, 1, T, hd) x2
        if policy is None:  # unbounded: every row is kept, and attention is the transformer's
            o = ms.fill(q, k[:, :, 0], v[:, :, 0], policy)
        else:
            o = llama.softmax_attention(q, k, v, held_mask(ms, q, k, v, policy) & causal)
        x = llama.after_attention(model, L, x, o)
    state.t = T
    logits = llama.output(model, x)
    return logits[0] if single else logits, state


def held_mask(ms: MultiState, q, k, v, policy) -> torch.Tensor:
    """held[b, h, 0, i, j]: whether row j is in the multi-state when query i attends, (B, Hkv or 1, 1, T, T).
    These are the policy's decisions, made step by step by MultiState.attend from this layer's attention."""
    B, H, G, T, _ = q.shape
    # this mask, and softmax_attention's copy of it per query head with float scores beside it
    llama.check_memory(B * H * T * (T + 1) + B * H * G * T * T * (1 + q.element_size()), f"the masks of {T} tokens")
    out = torch.zeros(B, H, 1, T, T + 1, dtype=torch.bool, device=q.device)  # column T collects freed slots (pos -1)
    for i in range(T):
        live = ms.pos[:, :, :ms.n]                                   # (B, Hkv, n): the rows kept after step i - 1
        out[:, :, 0, i].scatter_(-1, live.where(live >= 0, T), True)
        out[:, :, 0, i, i] = True                                    # and the current token
        ms.attend(q[:, :, :, i], k[:, :, 0, i], v[:, :, 0, i], i, policy)
    out = out[..., :T]
    # a layer-wise policy: one mask is cheaper to apply (meta tensors, test_devices.py, have no values to compare)
    return out[:, :1] if out.device.type != "meta" and (out == out[:, :1]).all() else out

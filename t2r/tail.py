"""A finite MSRNN with a T2R tail: the rows a policy drops are folded into a linear state, not forgotten.

A finite MSRNN (msrnn.py, Oren et al. 2024) holds `size` rows per layer, and at every step its policy
drops one: that row is gone. T2R (t2r/linear.py, Kasai et al. 2021, arXiv 2103.13076) keeps no row
and folds every one into S = Σ φ(k)vᵀ, z = Σ φ(k). Here both at once: the rows the policy keeps stay
exact, and the row it drops at step t is folded into S, z at step t, so a query reads the whole past,
the kept rows exactly and the dropped ones through their features:

    out_t = (Σ_held exp(s_j - m) v_j + φ(q_t)ᵀS) / (Σ_held exp(s_j - m) + φ(q_t)·z),
    s_j = q_t·k_j / √d,  m = max over the held rows of s_j,

one normaliser for both parts, as in the hybrid of LoLCATs (Zhang et al. 2024, arXiv 2410.10254),
which is this with the policy `window`: w exact rows are size w - 1, since a finite MSRNN of size k
attends k + 1 rows (tests/test_tail.py proves it equal to linear.LinearState). Folding evicted rows
rather than forgetting them is what kvpress's MergingPress and LoLA (arXiv 2505.23666) do in other ways.

The policy decides as it would alone: it reads the softmax over the held rows (Rows.attn), not the
tail's weights, so a tail whose features are zero is the policy alone, bit for bit.

Two views, as for every MSRNN here:
- RNN view: `TailState`, a msrnn.MultiState whose evict folds the row it frees; `init_state` for llama.step.
- transformer view: `student`, an attention for llama.forward. The recurrence says which rows each
  step holds and when each is dropped (as msrnn.held_mask reads the mask off it); then row j is exact
  for queries j .. d_j (while held), linear for queries after d_j (once dropped), absent before j.
  Its output is differentiable in the maps, which is how attention transfer trains them
  (t2r/train.py) under the policy's own drops.
"""
import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine import fast, guards
import llama
import msrnn
from t2r import linear


# ---------------------------------------------------------------- RNN view

@dataclass
class TailState(msrnn.MultiState):
    """One layer's multi-state (its rows in slots, as msrnn.MultiState) and its tail: S, z over every
    row the policy has dropped. Both have a fixed size: size + 1 slots, r features per KV head."""
    maps: linear.FeatureMaps | None = None
    S: torch.Tensor | None = None  # (B, Hkv, r, hd) Σ φ(k) vᵀ over the dropped rows
    z: torch.Tensor | None = None  # (B, Hkv, r)     Σ φ(k)

    def attend(self, q, k, v, t, policy):
        """The hook llama.step calls: append, attend over the held rows and the tail, drop and fold.
        q (B, Hkv, G, hd); k, v (B, Hkv, hd) -> (B, Hkv, G, hd)."""
        K, V, pos = self.append(k, v, t)                             # (B, Hkv, n, hd), .., (B, Hkv, n)
        scores = q / math.sqrt(q.shape[-1]) @ K.mT                   # (B, Hkv, G, n)
        attn = self.attention(scores, pos, t)                        # softmax over the held rows: what the policy reads
        s = scores.to(attn.dtype)
        held = (s - s.amax(-1, keepdim=True)).exp().sum(-1, keepdim=True)  # (B, Hkv, G, 1) Σ_held exp(s_j - m)
        fq = self.maps.phi(self.layer, q[:, :, :, None], "q", [t])[:, :, :, 0]  # (B, Hkv, G, r)
        den = held + (fq @ self.z[..., None]).to(held.dtype)         # (B, Hkv, G, 1) the weight of both parts
        # (Σ exp(s - m) v + φ(q)ᵀS) / den, written as softmax's output times its share of the weight: a
        # zero tail (a share of exactly 1, nothing added) leaves the policy's output bit for bit
        out = (attn.to(V.dtype) @ V) * (held / den).to(V.dtype) + (fq @ self.S) / den.to(V.dtype)
        self.keep(attn, q, t, policy)
        return out

    def evict(self, attn, q, t, policy):
        """msrnn.MultiState.evict, then the row it dropped is folded into S, z instead of forgotten:
        its key and value are still in the freed slot (only its position was marked -1, so it is kept here)."""
        if self.n <= self.size:  # no row is dropped at this step
            return
        pos = self.pos.clone()                                       # (B, Hkv, n) the positions before the drop
        super().evict(attn, q, t, policy)
        slot = self._slots()                                         # the freed slot of each (sequence, KV head)
        # S ← γS + φ(k)vᵀ, z ← γz + φ(k); φ told the row's position, read only by maps that turn RoPE back
        linear.LinearState.fold(self, self.k[slot], self.v[slot], pos[slot][:, :, None, None])


def init_state(model: llama.Model, maps: linear.FeatureMaps, size: int, batch: int = 1) -> msrnn.State:
    """msrnn.init_state's finite MSRNN of `size` rows per layer, with a tail in each of maps.layers
    (the others keep the policy's rows only)."""
    check(model, maps, size)
    c = model.config
    zeros = lambda *s: torch.zeros(batch, c.n_kv_heads, *s, dtype=model.dtype, device=model.device)
    def tail(ms):  # the same slots, as msrnn.init_state made them, and an empty S, z
        return TailState(**{f.name: getattr(ms, f.name) for f in dataclasses.fields(ms)}, maps=maps,
                         S=zeros(maps.r, c.head_dim), z=zeros(maps.r))
    layers = msrnn.init_state(model, batch, size).layers
    return msrnn.State([tail(ms) if i in maps.layers else ms for i, ms in enumerate(layers)])


def check(model: llama.Model, maps, size):
    """Refuse what a tail cannot be: a model whose own attention forgets (a sliding window), maps made
    for another model or dtype, no size."""
    c = model.config
    if c.sliding_window is not None:
        raise ValueError(f"a tail folds every dropped row into S for good, but this model's attention forgets "
                         f"rows {c.sliding_window} steps old (sliding_window): a tail cannot forget them")
    if not isinstance(maps, linear.FeatureMaps):
        raise TypeError(f"maps must be t2r.linear.FeatureMaps, got {type(maps).__name__}")
    if size is None or isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"a tail needs a finite MSRNN: size must be a positive integer, got {size!r}")
    if maps.sinks or maps.window:
        raise ValueError(f"a tail's exact rows are the policy's: its maps take no sinks or window (they have {maps.sinks} "
                         f"and {maps.window}, which it would ignore); keep sinks with the policy, e.g. sink:4")
    if not maps.layers:
        raise ValueError("the maps swap no layer: a tail of them would fold nothing, the policy alone under a tail's name")
    guards.check_maps(model, maps)


def state_bytes(model: llama.Model, maps: linear.FeatureMaps, size: int) -> int:
    """Bytes of one sequence's state: the `size` rows kept (as msrnn.state_bytes counts them; the
    state has one slot more, for the row a step appends) plus S and z in every tail layer."""
    check(model, maps, size)  # a tail's maps for this model, a positive size: else a number of no state
    c = model.config
    return msrnn.state_bytes(model, size) + len(maps.layers) * c.n_kv_heads * maps.r * (c.head_dim + 1) * \
        model.embed.element_size()


# ---------------------------------------------------------------- transformer view

@torch.no_grad()
def drops(model: llama.Model, layer: int, q, k, v, policy, size: int):
    """What the recurrence of layer `layer` does on its queries and keys, recorded as it runs: held
    (B, Hkv, T, size + 1), the positions of the rows each query reads exactly (-1: an empty slot),
    and dropped (B, Hkv, T), the step at which each row was dropped (T: never).
    q (B, Hkv, G, T, hd); k, v (B, Hkv, 1, T, hd). The steps are engine/fast.py's (fill, then
    attend_block), which test_policies.py proves equal to MultiState.attend step by step; the policy
    is wrapped to record the rows of each step and the one it drops."""
    at = guards.index(layer)  # numpy's and torch's integers too
    if not (guards.integer(size) and size >= 1 and at is not None and 0 <= at < model.config.n_layers):
        raise ValueError(f"drops reads a layer 0 to {model.config.n_layers - 1} of the model and a size >= 1; got layer "
                         f"{layer!r}, size {size!r}")  # a size of -3 made a tensor of negative size
    layer = at
    B, H, G, T, _ = q.shape
    held = torch.full((B, H, T, size + 1), -1, dtype=torch.long, device=q.device)
    dropped = torch.full((B, H, T), T, dtype=torch.long, device=q.device)
    f = min(size, T)                                                 # the steps before the first drop
    i, j = torch.arange(f, device=q.device)[:, None], torch.arange(f, device=q.device)[None, :]
    held[:, :, :f, :f] = torch.where(j <= i, j, -1)                  # query i < size holds rows 0..i

    @guards.wraps(policy)
    def recording(rows):
        scores = policy(rows)
        if isinstance(scores, torch.Tensor) and scores.dim() == 3 and scores.is_floating_point():  # else guards refuse it
            held[:, :, rows.t] = rows.pos                            # during a step all size + 1 slots hold rows
            lowest = msrnn.lowest(scores, rows.pos)[..., None]        # (B, Hkv, 1) the slot MultiState.evict frees
            dropped.scatter_(-1, rows.pos.gather(-1, lowest), rows.t)
        return scores

    ms = msrnn.init_state(model, B, size).layers[layer]
    k, v = k[:, :, 0], v[:, :, 0]                                    # (B, Hkv, T, hd)
    fast.fill(ms, q[:, :, :, :f], k[:, :, :f], v[:, :, :f], recording)
    for t in range(f, T, fast.STEP_BLOCK):
        u = slice(t, t + fast.STEP_BLOCK)
        fast.attend_block(ms, q[:, :, :, u], k[:, :, u], v[:, :, u], t, recording)
    return held, dropped


def attention(q, k, v, held, dropped, fq=None, fk=None, block: int = 256, gamma=None):
    """One layer of the transformer view: q (B, Hkv, G, T, hd); k, v (B, Hkv, 1, T, hd); held, dropped
    from `drops`; fq (B, Hkv, G, T, r), fk (B, Hkv, 1, T, r) the features, None for no tail
    -> (B, Hkv, G, T, hd). Query i weighs row j by exp(q_i·k_j/√d - m_i) while j is held (m_i: the
    largest of those scores), by φ(q_i)·φ(k_j) once j was dropped at a step d_j before i (times
    γ^(i - 1 - d_j) with a decay gamma (Hkv,)), not at all before j exists; and divides by the sum of
    its weights."""
    guards.check_span(0, 0, block, gamma, () if fq is None else (fq, fk))
    B, H, G, T, hd = q.shape
    wide = llama.wide(q.dtype)
    num, den = [], []
    for i0 in range(0, T, block):  # the exact part: each query's held rows (at most size + 1), gathered
        idx = held[:, :, i0:i0 + block]                              # (B, Hkv, b, n) positions, -1: none
        b, n = idx.shape[2:]
        at = idx.clamp(min=0).flatten(2)[..., None].expand(-1, -1, -1, hd)  # (B, Hkv, b n, hd)
        K = k[:, :, 0].gather(2, at).view(B, H, b, n, hd)            # (B, Hkv, b, n, hd) the rows each query holds
        V = v[:, :, 0].gather(2, at).view(B, H, b, n, hd)
        s = torch.einsum("bhgtd,bhtnd->bhgtn", q[:, :, :, i0:i0 + block], K).to(wide) / math.sqrt(hd)  # (B, Hkv, G, b, n)
        s = s.masked_fill((idx < 0)[:, :, None], float("-inf"))
        e = (s - s.amax(-1, keepdim=True)).exp().to(q.dtype)         # exp(s_j - m_i), 0 for an empty slot
        num.append(torch.einsum("bhgtn,bhtnd->bhgtd", e, V))
        den.append(e.sum(-1, keepdim=True))
    num, den = torch.cat(num, 3), torch.cat(den, 3)                  # (B, Hkv, G, T, hd), (B, Hkv, G, T, 1)
    if fq is None:
        return num / den
    # the linear part: row j's φ(k_j)v_jᵀ enters S at the step d_j that drops it, and query i reads S as
    # the recurrence holds it after step i - 1, the sum over rows dropped before i: a cumulative sum
    # over steps gives it for every query at once. Row j adds to bucket d_j (bucket T: never dropped).
    r = fk.shape[-1]
    into = dropped[..., None]                                        # (B, Hkv, T, 1)
    fold = fk[:, :, 0, :, :, None] * v[:, :, 0, :, None, :]          # (B, Hkv, T, r, hd) each row's φ(k)vᵀ
    S = fold.new_zeros(B, H, T + 1, r, hd).scatter_add(2, into[..., None].expand(-1, -1, -1, r, hd), fold)
    z = fk.new_zeros(B, H, T + 1, r).scatter_add(2, into.expand(-1, -1, -1, r), fk[:, :, 0])
    if gamma is None:
        S, z = S.cumsum(2), z.cumsum(2)
    else:  # the state after step d: every earlier bucket shrunk by γ per step since
        S, z = linear.decayed_cumsum(S, gamma.view(-1, 1, 1), 2), linear.decayed_cumsum(z, gamma.view(-1, 1), 2)
    S = F.pad(S, (0, 0, 0, 0, 1, 0))[:, :, :T]                       # (B, Hkv, T, r, hd): S as query i reads it
    z = F.pad(z, (0, 0, 1, 0))[:, :, :T]                             # (B, Hkv, T, r)
    num = num + torch.einsum("bhgtr,bhtrd->bhgtd", fq, S)
    den = den + torch.einsum("bhgtr,bhtr->bhgt", fq, z)[..., None]
    return num / den


class Passes(dict):
    """A student's count of its forward passes: no setting, so a checkpoint's record of the student (train._student)
    keys it by its place alone, and a rerun or a resumed run is the same student."""


def student(model: llama.Model, maps: linear.FeatureMaps, policy, size):
    """The transformer view as llama.forward's attention hook, (i, q, k, v) -> (B, Hkv, G, T, hd): the
    rows each query holds come from the policy's drops on these q, k, v (no gradient); the output is
    differentiable in the maps' parameters (and in q, k, v). A layer outside maps.layers keeps the
    policy's rows only. policy: a function, or a name as the command line gives it ('tova',
    'mine.py:fn'). t2r/train.py's attention transfer trains maps with it.
    size: the rows, or a list of sizes taken in turn, one per forward pass (a call for a layer no later
    than the last call's starts the next pass), so that maps trained by it are trained at every size
    they will be read at (t2r/length.py); a resumed training run starts the turn again."""
    sizes = list(size) if isinstance(size, (list, tuple)) else [size]
    if not sizes:
        raise ValueError("size is the rows the policy keeps, or a list of sizes taken in turn; got an empty list")
    for s in sizes:
        check(model, maps, s)
    policy, turn = _policy(policy), Passes({"pass": -1, "layer": math.inf})

    def attend(i, q, k, v, _under=_key(policy)):  # the policy's key as a default: a checkpoint's record (train._student)
        # finds it, probe and all, through any wrapper the student is given
        if i <= turn["layer"]:
            turn["pass"] += 1
        turn["layer"] = i
        size = sizes[turn["pass"] % len(sizes)]
        if q.shape[3] <= size + 1:  # the first row dropped is read at position size + 1: the full cache under the tail's name
            raise ValueError(f"a multi-state of {size} rows drops nothing a later position reads in {q.shape[3]} tokens: "
                             "its tail would fold nothing (and learn nothing); give a size below the text's length less 1")
        held, dropped = drops(model, i, q.detach(), k.detach(), v.detach(), policy, size)
        if i not in maps.layers:
            return attention(q, k, v, held, dropped)
        pos = torch.arange(q.shape[3], device=q.device)              # (T,) row j is at position j
        return attention(q, k, v, held, dropped, maps.phi(i, q, "q", pos), maps.phi(i, k, "k", pos), gamma=maps.gamma(i))
    return attend


def _key(policy) -> str | None:
    """policy's key (lab/specs.py: what it returns on a probe too, so a setting held in a factory's class, a cache or
    a metaclass is in it), or None for one specs cannot name (a lookahead's bound: its code and values are keyed)."""
    from lab import specs
    try:
        return specs.named(policy).key
    except ValueError:
        return None


def _policy(policy, model=None, tokens=None):
    """A policy function as it is, or one from a name (lab/specs.py, the command line's names); a
    bound that reads ahead only where the tokens are known."""
    if callable(policy):
        return policy
    from lab import specs  # the drivers' names: the reading path above needs none
    named = specs.named(policy)
    if named.fn is None:
        raise ValueError("a tail needs a policy that drops rows, not the full cache")
    if named.reads_ahead and tokens is None:
        raise ValueError(f"{named.label} reads the tokens ahead; the student sees only q, k, v: use forward")
    return named.on(model, tokens)


def forward(model: llama.Model, maps: linear.FeatureMaps, tokens, policy, size: int):
    """Logits of the finite MSRNN with a tail for every position at once, shaped as llama.forward's."""
    return llama.forward(model, tokens, student(model, maps, _policy(policy, model, tokens), size))


@torch.no_grad()
def nll(model: llama.Model, maps: linear.FeatureMaps, tokens, policy, size: int) -> torch.Tensor:
    """Negative log-likelihood of every next token, (T - 1,) for tokens (T,), (B, T - 1) for (B, T)."""
    from lab import experiments
    ids = tokens.view(1, -1) if tokens.dim() == 1 else tokens
    out = experiments.next_token_nll(forward(model, maps, ids, policy, size), ids)
    return out[0] if tokens.dim() == 1 else out


def perplexity(model: llama.Model, maps: linear.FeatureMaps, ids, policy, size: int, chunk: int = 4096,
               progress=None) -> dict:
    """Perplexity of tokens ids (T,) cut into chunks of `chunk` tokens, each read from scratch by the
    transformer view (a bad policy fails before any work); the keys of lab.experiments.perplexity."""
    if not guards.integer(chunk) or chunk < 2:
        raise ValueError(f"chunk is a number of tokens >= 2, got {chunk!r}")
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1:  # a (1, T) text would be read as 1 token
        raise ValueError(f"ids are one text's token ids, (T,); got {tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__}")
    pieces = [p for p in ids.split(chunk) if len(p) > 1]
    if not pieces:
        raise ValueError(f"the text has {len(ids)} token(s): perplexity needs at least 2")
    if not (guards.integer(size) and size >= 1):
        raise ValueError(f"size is a multi-state's rows, a whole number >= 1; got {size!r}")
    from lab import experiments
    experiments.drops_nothing([size], len(pieces[0]), f"chunks of {len(pieces[0])} tokens")  # the full cache under the tail's name
    losses = []
    for i, p in enumerate(pieces):  # a last piece the drops do not reach: read whole, as the policy's run reads it
        losses.append(nll(model, maps, p, policy, size) if len(p) > size + 1 else
                      experiments.next_token_nll(llama.forward(model, p[None]), p[None])[0])
        if progress:
            progress(i + 1, len(pieces))
    loss = torch.cat(losses)
    return {"ppl": math.exp(loss.mean().item()), "tokens": len(loss), "chunks": len(losses),
            "ppl_per_chunk": [math.exp(x.mean().item()) for x in losses]}

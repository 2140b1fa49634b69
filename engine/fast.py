"""The fast path: what msrnn.py computes, faster. Nothing here is new mathematics.

- `prefill` reads a whole text from an empty state and returns the logits and the state that
  msrnn.run reaches token by token (test_policies.py: test_prefill_is_the_token_by_token_run, at 1e-10
  in float64 for every policy, size, sliding window and both prompt regimes). Projections, RoPE and
  MLPs act on each position alone, so they run on all positions at once (llama.forward). Only
  attention carries state: its first steps drop nothing and are ordinary causal attention (`fill`);
  the rest step through the positions as msrnn.MultiState.attend does, in blocks that read the held
  keys and values once per block rather than once per step (`attend_block`).
- `generate` is msrnn.generate with the prompt read by prefill (test_compile.py and test_policies.py).
- `compiled_step` and compile=True: llama.step and prefill's per-step part under torch.compile
  (test_compile.py: the same rows, logits within float32 rounding, 1e-10 in float64). The guards on
  a policy (guards.policy_call, check_scores) do not run inside a graph, so a compiled run first
  makes a policy's first PROBE drops eagerly, where they do (tests/test_stale.py).
"""
import contextlib
import functools
import json
import math
import os
import pathlib
import shutil
import sys
import warnings
import weakref

import torch

import engine.oneshot
from engine import guards
import llama
import msrnn

FILL_BLOCK = 64  # queries `fill` handles at once: memory O(FILL_BLOCK * size), not O(size²); of 16-256, fastest here
STEP_BLOCK = 64  # steps `attend_block` takes at once; of 16, 64 and 256, fastest here
PROBE = 8        # drops a compiled run makes eagerly first, under the guards the graph skips
_PROBED = weakref.WeakKeyDictionary()  # policy -> the (model, (size, batch, one-shot prompt)) at which its first drops passed them in this process


@torch.no_grad()
def prefill(model: llama.Model, tokens: torch.Tensor, policy=None, size: int | None = None, oneshot: int = 0,
            compile: bool = False, last: bool = False):
    """msrnn.run from an empty state, faster: (logits, state), logits (B, T, vocab) or (T, vocab).
    compile: each step compiled (`compiled`), a few graphs for every layer, position and block.
    last: only the last position's logits (llama.forward)."""
    guards.check_flags(compile=compile, last=last)
    guards.check_policy(policy, size)
    ids = guards.check_tokens(model, tokens)                         # (B, T) on the model's device
    state = engine.oneshot.init_state(model, ids.shape[0], size, oneshot)
    T = ids.shape[1]
    f = T if size is None else min(max(size, oneshot), T)            # the steps before the first drop
    B, probed = ids.shape[0], None
    if compile and policy is not None and T > f:
        try:
            probed = _PROBED.get(policy, [])
        except TypeError:  # an unhashable policy (a dataclass instance): probed every time
            probed = []
    if probed is not None and not any(m() is model and s == (size, B, oneshot) for m, s in probed):  # per model, size,
        # batch and regime (a one-shot probe never reaches the per-step regime's first drops)
        # inside the graph a policy is neither watched nor checked (a write into rows, NaN scores): its
        # first drops run eagerly first, where the guards see them, on every sequence; once a process
        # for this model, size, batch and regime (a policy may fail at one size, in a layer another model
        # lacks, or in a sequence a smaller batch lacks)
        prefill(model, ids[:, :f + PROBE], policy, size, oneshot, last=True)
        with contextlib.suppress(TypeError):  # an object no weak reference can hold is probed every time
            _PROBED.setdefault(policy, []).append((weakref.ref(model), (size, B, oneshot)))
    step = compiled(scored_step) if compile else scored_step

    def attention(i, q, k, v):                                       # q (B, Hkv, G, T, hd); k, v (B, Hkv, 1, T, hd)
        ms, k, v = state.layers[i], k[:, :, 0], v[:, :, 0]
        first = fill(ms, q[:, :, :, :f], k[:, :, :f], v[:, :, :f], policy)  # (B, Hkv, G, f, hd)
        rest = [attend_block(ms, q[:, :, :, j:j + STEP_BLOCK], k[:, :, j:j + STEP_BLOCK], v[:, :, j:j + STEP_BLOCK],
                             j, policy, step) for j in range(f, T, STEP_BLOCK)]  # (B, Hkv, G, b, hd) each
        return torch.cat([first, *rest], 3)                          # (B, Hkv, G, T, hd)
    logits = llama.forward(model, tokens, attention, last)  # checked finite there
    state.t = T
    return logits, state


def fill(ms: msrnn.MultiState, q, k, v, policy):
    """The first f steps of an empty multi-state, at once: q (B, Hkv, G, f, hd), k, v (B, Hkv, f, hd)
    -> attention output (B, Hkv, G, f, hd). Until it holds `size` rows (and before a one-shot prompt
    ends) nothing is dropped, so these steps are the transformer's: each query attends to every row
    so far, under the model's own mask, and each row's score is the attention it received."""
    f = q.shape[3]
    if f >= ms.k.shape[2]:  # room for the next step's row too, unless the cut below frees a slot for it
        ms._grow(f + 1 if ms.size is None or f <= ms.size else f)
    ms.k[:, :, :f], ms.v[:, :, :f], ms.pos[:, :, :f], ms.n = k, v, torch.arange(f, device=k.device), f
    visible = llama.causal_mask(f, ms.window, k.device)               # (f, f)
    if ms.size is None:  # no scores to keep: the fused kernel (None is its own causal mask)
        return llama.softmax_attention(q, k[:, :, None], v[:, :, None], None if ms.window is None else visible)
    B, H, G, _, hd = q.shape
    out = torch.empty_like(q)
    for i0 in range(0, f, FILL_BLOCK):  # a block of queries i0..i1-1, which see rows 0..i1-1 at most
        i1 = min(i0 + FILL_BLOCK, f)
        qb = q[:, :, :, i0:i1].reshape(B, H, G * (i1 - i0), hd)       # (B, Hkv, G b, hd): G heads share a KV head
        scores = (qb / math.sqrt(hd) @ k[:, :, :i1].mT).view(B, H, G, i1 - i0, i1)  # (B, Hkv, G, b, i1)
        attn = scores.masked_fill(~visible[i0:i1, :i1], float("-inf")).softmax(-1, dtype=llama.wide(scores.dtype))
        o = attn.to(v.dtype).view(B, H, G * (i1 - i0), i1) @ v[:, :, :i1]  # (B, Hkv, G b, hd)
        out[:, :, :, i0:i1] = o.view(B, H, G, i1 - i0, hd)
        ms.score[:, :, :i1] += attn.sum((2, 3))  # summed over the KV head's G queries, as in attend
    ms.prev[:, :, :f] = math.nan  # never scored
    ms.evict(attn[:, :, :, -1], q[:, :, :, -1], f - 1, policy)  # the one-shot cut, when the prompt ends here
    return out


def attend_block(ms: msrnn.MultiState, q, k, v, t, policy, step=None):
    """The steps at positions t .. t+b-1 when all their queries are known ahead (prefill): what
    MultiState.attend gives at each in turn, but the held keys and values are read once for the block
    rather than at every step. A large state then costs two matrix-matrix products per block, not
    its whole memory traffic per step. q (B, Hkv, G, b, hd); k, v (B, Hkv, b, hd) -> (B, Hkv, G, b, hd).
    The state must have its size + 1 slots already, as `fill` leaves them (the block cannot grow it);
    step: scored_step, or it compiled."""
    B, H, G, b, hd = q.shape
    n0 = ms.n
    K = torch.cat([ms.k[:, :, :n0], k], 2)                           # (B, Hkv, n0 + b, hd): every row the block
    V = torch.cat([ms.v[:, :, :n0], v], 2)                           # can see, the held ones, then the new ones
    S = (q.reshape(B, H, G * b, hd) / math.sqrt(hd) @ K.mT).view(B, H, G, b, n0 + b)  # (B, Hkv, G, b, n0 + b)
    col = torch.arange(ms.k.shape[2], device=q.device).repeat(B, H, 1)  # (B, Hkv, slots): the row of K in each
    step, attn = step or scored_step, []
    for j in range(b):
        a, col = step(ms, S[:, :, :, j], q[:, :, :, j], k[:, :, j], v[:, :, j], t + j, n0 + j, col, policy)
        attn.append(a)
    A = torch.stack(attn, 3).to(V.dtype).view(B, H, G * b, n0 + b)  # (B, Hkv, G, b, n0 + b) -> (B, Hkv, G b, n0 + b)
    return (A @ V).view(B, H, G, b, hd)                              # (B, Hkv, G b, hd) -> (B, Hkv, G, b, hd)


def scored_step(ms: msrnn.MultiState, S, q, k, v, t, c, col, policy):
    """One step of attend_block: MultiState.attend, with the query q's scores read from S (B, Hkv, G, n0 + b),
    its scores against the block's rows, rather than computed from the keys. col (B, Hkv, slots): which
    row of the block each slot holds; the row written now is row c. -> (the attention spread over
    the block's rows (B, Hkv, G, n0 + b), col)."""
    _, _, pos = ms.append(k, v, t)                                   # (B, Hkv, n)
    col = col.masked_fill(ms.pos == t, c)                            # the slot just written holds row c
    idx = col[:, :, None, :ms.n].expand(-1, -1, S.shape[2], -1)      # (B, Hkv, G, n)
    attn = ms.attention(S.gather(-1, idx), pos, t)                   # (B, Hkv, G, n)
    ms.keep(attn, q, t, policy)
    return torch.zeros_like(S, dtype=attn.dtype).scatter(-1, idx, attn), col


@torch.no_grad()
def generate(model, prompt, max_new: int, policy=None, size=None, temperature: float = 0.0, top_k: int | None = None,
             seed: int = 0, regime: str = "step", compile: bool = False):
    """msrnn.generate, the same tokens, with all but the prompt's last token read by prefill, and,
    with compile, each new token decoded by `compiled_step`: worth it only for long generations, since
    the first call compiles (results/bench.log, line 1d: about a minute on a 2-core CPU the first time, far less
    in a later process, which reads inductor's cache; the message says what the last bench measured)."""
    ids = guards.check_tokens(model, prompt)                         # (B, T)
    guards.check_flags(compile=compile)
    guards.check_sampling(model, max_new, temperature, top_k, seed, regime, None)
    guards.check_policy(policy, size)
    B, T = ids.shape
    oneshot = T if regime == "full" and size else 0  # the last prompt token, fed below, makes the cut
    if T > 1:
        _, state = prefill(model, ids[:, :-1], policy, size, oneshot, last=True)
    else:
        state = engine.oneshot.init_state(model, B, size, oneshot)
    return msrnn.generate(model, ids[:, -1:], max_new, policy, state=state, temperature=temperature, top_k=top_k,
                          seed=seed, step=compiled_step() if compile else llama.step)


def compiled_step():
    """llama.step compiled (see `compiled`): a function with its signature. Once a state is full
    (bounded) or growing by one row a step (unbounded), every step has the same graph: the position
    and the row count become symbolic after the first recompiles (about 20 s each for the default
    model on 2 cores). A state that must grow is grown before the compiled step, not in it, so that
    each doubling of an unbounded state is not a graph of its own."""
    fast = compiled(llama.step.__wrapped__)  # the step itself: its all-or-nothing guard stays eager
    if fast is llama.step.__wrapped__:
        return llama.step

    eager = {}  # (policy, model, size, batch, prompt) by id -> [the policy and model, held so their ids are not reused;
    #             steps with a drop still to run eagerly]

    def step(model, tokens, state, policy=None):
        guards.check_multistate(state)  # a T2R state has no size or slots to compile for: llama.step reads it
        return guarded(model, tokens, state, policy)

    @guards.all_or_nothing
    def guarded(model, tokens, state, policy=None):
        ms, prompt = state.layers[0], getattr(state.layers[0], "prompt", 0)  # prompt: a one-shot state's (engine/oneshot.py)
        # a step reused for another policy, model, size, batch or regime is probed again, as `prefill`'s probe is
        key = (id(policy), id(model), ms.size, tokens.shape[0], prompt)
        left = eager.get(key) or eager.setdefault(key, [policy, model, PROBE])  # no list made per step once it is there
        if left[2] and policy is not None and ms.n >= ms.size and state.t >= prompt - 1:  # this step drops
            out = llama.step.__wrapped__(model, tokens, state, policy)
            left[2] -= 1  # counted once it passed: a step refused and fed again is probed again
            return out
        for ms in state.layers:
            ms.make_room()
        return fast(model, tokens, state, policy)
    return step


def cold_cost() -> str:
    """What lab.bench last measured compiling to cost (results/bench.json, line 1d), as words for the message."""
    try:
        bench = guards.sealed(json.loads((pathlib.Path(__file__).parents[1] / "results" / "bench.json").read_text()), "bench")
        cold, warm = (bench["compile_seconds"][k] for k in ("cold", "warm"))  # as lab.bench wrote it, not as typed
        first = lambda d: sum(v for k, v in d.items() if k.startswith("decode"))
        said = lambda s: f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"  # 77 s is not "1 min"
        return f" (lab.bench measured {said(first(cold))} cold and {said(first(warm))} warm for decoding on its machine)"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ": several minutes on a 2-core CPU the first time"


@functools.cache
def compiled(fn):
    """fn compiled by torch.compile (inductor): the same code, its small operations fused into a few
    C++ loops, so that a step costs its memory traffic rather than ~2,000 operator calls. Without a
    C++ compiler, fn itself, with one warning.

    msrnn.MultiState is written so that it compiles to few graphs: `append` writes a filling state
    as slices i:i+1 (a changing i is followed, not recompiled for) and a full one by indexing (which
    inductor does in place, where scatter_ becomes a copy of the whole buffer); `evict` drops by
    argmin, not a sort of count 1 (from which inductor would learn n == size + 1 and fail once the
    size varies)."""
    if shutil.which(os.environ.get("CXX", "g++")) is None:  # inductor's C++ compiler
        warnings.warn("torch.compile needs a C++ compiler (g++), and none was found: running uncompiled")
        return fn
    torch._dynamo.config.recompile_limit = 64  # a graph per policy and state regime: more than the 8 allowed
    # inductor's compiled kernels kept beside the default model rather than in /tmp: a later process
    # (or a later boot) reuses them instead of compiling again (a user's TORCHINDUCTOR_CACHE_DIR wins)
    from data import default_model
    # (torch writes its own default into the variable once anything asks inductor for its folder: that one is not a user's)
    from torch._inductor.runtime import cache_dir_utils
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR") in (None, "", os.getcwd(), cache_dir_utils.default_cache_dir()):
        # (TORCHINDUCTOR_CACHE_DIR= means unset; torch turns it into the current folder, which filled with kernels)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(default_model.cache_root() / "torchinductor")
    cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    default_model.writable(pathlib.Path(cache))  # one line naming the folder, before compiling, not torch's errno after
    print(f"[msrnn] compiling {fn.__name__} with torch.compile: the first calls trace and compile it, once per process"
          f"{cold_cost()}; the kernels are cached in {cache}, so a later process compiles faster", file=sys.stderr)
    return torch.compile(fn)

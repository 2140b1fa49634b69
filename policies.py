"""Compression policies: how much each held row of a layer is worth keeping.

Every policy has one signature:  policy(rows: msrnn.Rows) -> float tensor of scores
of shape (B, 1, n) for the whole layer (every KV head keeps the same rows) or (B, Hkv, n) per KV
head. The state drops the lowest-scored row at every step (the paper's MSRNN), or, in the one-shot
regime, keeps the `size` highest once, after a prompt read with full attention. Ties go against the
earlier row. A policy is called only when the layer holds more than `size` rows, the current token
included, and it may drop the current token. Scoring rather than picking a row is how the paper
describes every policy, and it lets one definition serve both regimes.

Adding a policy is writing a function here (or in your own file: --policy mine.py:fn), optionally
with a display name, @label("..."). `python demo.py check mine.py:fn` tests it.
"""
import dataclasses
import functools
import hashlib
import importlib.util
import inspect
import math
import pathlib

import torch

import llama
import msrnn


def label(text):
    """The name tables and plots show for a policy; {param} is filled with its parameters."""
    def set_label(fn):
        fn.label = text
        return fn
    return set_label


@label("Window")
def window(rows):
    """Window: keep the `size` most recent tokens (the baseline of Oren et al. 2024)."""
    return rows.pos[:, :1].double()                                  # (B, 1, n): newer is better


@label("Window+{sinks}")
def sink(rows, sinks=4):
    """Window+i: the first `sinks` tokens plus the most recent (StreamingLLM, Xiao et al. 2023)."""
    if sinks >= rows.size:
        raise ValueError(f"sink: sinks={sinks} must be smaller than the multi-state size {rows.size}")
    pos = rows.pos[:, :1].double()                                   # (B, 1, n)
    return pos.masked_fill(pos < sinks, math.inf)                    # the sinks are never dropped


@label("H2O")
def h2o(rows):
    """H2O (Zhang et al. 2023), layer-wise as in Oren et al. 2024: keep the size//2 most recent tokens,
    then those that accumulated the most attention, summed over all heads."""
    recent = rows.pos[:, :1] > rows.t - rows.size // 2               # (B, 1, n)
    return rows.score.sum(1, keepdim=True).masked_fill(recent, math.inf)


@label("H2O (head)")
def h2o_head(rows):
    """H2O as originally proposed: each KV head keeps its own heavy hitters (its query group's sum)."""
    return rows.score.masked_fill(rows.pos > rows.t - rows.size // 2, math.inf)  # (B, Hkv, n)


@label("TOVA")
def tova(rows):
    """TOVA (Oren et al. 2024): keep the rows the current query attends to most, averaged over all
    query heads of the layer; the same rows stay in every KV head."""
    return rows.attn.mean((1, 2))[:, None]                           # (B, Hkv, G, n) -> (B, 1, n)


@label("TOVA (head)")
def tova_head(rows):
    """TOVA head-wise (the paper's ablation): each KV head keeps what its own queries attend to."""
    return rows.attn.mean(2)                                         # (B, Hkv, n)


# ---------------------------------------------------------------- a bound: the lookahead reference

@label("Lookahead")
def lookahead(model, tokens, horizon=0):
    """Not a policy but a bound for policies, in the spirit of Belady's optimal cache replacement (1966):
    keep the rows that the full-cache model's same layer will attend to most over the rest of `tokens`
    (or the next `horizon` steps), averaged over its query heads. It reads the future, which no
    policy can (`demo.py check` says so), so it is built for one text: lookahead(model, tokens) is the
    policy for that text. It is not guaranteed optimal for perplexity; it is a reference point."""
    future = FutureAttention(model, tokens, horizon)

    def lookahead_policy(rows):
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

    def __init__(self, model, tokens, horizon=0):
        tokens = tokens.view(1, -1) if tokens.dim() == 1 else tokens
        self.T, self.horizon, self.layer, self.sums = tokens.shape[1], horizon, None, None
        c, (B, T) = model.config, tokens.shape
        llama.check_memory(((c.n_heads + c.n_kv_heads) * c.head_dim * c.n_layers + T + 1) * B * T * model.embed.element_size(),
                           f"the lookahead of {T} tokens (every layer's queries and keys, one layer's sums)")
        self.mask = llama.causal_mask(self.T, model.config.sliding_window, model.device)  # (T, T) the model's own, sliding window too
        self.qk = []

        def keep_qk(layer, q, k, v):                                 # q (B, Hkv, G, T, hd); k, v (B, Hkv, 1, T, hd)
            self.qk.append((q, k))
            return llama.softmax_attention(q, k, v, self.mask if model.config.sliding_window else None)
        llama.forward(model, tokens, keep_qk)

    def attention(self, layer, i0, i1):
        """Head-averaged attention of queries i0 .. i1-1 over all T positions, (B, i1 - i0, T)."""
        q, k = self.qk[layer]
        s = q[:, :, :, i0:i1] @ k[:, :, :, :i1].mT / math.sqrt(q.shape[-1])  # (B, Hkv, G, i1 - i0, i1)
        a = s.masked_fill(~self.mask[i0:i1, :i1], -math.inf).softmax(-1, dtype=llama.wide(s.dtype)).mean((1, 2))
        return torch.nn.functional.pad(a, (0, self.T - i1))         # later positions receive nothing

    # Looked up by position in Python, not a tensor operation: torch.compile (prefill's compile=True)
    # leaves it out of the graph, where it would otherwise be specialised to each step's t
    @torch.compiler.disable
    def after(self, layer, t):
        if t >= self.T:
            raise ValueError(f"lookahead knows the {self.T} tokens it was built for; step {t} is past them")
        end = self.T if not self.horizon else min(self.T, t + 1 + self.horizon)
        if self.layer != layer and self.T - t - 1 <= self.BLOCK:  # near the end of the text: sum directly
            return self.attention(layer, t + 1, end).sum(1)              # no queries after the last step: zeros
        if self.layer != layer:  # sums[:, i] = attention received from queries i .. T-1, built from the end
            q = self.qk[layer][0]
            self.sums = q.new_zeros(q.shape[0], self.T + 1, self.T, dtype=llama.wide(q.dtype))
            for i0 in range(self.T - (self.T - 1) % self.BLOCK - 1, -1, -self.BLOCK):
                i1 = min(i0 + self.BLOCK, self.T)
                self.sums[:, i0:i1] = self.attention(layer, i0, i1).flip(1).cumsum(1).flip(1) + self.sums[:, i1:i1 + 1]
            self.layer = layer
        return self.sums[:, t + 1] - self.sums[:, end]


# ---------------------------------------------------------------- the policy table, and names on the command line

POLICIES = {name: f for name, f in dict(globals()).items()
            if inspect.isfunction(f) and f.__module__ == __name__ and hasattr(f, "label")}


@dataclasses.dataclass(frozen=True)
class Named:
    """A policy as the commands know it: 'tova', 'sink:8', 'lookahead:256', 'path/mine.py:fn' or 'full'."""
    spec: str | None    # as given on the command line; None for a function passed in
    label: str          # the display name in every table, legend, log line and JSON
    fn: object          # policy(rows), parameters bound; None for the full cache; for a lookahead, fn(model, tokens)
    reads_ahead: bool = False

    def on(self, model, tokens):
        """The policy function for reading `tokens` (only a lookahead looks at them)."""
        return self.fn(model, tokens) if self.reads_ahead else self.fn

    @property
    def key(self) -> str:
        """A file name for this policy's results that changes when its source or parameters do."""
        try:
            source = inspect.getsource(inspect.unwrap(self.fn))
        except (OSError, TypeError):
            source = repr(self.fn)
        digest = hashlib.sha1((source + self.label).encode()).hexdigest()[:8]
        slug = "".join(c if c.isalnum() else "_" for c in self.label).strip("_").lower()
        return f"{slug}-{digest}"


FULL = Named("full", "full cache", None)


def named(spec) -> Named:
    """Resolve 'full', a name in POLICIES, 'name:arg,key=arg', or 'file.py:function[:args]'; a
    function or a Named passes through. Errors name the policy, the file and the function."""
    if isinstance(spec, Named):
        return spec
    if callable(spec):
        return _bind(spec, [], None)
    if spec == "full":
        return FULL
    if ".py:" in spec:
        path, _, rest = spec.partition(".py:")
        fname, _, args = rest.partition(":")
        fn = _from_file(pathlib.Path(path + ".py"), fname)
    else:
        name, _, args = spec.partition(":")
        if name not in POLICIES:
            raise ValueError(f"unknown policy {name!r}; choose from full, {', '.join(POLICIES)}, "
                             f"or give your own as path/to/file.py:function")
        fn = POLICIES[name]
    return _bind(fn, [a for a in args.split(",") if a], spec)


def _bind(fn, args, spec) -> Named:
    fname = msrnn.policy_name(fn)
    params = list(inspect.signature(fn).parameters.values())
    reads_ahead = [p.name for p in params[:2]] == ["model", "tokens"]
    free = params[2:] if reads_ahead else params[1:]  # what a spec may set
    if len(args) > len(free):
        raise ValueError(f"policy {spec or fname!r}: {fname} takes {len(free)} parameter(s) "
                         f"({', '.join(p.name for p in free) or 'none'}), got {len(args)}")
    kw = {}
    for p, a in zip(free, args):  # 'sink:8' or 'sink:sinks=8'
        key, value = a.split("=", 1) if "=" in a else (p.name, a)
        if key not in [q.name for q in free]:
            raise ValueError(f"policy {spec or fname!r}: {fname} has no parameter {key!r}")
        kw[key] = _number(value)
    bound = {p.name: kw.get(p.name, p.default) for p in free if p.default is not inspect.Parameter.empty}
    text = getattr(fn, "label", None) or getattr(getattr(fn, "func", None), "label", fname)
    shown = text.format(**bound)
    extra = {k: v for k, v in kw.items() if "{" + k + "}" not in text}
    if extra:
        shown += " (" + ", ".join(f"{k} {v}" for k, v in extra.items()) + ")"
    policy = functools.update_wrapper(functools.partial(fn, **kw), fn) if kw else fn
    return Named(spec, shown, policy, reads_ahead)


def _number(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _from_file(path, fname):
    if not path.is_file():
        raise ValueError(f"policy file {path} not found")
    module_spec = importlib.util.spec_from_file_location(f"user_policy_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        raise ValueError(f"could not import {path}: {type(e).__name__}: {e}") from None
    fn = getattr(module, fname, None)
    if not callable(fn):
        found = [n for n, f in vars(module).items() if inspect.isfunction(f) and f.__module__ == module.__name__]
        raise ValueError(f"{path} has no function {fname!r} (it defines: {', '.join(found) or 'none'})")
    return fn

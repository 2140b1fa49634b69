"""A zoo of published scoring rules, each written as a policy (the contract is policies.py's).

Each cites its paper, and says where a per-step MSRNN forces a deviation from it: these rules were
published for one cut after the prompt (kvpress's setting), where a policy sees every prompt row and
its attention at once; here a policy sees the rows a layer holds and the current token's query, at
every step, and remembers only what it returned last time (`rows.prev`). docs/zoo.md lists what
cannot be written this way, and why. `python demo.py check <name>` checks any of them.
"""
import math

import torch
import torch.nn.functional as F

from policies import label


@label("Knorm")
def knorm(rows):
    """Keep the keys with the smallest L2 norm (Devoto et al. 2024, arXiv 2406.11430; kvpress KnormPress),
    per KV head. In layer 0 a key's norm depends only on its token (RoPE keeps norms), so repeated tokens
    tie up to rounding: the newer row wins."""
    return -rows.keys.norm(dim=-1).to(rows.attn.dtype) + 1e-9 * rows.pos      # (B, Hkv, n)


@label("VATP", recent=(0, 1))
def vatp(rows, recent=0.5):
    """Value-aware attention (Guo et al. 2024, arXiv 2406.12335): the attention a row has accumulated,
    times its value's L1 norm, per KV head; its base, H2O, keeps the recent share."""
    s = rows.score * rows.values.norm(p=1, dim=-1).to(rows.score.dtype)       # (B, Hkv, n)
    return s.masked_fill(rows.pos > rows.t - int(rows.size * recent), math.inf)


@label("KeyDiff")
def keydiff(rows):
    """KeyDiff (Park et al. 2025, arXiv 2504.15364): keep the keys that differ most from the held keys'
    mean direction (score: minus the cosine to it), per KV head; it reads no attention. Two rows are
    always equally far from their mean, a tie that rounding would decide: the newer row wins."""
    k = F.normalize(rows.keys.to(rows.attn.dtype), dim=-1)                  # (B, Hkv, n, hd)
    return -F.cosine_similarity(k, k.mean(2, keepdim=True), dim=-1) + 1e-9 * rows.pos  # (B, Hkv, n)


@label("SnapKV-EMA {window}", window=(1, math.inf))
def snapkv(rows, window=32):
    """SnapKV (Li et al. 2024, arXiv 2404.14469) keeps the rows the last `window` queries attended to
    most, per KV head. Per step, that window is an exponential average over the queries (weight
    1/window), carried in rows.prev; a row starts from its first query's attention. SnapKV's pooling
    over neighbouring positions is left out: rows are in slot order, not position order."""
    a, w = rows.attn.mean(2), 1 / window                                      # (B, Hkv, n)
    return torch.where(rows.prev.isnan(), a, (1 - w) * rows.prev + w * a)


@label("ExpectedAttn", sinks=(0, math.inf))
def expected_attention(rows, sinks=4):
    """Expected Attention (Devoto et al. 2025, arXiv 2510.00636): the attention future queries are
    expected to pay a row, times its value's norm; the first `sinks` rows kept. A step knows one query
    per head, so the expectation is over the KV head's G current queries, unnormalised exp(q·k/√hd):
    no covariance, and no RoPE rotation to future positions."""
    if sinks >= rows.size:  # the sinks would tie at inf, and which goes would be the slots' accident
        raise ValueError(f"expected_attention: sinks={sinks} must be smaller than the multi-state size {rows.size}")
    q, k = rows.query.to(rows.attn.dtype), rows.keys.to(rows.attn.dtype)
    logits = q @ k.mT / math.sqrt(k.shape[-1])                                # (B, Hkv, G, n)
    expected = (logits - logits.amax(-1, keepdim=True)).exp().mean(2)        # (B, Hkv, n)
    s = expected * rows.values.norm(dim=-1).to(expected.dtype)
    return s.masked_fill(rows.pos < sinks, math.inf)


@label("TOVA+{sinks}, recent {recent}", sinks=(0, math.inf), recent=(0, 1))
def tova_protected(rows, sinks=4, recent=0.1):
    """TOVA with the first `sinks` rows and the latest `recent` share of the size protected (boundary
    protection: "Protection Is (Nearly) All You Need", arXiv 2605.18053, reserves about 10%)."""
    latest = int(rows.size * recent)
    if sinks + latest >= rows.size:
        raise ValueError(f"tova_protected: {sinks} sinks and {latest} recent rows leave none to choose of {rows.size}")
    pos = rows.pos[:, :1]                                                     # (B, 1, n)
    return rows.attn.mean((1, 2))[:, None].masked_fill((pos < sinks) | (pos > rows.t - latest), math.inf)


@label("H2O-decay {decay}", decay=(0, 1), recent=(0, 1))
def h2o_decay(rows, decay=0.9, recent=0.5):
    """H2O (Zhang et al. 2023, arXiv 2306.14048) with a forgetting factor (A2SF, Jo & Shin 2024, arXiv
    2407.20485): the accumulated attention decays by `decay` per call, carried in rows.prev; between
    TOVA (decay 0: attended now) and H2O (decay 1: attended ever). Layer-wise. A row protected at the
    last call (its score was inf) starts again from its attention now."""
    a, prev = rows.attn.sum((1, 2))[:, None], rows.prev[:, :1]               # (B, 1, n) each
    s = torch.where(prev.isfinite(), decay * prev + a, a)
    return s.masked_fill(rows.pos[:, :1] > rows.t - int(rows.size * recent), math.inf)


@label("Random {seed}", seed=(0, 2**32))  # a seed the hash holds in int64
def random(rows, seed=0):
    """A seeded random baseline: a row's score is a hash of (seed, layer, step, position), the same in
    every view and batch, so the checker's determinism and exactness checks pass."""
    x = rows.pos[:, :1] * 2654435761 + (rows.t * 40503 + rows.layer * 9973 + seed * 69069)  # (B, 1, n) int64
    x = ((x ^ (x >> 13)) * 1540483477) % 2 ** 32                              # mixed, and below 2^32
    return (x ^ (x >> 15)).double() / 2 ** 32


ZOO = {name: f for name, f in dict(globals()).items() if callable(f) and hasattr(f, "label")}

"""Compression policies: how much each held row of a layer is worth keeping (Oren et al. 2024).

The contract. Every policy has one signature:  policy(rows: msrnn.Rows) -> float tensor of scores,
shape (B, 1, n) for the whole layer (every KV head keeps the same rows) or (B, Hkv, n) per KV head.
- It is called when the layer holds size + 1 rows, the current token's (pos == t) among them, and the
  lowest-scored row is dropped (give the current token inf to protect it).
- Ties go against the oldest row: of equal lowest scores, the row of the smallest pos is dropped
  (msrnn.lowest), so a constant score is Window. Rows are in slot order, not position order.
- Rows.score (attention received so far) of the current token's row is its attention at this step alone.
- A policy is a pure function of `rows`: nothing random, no writes into rows, no memory but rows.prev
  (its own scores at its last call, NaN for a new row).
TOVA is a score in the paper; Window, Window+i and H2O are rules about what to keep, written here as scores
too. Beyond the paper: in the one-shot regime (engine/oneshot.py) the policy sees every prompt row at once
and all but the `size` best go; raising ValueError refuses a size or setting; `python demo.py check
mine.py:fn` tests the contract; @label("...") gives a policy its display name.
"""
import inspect
import math


def label(text, **ranges):
    """The name tables and plots show for a policy; {param} is filled with its parameters.
    ranges: param=(low, high), the values a parameter may take, checked when a command names it."""
    def set_label(fn):
        fn.label, fn.ranges = text, ranges
        return fn
    return set_label


@label("Window")
def window(rows):
    """Window: keep the `size` most recent tokens (the baseline of Oren et al. 2024). A layer-wise
    policy drops the same row from every KV head, so they all hold the same rows in the same slots:
    head 0's positions stand for all of them."""
    return rows.pos[:, :1].double()                                  # (B, 1, n): newer is better


@label("Window+{sinks}", sinks=(0, math.inf))
def sink(rows, sinks=4):
    """Window+i: the first `sinks` tokens plus the most recent (StreamingLLM, Xiao et al. 2023, arXiv 2309.17453)."""
    if sinks >= rows.size:
        raise ValueError(f"sink: sinks={sinks} must be smaller than the multi-state size {rows.size}")
    pos = rows.pos[:, :1].double()                                   # (B, 1, n)
    return pos.masked_fill(pos < sinks, math.inf)                    # the sinks are never dropped


@label("H2O", recent=(0, 1))
def h2o(rows, recent=0.5):
    """H2O (Zhang et al. 2023, arXiv 2306.14048), layer-wise as in Oren et al. 2024: keep the `recent` share of the size
    as the most recent tokens, then those that accumulated the most attention, summed over all heads."""
    latest = rows.pos[:, :1] > rows.t - int(rows.size * recent)     # (B, 1, n)
    return rows.score.sum(1, keepdim=True).masked_fill(latest, math.inf)


@label("H2O (head)", recent=(0, 1))
def h2o_head(rows, recent=0.5):
    """H2O head-wise, as proposed but per KV head (H2O's is per attention head): each keeps its heavy hitters."""
    return rows.score.masked_fill(rows.pos > rows.t - int(rows.size * recent), math.inf)  # (B, Hkv, n)


@label("TOVA")
def tova(rows):
    """TOVA (Oren et al. 2024): keep the rows the current query attends to most, averaged over all
    query heads of the layer; the same rows stay in every KV head."""
    return rows.attn.mean((1, 2))[:, None]                           # (B, Hkv, G, n) -> (B, 1, n)


@label("TOVA (head)")
def tova_head(rows):
    """TOVA head-wise (the paper's ablation): each KV head keeps what its own queries attend to."""
    return rows.attn.mean(2)                                         # (B, Hkv, n)


POLICIES = {name: f for name, f in dict(globals()).items()
            if inspect.isfunction(f) and f.__module__ == __name__ and hasattr(f, "label")}

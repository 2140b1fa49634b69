"""Compression policies: how much each held row of a layer is worth keeping (Oren et al. 2024).

The contract. Every policy has one signature:  policy(rows: msrnn.Rows) -> float tensor of scores,
shape (B, 1, n) for the whole layer (every KV head keeps the same rows) or (B, Hkv, n) per KV head.
- The lowest-scored row is dropped: one per step (the paper's MSRNN), or, in the one-shot regime
  (engine/oneshot.py),
  all but the `size` best at once, after a prompt read with full attention.
- A policy is called only when the layer holds more rows than `size`: size + 1 at a step, every
  prompt row at a one-shot cut. The current token (pos == t) is one of them and may be dropped;
  give it inf to protect it.
- Ties go against the oldest row: of equal lowest scores, the row of the smallest pos is dropped
  (msrnn.lowest), so a constant score is Window. Rows are in slot order, which after drops is not
  position order: the rule reads pos, never the slot.
- Rows.score (attention received so far) of the current token's row is its attention at this step alone.
- Raising ValueError refuses a size or setting; the message reaches the user.
- A policy must be a pure function of `rows`: nothing random, no writes into rows, and no memory
  but rows.prev, its own scores from its last call (NaN for a new row), which makes a recurrent
  policy possible (zoo.py); `python demo.py check mine.py:fn` tests all three. The engine shows the
  call copies (guards.policy_call), so a write never reaches the state.
TOVA is a score in the paper; Window, Window+i and H2O are rules about what to keep, written here
as scores too, so that one definition serves both regimes. Add one by writing a function (here, or in your own file:
--policy mine.py:fn), optionally with a display name, @label("...").
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
    """Window+i: the first `sinks` tokens plus the most recent (StreamingLLM, Xiao et al. 2023)."""
    if sinks >= rows.size:
        raise ValueError(f"sink: sinks={sinks} must be smaller than the multi-state size {rows.size}")
    pos = rows.pos[:, :1].double()                                   # (B, 1, n)
    return pos.masked_fill(pos < sinks, math.inf)                    # the sinks are never dropped


@label("H2O", recent=(0, 1))
def h2o(rows, recent=0.5):
    """H2O (Zhang et al. 2023), layer-wise as in Oren et al. 2024: keep the `recent` share of the size
    as the most recent tokens, then those that accumulated the most attention, summed over all heads."""
    latest = rows.pos[:, :1] > rows.t - int(rows.size * recent)     # (B, 1, n)
    return rows.score.sum(1, keepdim=True).masked_fill(latest, math.inf)


@label("H2O (head)", recent=(0, 1))
def h2o_head(rows, recent=0.5):
    """H2O as originally proposed: each KV head keeps its own heavy hitters (its query group's sum)."""
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

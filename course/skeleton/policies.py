"""Part 4 of the course (course/README.md): write the six policies.

Compression policies: how much each held row of a layer is worth keeping (Oren et al. 2024).

The contract. Every policy has one signature:  policy(rows: msrnn.Rows) -> float tensor of scores,
shape (B, 1, n) for the whole layer (every KV head keeps the same rows) or (B, Hkv, n) per KV head.
- The lowest-scored row is dropped: one per step (the paper's MSRNN), or, in the one-shot regime
  (engine/oneshot.py),
  all but the `size` best at once, after a prompt read with full attention.
- A policy is called only when the layer holds more rows than `size`: size + 1 at a step, every
  prompt row at a one-shot cut. The current token (pos == t) is one of them and may be dropped;
  give it inf to protect it.
- Ties go against the oldest row: of equal lowest scores, the row of the smallest pos is dropped,
  so a constant score is Window. Rows are in slot order, which after drops is not position order:
  the rule reads pos, never the slot.
- Rows.score (attention received so far) starts at 0 for a row whose slot was just reused.
- Raising ValueError refuses a size or setting; the message reaches the user.
- A policy must be a pure function of `rows`: nothing random, no writes into rows, and no memory
  but rows.prev, its own scores from its last call (NaN for a new row), which makes a recurrent
  policy possible (zoo.py). `python demo.py check mine.py:fn` tests that; with --compile it is compiled.
Scoring rather than picking a row is how the paper describes every policy, and it lets one
definition serve both regimes. Add one by writing a function (here, or in your own file:
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
    """Part 4. Window: keep the `size` most recent tokens (the paper's baseline). Return one score
    per row, (B, 1, n): the lowest-scored row is dropped."""
    raise NotImplementedError


@label("Window+{sinks}", sinks=(0, math.inf))
def sink(rows, sinks=4):
    """Part 4. Window+i: the first `sinks` tokens plus the most recent (StreamingLLM, Xiao et al.
    2023), (B, 1, n). The sinks are never dropped (a score of inf). Refuse sinks >= rows.size with
    ValueError("sink: sinks=... must be smaller than the multi-state size ...")."""
    raise NotImplementedError


@label("H2O", recent=(0, 1))
def h2o(rows, recent=0.5):
    """Part 4. H2O (Zhang et al. 2023), layer-wise as in Oren et al. 2024, (B, 1, n): the rows of
    the int(size * recent) latest positions are kept; the others by the attention they have
    accumulated (rows.score), summed over all KV heads of the layer."""
    raise NotImplementedError


@label("H2O (head)", recent=(0, 1))
def h2o_head(rows, recent=0.5):
    """Part 4. H2O head-wise, as proposed but per KV head (H2O's is per attention head), (B, Hkv, n):
    each KV head keeps its own heavy hitters (its own rows.score), with the same recent rows kept."""
    raise NotImplementedError


@label("TOVA")
def tova(rows):
    """Part 4. TOVA (Oren et al. 2024), (B, 1, n): the current query's attention (rows.attn) averaged
    over all query heads of the layer; the same rows stay in every KV head."""
    raise NotImplementedError


@label("TOVA (head)")
def tova_head(rows):
    """Part 4. TOVA head-wise (the paper's ablation), (B, Hkv, n): each KV head keeps what its own
    G queries attend to, on average."""
    raise NotImplementedError


POLICIES = {name: f for name, f in dict(globals()).items()
            if inspect.isfunction(f) and f.__module__ == __name__ and hasattr(f, "label")}

"""Compression policies: which row a full multi-state drops.

Every policy has one signature:  policy(rows: msrnn.Rows) -> LongTensor
returning, for each sequence, the row (slot index 0..size) to drop: shape (B, 1) drops the same
row from every KV head of the layer (layer-wise), shape (B, Hkv) one row per KV head (head-wise).
It is called only when the layer holds size + 1 rows, the current token included, and it may drop
the current token. See rows' fields in msrnn.Rows; write your own the same way (README).
"""


def window(rows):
    """Window: keep the `size` most recent tokens, i.e. drop the oldest (the baseline of Oren et al. 2024)."""
    return rows.pos[:, :1].argmin(-1)                                # (B, 1)


def sink(rows, sinks=4):
    """Window+i: the first `sinks` tokens plus the most recent (StreamingLLM, Xiao et al. 2023)."""
    if sinks >= rows.size:
        raise ValueError(f"sink: sinks={sinks} must be smaller than the multi-state size {rows.size}")
    pos = rows.pos[:, :1]                                            # (B, 1, n)
    return pos.masked_fill(pos < sinks, rows.t + 1).argmin(-1)       # the oldest that is not a sink


def h2o(rows):
    """H2O (Zhang et al. 2023), layer-wise as in Oren et al. 2024: protect the size//2 most recent
    tokens; of the others drop the one that accumulated the least attention, summed over all heads."""
    recent = rows.pos[:, :1] > rows.t - rows.size // 2               # (B, 1, n)
    return rows.score.sum(1, keepdim=True).masked_fill(recent, float("inf")).argmin(-1)


def h2o_head(rows):
    """H2O as originally proposed: each KV head keeps its own heavy hitters (its query group's sum)."""
    recent = rows.pos > rows.t - rows.size // 2                      # (B, Hkv, n)
    return rows.score.masked_fill(recent, float("inf")).argmin(-1)   # (B, Hkv)


def tova(rows):
    """TOVA (Oren et al. 2024): drop the row the current query attends to least, averaged over
    all query heads of the layer; the same row leaves every KV head."""
    return rows.attn.mean((1, 2)).argmin(-1, keepdim=True)           # (B, Hkv, G, n) -> (B, 1)


def tova_head(rows):
    """TOVA head-wise (the paper's ablation): each KV head drops its own least-attended row."""
    return rows.attn.mean(2).argmin(-1)                              # (B, Hkv)


POLICIES = {f.__name__: f for f in (window, sink, h2o, h2o_head, tova, tova_head)}

import math

import torch

from lab import zoo


def tova_max(rows):
    """TOVA, but a row is worth what the head that wants it most gives it (max over the layer's query heads)."""
    return rows.attn.amax((1, 2))[:, None]


def tova_ema(rows, window=4):
    """TOVA smoothed over the last few queries: an exponential average (weight 1/window) carried in prev."""
    a, w = rows.attn.mean((1, 2))[:, None], 1 / window
    prev = rows.prev[:, :1]
    return torch.where(prev.isnan(), a, (1 - w) * prev + w * a)


def tova_v(rows):
    """TOVA times the value's norm: what the query takes from a row is its attention times its value."""
    return (rows.attn.mean(2) * rows.values.norm(dim=-1).to(rows.attn.dtype)).mean(1, keepdim=True)


def tova_sink1(rows):
    """TOVA with the first token protected."""
    return rows.attn.mean((1, 2))[:, None].masked_fill(rows.pos[:, :1] == 0, math.inf)


def tova_hold(rows, decay=0.99):
    """TOVA with a slow memory, carried in prev: a row is worth the larger of its attention now and its
    last score, decayed, so that a row the layer once attended to strongly outlives a few glances away."""
    a, prev = rows.attn.mean((1, 2))[:, None], rows.prev[:, :1]
    return torch.where(prev.isnan(), a, torch.maximum(a, decay * prev))


def tova_novel(rows, share=0.1):
    """TOVA, with a share of the rows kept for the keys most unlike the mean held key (zoo.keydiff,
    averaged over the KV heads): what nothing attends to now, but nothing else held resembles."""
    novel = zoo.keydiff(rows).mean(1, keepdim=True).sort(dim=-1, stable=True).indices   # (B, 1, n), most novel last
    return rows.attn.mean((1, 2))[:, None].scatter(-1, novel[..., -max(1, int(rows.size * share)):], math.inf)

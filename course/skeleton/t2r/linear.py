"""Part 7 of the course (course/README.md): write `FeatureMaps.phi`, `attention`,
`LinearState.attend`, `LinearState.fold` and `state_bytes`.

T2R: the pretrained transformer turned into an RNN with a constant-size state.

Softmax attention weighs key j by exp(q·k_j/√d). Linear attention weighs it by φ(q)·φ(k_j)
(Katharopoulos et al. 2020, arXiv 2006.16236), so the sums over the past collapse into a state that
never grows:  S_t = S_{t-1} + φ(k_t) v_tᵀ,  z_t = z_{t-1} + φ(k_t),  out_t = φ(q_t)ᵀS_t / φ(q_t)·z_t.
φ is T2R's learned ReLU(W x + b) with r features, one W, b per head for queries and keys alike (Kasai et
al. 2021, arXiv 2103.13076), the same with separate query and key maps (LoLCATs' way), Hedgehog's learned
[softmax(W x + b), softmax(-(W x + b))] with r features in all (Zhang et al. 2024, arXiv 2402.04347), or the
untrained ELU(x)+1 of Katharopoulos et al. The hybrid keeps the first `sinks` rows and the `window` newest
exact (softmax) and folds every other row into S, z: a finite MSRNN of sinks + w rows plus one linear
state (the sliding window + linear attention of LoLCATs, Zhang et al. 2024, arXiv 2410.10254, with
StreamingLLM's sinks, which carry a share of the attention no bounded kernel can put on 4 keys among
thousands). With `decay`, a learned γ in (0, 1) per KV head shrinks the state at every step,
S ← γS + φ(k)vᵀ and z likewise, so that a row folded d steps ago weighs γ^d (RetNet's decay, learned):
an undecayed state gives the far past more of the normaliser the longer the text. With
`rotated=False` φ reads q and k as they were before RoPE (each turned back by its own position), so the
linear part is one function at every position: RoPE's slow pairs turn through angles at 16,384 tokens that
maps trained on 1,024-token chunks never saw (the exact rows keep RoPE either way).

The maps plug into llama.py's two hooks, no copy of the decoder: LinearState.attend is a layer state
for llama.step (RNN view); `forward` hands linear attention to llama.forward (transformer view).
How the maps are trained and saved is t2r/train.py's; t2r/compare.py compares them (`demo.py t2r`).
"""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import llama
import msrnn
from engine import guards

EPS = 1e-6  # floor of the denominator: φ(q)·z is 0 when all of a query's ReLU features are off


class FeatureMaps(nn.Module):
    """φ of every layer, applied after RoPE (as Hedgehog and LoLCATs do on RoPE models), or before it
    (`rotated=False`: φ(x) at position t reads x turned back by t's angles; see the module's docstring).

    Keys get one map per KV head, queries one per query head (LoLCATs learns separate query and key
    maps), except "t2r", Kasai et al.'s: one map per KV head, applied to its keys and to the queries
    of its G heads. The state depends only on the key map, so it is kept per KV head: with
    grouped-query attention G query heads read one S. `layers` are the layers swapped out.
    kind: "t2r" (ReLU, tied), "relu" (ReLU, a query and a key map), "hedgehog", or "elu" (ELU+1,
    untrained, r = head_dim).
    """
    KINDS = ("t2r", "relu", "hedgehog", "elu")

    def __init__(self, cfg: llama.Config, r: int = 64, kind: str = "relu", window: int = 0,
                 layers=None, seed: int = 0, dtype=torch.float32, sinks: int = 0, decay: bool = False,
                 horizon=None, rotated: bool = True):
        super().__init__()
        # every argument checked, and the horizon as a tensor (n_layers, Hkv): guards.check_feature_maps
        layers, dtype, horizon = guards.check_feature_maps(cfg, r, kind, self.KINDS, window, sinks, layers, dtype, horizon,
                                                           decay, rotated, seed)
        n_layers, H, G, d = cfg.n_layers, cfg.n_kv_heads, cfg.n_heads // cfg.n_kv_heads, cfg.head_dim
        self.kind, self.window, self.r = kind, window, d if kind == "elu" else r  # ELU+1 keeps d features
        self.sinks, self.decay, self.rotated, self.layers = sinks, decay, rotated, layers
        self.inv_freq, self.cfg = llama.rope_frequencies(cfg), cfg  # (hd/2,) float64: q, k turned back (rotated=False)
        g = torch.Generator().manual_seed(seed)
        p = lambda x: nn.Parameter(x.to(dtype))
        if kind == "t2r":
            # rows of norm about 1: φ's scale cancels in plain T2R (ReLU is positively homogeneous)
            w = torch.randn(n_layers, H, 1, r, d, generator=g, dtype=torch.float64) / d**0.5
            self.wk, self.bk = p(w), p(torch.zeros(n_layers, H, 1, r))
        elif kind == "relu":
            # small: φ(q)·φ(k) starts near 0, so the hybrid starts as its window alone (only the scale
            # differs for plain T2R, and ReLU's positive homogeneity makes the scale cancel there)
            w = lambda *s: p(torch.randn(*s, generator=g, dtype=torch.float64) * 0.1 / d**0.5)
            self.wq, self.bq = w(n_layers, H, G, r, d), p(torch.zeros(n_layers, H, G, r))
            self.wk, self.bk = w(n_layers, H, 1, r, d), p(torch.zeros(n_layers, H, 1, r))
        elif kind == "hedgehog":
            # rows of norm about 1, like Hedgehog's identity start: softmax over projections of x as
            # sharp as x itself. The query map's gain exp(gq) weighs the linear part against the
            # window's softmax in the hybrid (LoLCATs learns such a factor); it cancels in plain T2R.
            rows = lambda n: torch.randn(n_layers, n, r // 2, d, generator=g, dtype=torch.float64) / d**0.5
            self.wq, self.bq = p(rows(H * G).unflatten(1, (H, G))), p(torch.zeros(n_layers, H, G, r // 2))
            self.wk, self.bk = p(rows(H)[:, :, None]), p(torch.zeros(n_layers, H, 1, r // 2))
            self.gq = p(torch.zeros(n_layers, H, G))
        if decay:  # γ = exp(-1/h), h = exp(log_h) the horizon in tokens: started long (a short start collapses)
            self.log_h = p(horizon.log())                             # (n_layers, Hkv)

    def gamma(self, layer: int):
        """The layer's decay per KV head, (Hkv,) in (0, 1], or None for an undecayed state."""
        return (-(-self.log_h[layer]).exp()).exp() if self.decay else None

    def turned_back(self, x, pos):
        """x (.., hd) as it was before RoPE, for maps with rotated=False (else x itself): each vector
        rotated back by the angles of its position; pos (T,) for x (.., T, hd), or any shape that
        broadcasts against x's (..) (a tail folds rows of a different position in every KV head)."""
        if self.rotated:
            return x
        if pos is None:
            raise ValueError("these maps read q and k before RoPE (rotated=False): phi needs their positions")
        angles = torch.as_tensor(pos, dtype=torch.float64)[..., None] * self.inv_freq  # (pos's shape, hd/2)
        cos, sin = (a.to(device=x.device, dtype=x.dtype) for a in (angles.cos(), angles.sin()))
        return llama.rope(x, cos, -sin)                              # a rotation by -angle undoes RoPE's

    def phi(self, layer: int, x, which: str, pos=None):
        """Part 7. The feature map of layer `layer`: x (B, Hkv, G for queries or 1 for keys, T, hd)
        -> features (B, Hkv, G or 1, T, r). Begin with x = self.turned_back(x, pos): x itself, but for
        maps that read q and k before RoPE (rotated=False, beyond the course; pos: x's positions).

        "elu": ELU(x) + 1 (Katharopoulos et al. 2020), r = hd. "relu": ReLU(W x + b), with
        W, b = self.wq[layer], self.bq[layer] for queries (which == "q"), self.wk, self.bk for keys:
        one (r, hd) matrix per (KV head, query head of its group). "t2r" (Kasai et al.): the same, but
        self.wk, self.bk serve the queries too (one map per KV head, shared by its G query heads). "hedgehog": the softmax over the
        features of W x + b, and of -(W x + b), concatenated (r features in all), times
        exp(self.gq[layer]) for queries; the softmaxes are taken in float32 at least (llama.wide) and
        the features returned in x's dtype. The maps' parameters are made in the model's dtype."""
        raise NotImplementedError


# ---------------------------------------------------------------- transformer view

def quadratic(q, k, v, fq, fk, window: int = 0, sinks: int = 0, gamma=None):
    """Optional, not graded: the transformer view in one O(T²) product, which `python -m t2r.mini`
    trains with where it is written (else it uses your `attention`, the same numbers, slower).

    q (B, Hkv, G, T, hd), fq its features (.., r); k, v (B, Hkv, 1, T, hd), fk (.., r) -> (B, Hkv, G, T, hd).
    Query i weighs every key j <= i by φ(q_i)·φ(k_j) (the causal mask on φ(Q)φ(K)ᵀ), then divides by the
    sum of its weights. The window, the sinks and gamma are beyond the course (not graded).
    """
    raise NotImplementedError


def attention(q, k, v, fq, fk, window: int = 0, block: int = 64, sinks: int = 0, gamma=None):
    """Part 7. The transformer view: causal linear attention (window 0) for all positions at once.
    q (B, Hkv, G, T, hd), fq = φ(q) (.., r); k, v (B, Hkv, 1, T, hd), fk = φ(k) (.., r)
    -> (B, Hkv, G, T, hd).

    Query i weighs key j <= i by φ(q_i)·φ(k_j) and divides by the sum of its weights (at least
    EPS). You may first write it as T x T weights under a causal mask and ignore `block`.
    Extra (the hybrid, window > 0): the `window` newest keys (i - j < window) are weighed by
    exp(q_i·k_j/√hd - m_i) instead, m_i the largest such score, under one normalisation for both
    parts; and, for O(T·block) memory, queries in blocks that read older blocks through running
    sums S, z. The repository's `attention` also takes `sinks` and a decay `gamma`: they are beyond the
    course and not graded (every graded test passes sinks=0, gamma=None), so you need not write them."""
    raise NotImplementedError


def decayed_cumsum(x, gamma, dim: int):
    """y_t = gamma·y_{t-1} + x_t along `dim` (y_0 = x_0); gamma broadcasts against one slice of x."""
    out, y = [], 0
    for x_t in x.unbind(dim):
        y = gamma * y + x_t
        out.append(y)
    return torch.stack(out, dim)


def swapped(maps: FeatureMaps, i: int, q, k, v, block: int | None = 64):
    """Layer i's attention with the maps' φ, window, sinks and decay: `attention` as the maps set it, in
    blocks of `block` queries, or `quadratic` with block None (the fastest for a few hundred tokens)."""
    i = guards.check_layer(maps, i)                                  # a negative i read another layer's maps
    pos = torch.arange(q.shape[3])
    fq, fk = maps.phi(i, q, "q", pos), maps.phi(i, k, "k", pos)
    if block is None:
        return quadratic(q, k, v, fq, fk, maps.window, maps.sinks, maps.gamma(i))
    return attention(q, k, v, fq, fk, maps.window, block, maps.sinks, maps.gamma(i))


def forward(model: llama.Model, maps: FeatureMaps, tokens):
    """llama.forward with linear attention in the swapped layers, softmax in the others."""
    guards.check_maps(model, maps)                                   # layers, shapes and dtype that fit the model
    guards.check_holds(maps)

    def attend(i, q, k, v):
        return swapped(maps, i, q, k, v) if i in maps.layers else softmax(model, q, k, v)
    return llama.forward(model, tokens, attend)


def softmax(model, q, k, v):
    """The layer's own causal softmax attention, as llama.forward computes it."""
    c = model.config
    return llama.softmax_attention(q, k, v, None if c.sliding_window is None else
                                   llama.causal_mask(q.shape[3], c.sliding_window, q.device))


# ---------------------------------------------------------------- RNN view

@dataclass
class LinearState:
    """One swapped layer's state: S, z over the folded rows; the first `sinks` rows exact; the `window`
    newest rows after them exact in a ring of slots (row t in slot (t - sinks) % window). Its size
    never changes with t."""
    maps: FeatureMaps
    layer: int
    S: torch.Tensor  # (B, Hkv, r, hd) Σ φ(k) vᵀ (each term shrunk by γ per step since its fold, with decay)
    z: torch.Tensor  # (B, Hkv, r)     Σ φ(k)
    K: torch.Tensor  # (B, Hkv, window, hd) the hybrid's exact recent rows; window 0 for plain T2R
    V: torch.Tensor  # (B, Hkv, window, hd)
    Ks: torch.Tensor  # (B, Hkv, sinks, hd) the sinks, exact for good
    Vs: torch.Tensor  # (B, Hkv, sinks, hd)

    def attend(self, q, k, v, t, policy=None):
        """Part 7. The RNN view, the hook llama.step calls: q (B, Hkv, G, hd), k, v (B, Hkv, hd)
        -> (B, Hkv, G, hd).

        Plain T2R (no window rows, self.K.shape[2] == 0): fold the token's (k, v) into S, z, then
        out = φ(q)ᵀS / max(φ(q)·z, EPS). Extra (the hybrid): row t goes into the ring of w slots
        (slot t % w) after the row it replaces, t - w, is folded; the held rows add
        exp(q·k/√hd - m) weights to numerator and denominator, as in `attention`. Beyond the course:
        the first self.Ks.shape[2] rows (sinks; none in the graded tests) stay exact in self.Ks, self.Vs,
        and the ring holds rows from there, row t in slot (t - sinks) % w; and each φ is told its row's
        position (phi(..., [t]) for the query, fold(k, v, pos)), which maps with rotated=False read."""
        raise NotImplementedError

    def fold(self, k, v, pos=None):
        """Part 7. Fold a row into the linear state: S += φ(k) vᵀ, z += φ(k), for k, v (B, Hkv, hd)
        (φ of keys: self.maps.phi(self.layer, ..., "k", pos)). pos, the row's position (a number, or
        (B, Hkv, 1, 1): one per KV head), is what maps with rotated=False read (attend passes it: t, or
        t - w for the ring's). The repository's `fold` also shrinks S and z by a learned decay first (maps
        made with decay=True): that is beyond the course and not graded, so you need not write it."""
        raise NotImplementedError


def init_state(model: llama.Model, maps: FeatureMaps, batch: int = 1) -> msrnn.State:
    """Per layer: a LinearState where attention is swapped out, the unbounded multi-state elsewhere."""
    guards.check_maps(model, maps)
    guards.check_holds(maps)
    c, w = model.config, maps.window
    zeros = lambda *s: torch.zeros(batch, c.n_kv_heads, *s, dtype=model.dtype, device=model.device)
    multi = msrnn.init_state(model, batch).layers
    return msrnn.State([LinearState(maps, i, zeros(maps.r, c.head_dim), zeros(maps.r), zeros(w, c.head_dim),
                                    zeros(w, c.head_dim), zeros(maps.sinks, c.head_dim), zeros(maps.sinks, c.head_dim))
                        if i in maps.layers else multi[i] for i in range(c.n_layers)])


@torch.no_grad()
def run(model: llama.Model, maps: FeatureMaps, tokens):
    """The RNN view on tokens (B, T), one step at a time: logits (B, T, vocab)."""
    tokens = guards.check_tokens(model, tokens)                      # (T,) or (B, T) ids in the vocabulary -> (B, T)
    state = init_state(model, maps, tokens.shape[0])
    return torch.stack([llama.step(model, tokens[:, t], state) for t in range(tokens.shape[1])], 1)


def state_bytes(model: llama.Model, maps: FeatureMaps) -> int:
    """Part 7. Bytes one sequence holds in all its swapped layers together: in each, the sinks' and
    the window's key and value rows, and S and z of maps.r features per KV head. (A layer not swapped
    keeps the full cache, which grows, and is not counted.)"""
    raise NotImplementedError

"""T2R: the pretrained transformer turned into an RNN with a constant-size state.

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

The maps plug into llama.py's two hooks, no copy of the decoder: LinearState is a layer state whose
`attend` llama.step calls (RNN view); `forward` hands linear attention to llama.forward (transformer view).
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
    untrained, r = head_dim). horizon: where a decay starts, in tokens, one number or one per layer and
    KV head (n_layers, Hkv), with decay=True only (default 4,096); the learned value is saved with the maps (log_h).
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
        """x (B, Hkv, G for queries or 1 for keys, T, hd) at positions pos (T,) -> features (B, Hkv, G or 1, T, r).
        pos is read only with rotated=False (turned_back)."""
        x = self.turned_back(x, pos)
        if self.kind == "elu":
            return F.elu(x) + 1
        w, b = (self.wq, self.bq) if which == "q" and self.kind != "t2r" else (self.wk, self.bk)
        w, b = w[layer].expand(-1, x.shape[2], -1, -1), b[layer].expand(-1, x.shape[2], -1)  # t2r: one map for G heads
        u = torch.einsum("bhgtd,hgrd->bhgtr", x, w) + b[:, :, None]  # (B, Hkv, G or 1, T, r or r/2)
        if self.kind in ("t2r", "relu"):
            return F.relu(u)
        # Hedgehog: softmax over the features, of Wx and of -Wx, in float32 at least (like attention's)
        u = u.to(llama.wide(u.dtype))
        f = torch.cat([u.softmax(-1), (-u).softmax(-1)], -1).to(x.dtype)  # (B, Hkv, G or 1, T, r)
        return f * self.gq[layer][:, :, None, None].exp() if which == "q" else f


# ---------------------------------------------------------------- transformer view

def quadratic(q, k, v, fq, fk, window: int = 0, sinks: int = 0, gamma=None):
    """The transformer view as the equations write it, O(T²): every query against every key.

    q (B, Hkv, G, T, hd), fq its features (.., r); k, v (B, Hkv, 1, T, hd), fk (.., r) -> (B, Hkv, G, T, hd).
    Key j is exact for query i if it is one of the first `sinks` or of the `window` newest, and weighs
    exp(q_i·k_j/√d - m_i) (m_i: query i's largest exact score); every other earlier key weighs
    φ(q_i)·φ(k_j) γ^(i - j - window): row j is folded into the state at step j + window (plain T2R:
    window 0, at once) and shrinks by γ at every step after. One normalisation for both parts.
    """
    guards.check_span(window, sinks, 1, gamma, (fq, fk))
    T = q.shape[3]
    j = torch.arange(T, device=q.device)
    d = j[:, None] - j                                               # (T, T) query position i - key position j
    exact = (d >= 0) & ((d < window) | (j < sinks))                  # (T, T) the window's and the sinks' keys
    A = (fq @ fk.transpose(-1, -2)) * ((d >= 0) & ~exact)            # (B, Hkv, G, T, T) φ(q_i)·φ(k_j), linear keys
    if gamma is not None:                                            # a matrix of powers of γ (Hkv,)
        A = A * gamma.view(-1, 1, 1, 1) ** (d - window).clamp(min=0)
    if window or sinks:
        s = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~exact, float("-inf"))  # (B, Hkv, G, T, T)
        A = A + (s - s.amax(-1, keepdim=True)).exp()                 # every query has an exact key: its own or sink 0
    return A @ v / A.sum(-1, keepdim=True).clamp_min(EPS)            # (B, Hkv, G, T, hd)


def attention(q, k, v, fq, fk, window: int = 0, block: int = 64, sinks: int = 0, gamma=None):
    """Causal linear attention (window 0) or the hybrid, for all positions at once.

    q (B, Hkv, G, T, hd), fq its features (.., r); k, v (B, Hkv, 1, T, hd), fk (.., r) -> (B, Hkv, G, T, hd).
    Key j is exact for query i if it is one of the first `sinks` or of the `window` newest (i - j < window);
    exact keys weigh exp(q_i·k_j/√d - m_i) (m_i: the largest exact score, LoLCATs' shift), every other
    key φ(q_i)·φ(k_j), times γ^(i - j - window) with a decay gamma (Hkv,): row j is folded into the
    state at step j + window and shrinks by γ at every step after. One normalisation for both parts.
    No separate mixing factor: ReLU(W x + b) is positively homogeneous, so the scale of W, b is the
    learned weight of the linear part; Hedgehog's has its gain.
    Queries go in blocks of m >= window: a block sees its own and the previous block's keys one by one,
    older blocks through their running sums (S, z), so time and memory are O(T m) rather than O(T²).
    """
    guards.check_span(window, sinks, block, gamma, (fq, fk))
    T, m = q.shape[3], max(block, window)
    n = -(-T // m)                                                   # blocks
    pos = lambda n: torch.arange(n, device=q.device)
    fk = fk * (pos(T) >= sinks)[:, None] if sinks else fk            # a sink never enters the linear part
    blocks = lambda x, front: F.pad(x, (0, 0, front * m, n * m - T)).unflatten(3, (front + n, m))
    qb, fqb = blocks(q, 0), blocks(fq, 0)                            # (B, Hkv, G, n, m, hd or r)
    kb, vb, fkb = blocks(k, 1), blocks(v, 1), blocks(fk, 1)          # (B, Hkv, 1, n+1, m, ..): a zero block first
    two = lambda x: torch.cat([x[:, :, :, :-1], x[:, :, :, 1:]], 4)  # (B, Hkv, 1, n, 2m, ..): previous + own block
    dist = pos(m)[:, None] + m - pos(2 * m)                          # (m, 2m) query position - key position
    A = (fqb @ two(fkb).transpose(-1, -2)) * (dist >= window)        # (B, Hkv, G, n, m, 2m) linear weights
    if gamma is not None:                                            # γ^(i - j - window) for a linear key
        A = A * gamma.view(-1, 1, 1, 1, 1) ** (dist - window).clamp(min=0)
    query_pos = pos(n)[:, None] * m + pos(m)                         # (n, m)
    exact = []                                                       # (scores, values) of the exact keys
    if window:
        key_pos = (pos(n)[:, None] - 1) * m + pos(2 * m)             # (n, 2m); < 0 in the zero block
        seen = (dist >= 0) & (dist < window) & (key_pos >= sinks)[:, None]  # (n, m, 2m) the window, sinks apart
        exact.append(((qb @ two(kb).transpose(-1, -2)).masked_fill(~seen, float("-inf")), None))
    if sinks:
        ks, vs = k[:, :, :, None, :sinks], v[:, :, :, None, :sinks]  # (B, Hkv, 1, 1, sinks, hd)
        seen = query_pos[..., None] >= pos(ks.shape[4])              # (n, m, sinks) a sink once it exists
        exact.append(((qb @ ks.transpose(-1, -2)).masked_fill(~seen, float("-inf")), vs))
    num, den = 0, 0
    if exact:  # exp(s - m_i), m_i over every exact key: the window's (its own key) or sink 0's, always seen
        s = [x / math.sqrt(q.shape[-1]) for x, _ in exact]
        top = torch.stack([x.amax(-1) for x in s]).amax(0)[..., None]  # (B, Hkv, G, n, m, 1)
        for x, (_, vs) in zip(s, exact):
            e = (x - top).exp()
            if vs is None:                                           # the window shares A's keys
                A = A + e
            else:
                num, den = num + e @ vs, den + e.sum(-1, keepdim=True)
    # blocks up to b-2 enter through the state the RNN would hold: S = Σ φ(k) vᵀ, z = Σ φ(k)
    fk1 = fkb[:, :, :, 1:]                                           # (B, Hkv, 1, n, m, r)
    if gamma is None:
        P = fk1.transpose(-1, -2) @ vb[:, :, :, 1:]                  # (B, Hkv, 1, n, r, hd) each block's sum
        S = F.pad(P.cumsum(3), (0, 0, 0, 0, 2, 0))[:, :, :, :n]      # shifted by two blocks
        z = F.pad(fk1.sum(4).cumsum(3), (0, 0, 2, 0))[:, :, :, :n, :, None]  # (B, Hkv, 1, n, r, 1)
        read = fqb
    else:  # the state at block b's start: key j of block b - 2 or older weighs γ^(bm - j - window) there
        g = gamma.view(-1, 1, 1, 1)
        w = fk1 * g[..., None] ** (2 * m - pos(m) - window)[:, None]  # (B, Hkv, 1, n, m, r): its weight 2 blocks on
        S = decayed_cumsum(F.pad(w.transpose(-1, -2) @ vb[:, :, :, 1:], (0, 0, 0, 0, 2, 0))[:, :, :, :n],
                           g ** m, 3)                                 # (B, Hkv, 1, n, r, hd), shifted by two blocks
        z = decayed_cumsum(F.pad(w.sum(4), (0, 0, 2, 0))[:, :, :, :n], g[..., 0] ** m, 3)[..., None]  # (B, Hkv, 1, n, r, 1)
        read = fqb * g[..., None] ** pos(m)[:, None]                 # query a steps into its block: γ^a
    num = num + A @ two(vb) + read @ S                               # (B, Hkv, G, n, m, hd)
    den = den + A.sum(-1, keepdim=True) + read @ z                   # (B, Hkv, G, n, m, 1)
    return (num / den.clamp_min(EPS)).flatten(3, 4)[:, :, :, :T]     # (B, Hkv, G, T, hd)


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
        """The hook llama.step calls: q (B, Hkv, G, hd), k, v (B, Hkv, hd) -> (B, Hkv, G, hd)."""
        w, sinks = self.K.shape[2], self.Ks.shape[2]
        u = t - sinks                                                # the row's place after the sinks
        if u < 0:  # one of the first rows: a sink, never folded
            self.Ks[:, :, t], self.Vs[:, :, t] = k, v
        elif w == 0:  # plain linear attention: the token joins the sums before its query reads them
            self.fold(k, v, t)
        else:  # row t - w leaves the window: fold it into S, z; row t takes its slot
            if u >= w:
                self.fold(self.K[:, :, u % w], self.V[:, :, u % w], t - w)
            self.K[:, :, u % w], self.V[:, :, u % w] = k, v
        fq = self.maps.phi(self.layer, q[:, :, :, None], "q", [t])[:, :, :, 0]  # (B, Hkv, G, r)
        num, den = fq @ self.S, fq @ self.z[..., None]               # (B, Hkv, G, hd), (B, Hkv, G, 1)
        K = torch.cat([self.Ks[:, :, :min(t + 1, sinks)], self.K[:, :, :min(max(u + 1, 0), w)]], 2)  # (B, Hkv, n, hd)
        V = torch.cat([self.Vs[:, :, :min(t + 1, sinks)], self.V[:, :, :min(max(u + 1, 0), w)]], 2)
        if K.shape[2]:  # the exact rows: exp(s - m), m their largest score
            s = q @ K.transpose(-1, -2) / math.sqrt(q.shape[-1])    # (B, Hkv, G, n)
            e = (s - s.amax(-1, keepdim=True)).exp()
            num, den = num + e @ V, den + e.sum(-1, keepdim=True)
        return num / den.clamp_min(EPS)

    def fold(self, k, v, pos=None):
        """S ← γS + φ(k)vᵀ, z ← γz + φ(k) (γ = 1 without decay) for the row k, v (B, Hkv, hd) of position pos
        (a number, or (B, Hkv, 1, 1): one per KV head): a row folded d steps ago weighs γ^d."""
        fk = self.maps.phi(self.layer, k[:, :, None, None], "k", pos)[:, :, 0, 0]  # (B, Hkv, r)
        gamma = self.maps.gamma(self.layer)
        if gamma is not None:
            self.S *= gamma.to(self.S.dtype)[:, None, None]
            self.z *= gamma.to(self.z.dtype)[:, None]
        self.S += fk[..., None] * v[..., None, :]                    # outer product φ(k) vᵀ
        self.z += fk


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
    """Bytes one sequence holds in all its swapped layers together: in each, the sinks' and the window's
    key and value rows, and S and z of maps.r features per KV head. (A layer not swapped keeps the full
    cache, which grows, and is not counted.)"""
    guards.check_maps(model, maps)  # another model's maps would count its layers with this one's heads
    c = model.config
    window = 2 * (maps.window + maps.sinks) * c.head_dim              # a key and a value of head_dim per row
    return len(maps.layers) * c.n_kv_heads * (window + maps.r * (c.head_dim + 1)) * model.embed.element_size()

"""Part 1 of the course (course/README.md): write `rope`, `qkv`, `step` and `forward`.

A LLaMA / Mistral decoder with two views of the same weights, each one loop over the layers.

RNN view (`step`): one token at a time; in layer l,
    x_t^{l+1}, (K, V)_t^l = f^l(x_t^l, (K, V)_{t-1}^l)        (Oren et al. 2024)
where (K, V)^l is the layer's multi-state, one key/value row per kept token (msrnn.py).

Transformer view (`forward`): every position at once; `attention` says how each layer's queries
read its keys and values: causal softmax by default, a masked or stepped one for the other views.

Both use the same projections (`qkv`) and MLP; with no compression policy they compute the same
function, and test_equivalence.py proves it. Weights are plain tensors in dataclasses.
"""
import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine import guards


@dataclass
class Config:
    vocab_size: int
    dim: int                    # hidden_size
    n_layers: int
    n_heads: int                # query heads
    n_kv_heads: int             # key/value heads; fewer than n_heads is grouped-query attention
    head_dim: int
    ffn_dim: int                # intermediate_size of the SwiGLU MLP
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None   # {"rope_type": "linear" | "llama3", ...} or None
    sliding_window: int | None = None  # Mistral: a query sees itself and the W-1 tokens before it
    tie_embeddings: bool = False
    max_positions: int | None = None   # max_position_embeddings: the longest context it was trained for


@dataclass
class Layer:
    attn_norm: torch.Tensor  # (dim,)
    wq: torch.Tensor         # (n_heads * head_dim, dim)
    wk: torch.Tensor         # (n_kv_heads * head_dim, dim)
    wv: torch.Tensor         # (n_kv_heads * head_dim, dim)
    wo: torch.Tensor         # (dim, n_heads * head_dim)
    mlp_norm: torch.Tensor   # (dim,)
    w_gate: torch.Tensor     # (ffn_dim, dim)
    w_up: torch.Tensor       # (ffn_dim, dim)
    w_down: torch.Tensor     # (dim, ffn_dim)

    def __post_init__(self):
        # q, k, v (and gate, up) read the same input: one matrix each is one product instead of three
        # (a layer's weights are read in 4 products a decode step, not 7). The named ones become views.
        self.w_qkv = torch.cat([self.wq, self.wk, self.wv])          # (q + 2 kv, dim)
        self.wq, self.wk, self.wv = self.w_qkv.split([len(self.wq), len(self.wk), len(self.wv)])
        self.w_gate_up = torch.cat([self.w_gate, self.w_up])         # (2 ffn_dim, dim)
        self.w_gate, self.w_up = self.w_gate_up.split([len(self.w_gate), len(self.w_up)])


@dataclass
class Model:
    config: Config
    embed: torch.Tensor      # (vocab, dim)
    layers: list[Layer]
    norm: torch.Tensor       # (dim,)
    lm_head: torch.Tensor    # (vocab, dim); the same tensor as `embed` when tied
    inv_freq: torch.Tensor   # (head_dim/2,) float64 RoPE frequencies, scaling applied

    @property
    def dtype(self):
        return self.embed.dtype

    @property
    def device(self):
        return self.embed.device

    def to(self, device=None, dtype=None) -> "Model":
        """A copy (not in place) on another device and/or in another float type. Each layer is rebuilt, so its fused
        matrices stay fused; RoPE frequencies stay float64 on the CPU. Also to(dtype) and to(dtype, device)."""
        device, dtype = guards.check_to(device, dtype)
        move = lambda x: x.to(device=device, dtype=dtype)
        layers = [Layer(**{f.name: move(getattr(L, f.name)) for f in dataclasses.fields(Layer)}) for L in self.layers]
        embed = move(self.embed)
        return dataclasses.replace(self, embed=embed, layers=layers, norm=move(self.norm),
                                   lm_head=embed if self.lm_head is self.embed else move(self.lm_head))


# Which float each tensor is kept in, decided here for every device and dtype. Weights, activations,
# keys and values (the multi-state, the memory of the paper's Table 1) are in the model's dtype. The
# few reductions that lose digits in bfloat16 or float16 run in float32, as in the reference
# implementations, and are cast back: RMSNorm, softmax, and what the policies read (the attention
# TOVA averages, the score H2O accumulates, kept in float32). A float64 model keeps float64
# throughout, so the exactness tests are unaffected. RoPE angles are computed in float64 on the CPU.
def wide(dtype: torch.dtype) -> torch.dtype:
    """float32 for the half types, else the dtype itself (float32, float64)."""
    return torch.promote_types(dtype, torch.float32)


def rope_frequencies(cfg: Config) -> torch.Tensor:
    """RoPE inverse frequencies (Su et al. 2021, arXiv 2104.09864), with linear or Llama 3's scaling."""
    inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim)
    s = cfg.rope_scaling
    if s is None:
        return inv_freq
    if s["rope_type"] == "linear":  # positions divided by the factor
        return inv_freq / s["factor"]
    return llama3_scaling(inv_freq, s)


def llama3_scaling(inv_freq: torch.Tensor, s: dict) -> torch.Tensor:
    """Llama 3's: long wavelengths slowed by `factor`, short ones kept, a smooth ramp between (the rule
    of Meta's Llama 3.1 reference code and transformers' _compute_llama3_parameters)."""
    factor, lo, hi = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_len = s["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    smooth = ((old_len / wavelen - lo) / (hi - lo)).clamp(0, 1)
    return (1 - smooth) * inv_freq / factor + smooth * inv_freq


def rope_angles(model: Model, positions: torch.Tensor):
    """cos and sin of position * frequency, (..., head_dim/2), in the model's dtype and on its device.
    positions: an integer tensor on the CPU."""
    angles = positions.to(torch.float64)[..., None] * model.inv_freq  # float64 so large t stays exact
    move = lambda x: x.to(device=model.device, dtype=model.dtype)
    return move(angles.cos()), move(angles.sin())


def rope(x, cos, sin):
    """Part 1. Rotary position embedding (Su et al. 2021) in the rotate-half layout of Hugging Face
    checkpoints: split the last axis of x (..., hd) into halves x1, x2 and rotate each pair
    (x1[i], x2[i]) by its angle, whose cos and sin (..., hd/2) are given. Return (..., hd)."""
    raise NotImplementedError


def rms_norm(x, weight, eps):
    # RMSNorm (Zhang & Sennrich 2019, arXiv 1910.07467), in float32 at least (see `wide`), then the weight in x's dtype
    h = x.to(wide(x.dtype))
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def mlp(L: Layer, h):
    # SwiGLU (Shazeer 2020, arXiv 2002.05202 eq. 5): down(silu(gate h) * up h)
    gate, up = F.linear(h, L.w_gate_up).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, L.w_down)


def random_model(cfg: Config, seed=0, dtype=torch.float64) -> Model:
    """Random weights for a config: the tests' and the policy checker's tiny models, no download."""
    g, dtype = torch.Generator().manual_seed(seed), guards.check_dtype(dtype)
    # scale 0.3 (rather than 1/sqrt(dim)) gives peaked, position-dependent attention: a harder test
    r = lambda *shape, s=0.3: (torch.randn(*shape, generator=g, dtype=torch.float64) * s).to(dtype)
    norm = lambda: (1 + 0.1 * torch.randn(cfg.dim, generator=g, dtype=torch.float64)).to(dtype)
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    layers = [Layer(attn_norm=norm(), wq=r(q, cfg.dim), wk=r(kv, cfg.dim), wv=r(kv, cfg.dim),
                    wo=r(cfg.dim, q), mlp_norm=norm(), w_gate=r(cfg.ffn_dim, cfg.dim),
                    w_up=r(cfg.ffn_dim, cfg.dim), w_down=r(cfg.dim, cfg.ffn_dim))
              for _ in range(cfg.n_layers)]
    embed = r(cfg.vocab_size, cfg.dim, s=1.0)
    return Model(config=cfg, embed=embed, layers=layers, norm=norm(),
                 lm_head=embed if cfg.tie_embeddings else r(cfg.vocab_size, cfg.dim), inv_freq=rope_frequencies(cfg))


# ---------------------------------------------------------------- one layer's parts, shared by both views

def qkv(model: Model, L: Layer, x: torch.Tensor, cos, sin):
    """Part 1. Queries, keys and values of hidden states x (..., dim) at positions whose RoPE
    angles are cos, sin (..., hd/2): q (..., Hkv, G, hd); k, v (..., Hkv, hd).

    RMSNorm with L.attn_norm (rms_norm), one product with the fused L.w_qkv (rows: the H query
    heads, then the Hkv key heads, then the Hkv value heads, hd each), RoPE on queries and keys
    (not values), and the H query heads grouped as (Hkv, G): query head h reads KV head h // G.
    The same function serves both views: x is (B, dim) in step, (B, T, dim) in forward."""
    raise NotImplementedError


def output(model: Model, x: torch.Tensor) -> torch.Tensor:
    """The final norm and the unembedding: logits (..., vocab) for hidden states (..., dim)."""
    return F.linear(rms_norm(x, model.norm, model.config.norm_eps), model.lm_head)


# ---------------------------------------------------------------- RNN view

@guards.all_or_nothing  # a step that raises leaves the state as it was before it
def step(model: Model, tokens: torch.Tensor, state, policy=None) -> torch.Tensor:
    """Part 1. One token per sequence through every layer: logits (B, vocab) for tokens (B,).

    The paper's x_t^{l+1}, (K, V)_t^l = f^l(x_t^l, (K, V)_{t-1}^l): embed the tokens; RoPE
    angles at position t = state.t; in each layer L with its multi-state ms (state.layers),
    q, k, v from qkv, then o = ms.attend(q, k, v, t, policy) (it appends the row, attends and
    drops; msrnn.py), the output projection L.wo with a residual, the MLP (mlp, after rms_norm
    with L.mlp_norm) with a residual. Then advance state.t by one and return output(model, x)."""
    raise NotImplementedError


# ---------------------------------------------------------------- transformer view

def causal_mask(T: int, window: int | None = None, device=None) -> torch.Tensor:
    """(T, T) bool, True where query i may attend to key j: j <= i, and i - j < window with a sliding window."""
    guards.check_memory(T * T, f"a ({T}, {T}) attention mask")
    i, j = torch.arange(T, device=device)[:, None], torch.arange(T, device=device)[None, :]
    mask = j <= i
    if window is not None:
        mask &= i - j < window
    return mask


def softmax_attention(q, k, v, mask=None):
    """softmax(q kᵀ / √hd, -inf where mask is False) v, for every query at once.
    q (B, Hkv, G, T, hd), k and v (B, Hkv, 1, T, hd) -> (B, Hkv, G, T, hd). mask: bool (T, T),
    (B, Hkv, 1, T, T) one per KV head, or (B, 1, 1, T, T) one per layer; None is the causal mask.
    PyTorch's fused kernel computes exactly this formula, in tiles, never holding the (T, T) scores."""
    B, Hkv, G, T, hd = q.shape
    if mask is not None and mask.dim() == 5:  # one per layer, or one shared by the G query heads of a KV head
        mask = mask[:, 0] if mask.shape[1] == 1 else mask.expand(B, Hkv, G, T, T).reshape(B, Hkv * G, T, T)
    o = F.scaled_dot_product_attention(q.reshape(B, Hkv * G, T, hd), k[:, :, 0], v[:, :, 0], attn_mask=mask,
                                       is_causal=mask is None, enable_gqa=True)  # query head h reads KV head h // G
    return o.view(B, Hkv, G, T, hd)


def forward(model: Model, tokens: torch.Tensor, attention=None, last: bool = False) -> torch.Tensor:
    """Part 1. Logits for every position at once: (T, vocab) for tokens (T,), (B, T, vocab) for
    (B, T); with last, only the last position's, (1, vocab) or (B, 1, vocab).

    The same layers as step, every position at once: ids = guards.check_tokens(model, tokens)
    gives the tokens as (B, T) on the model's device (or names what is wrong with them), and
    guards.check_positions(model, T) warns past the trained length (step's caller calls both);
    RoPE at positions 0 .. T-1, and in layer i
    o = attention(i, q, k, v) with q (B, Hkv, G, T, hd) and k, v (B, Hkv, 1, T, hd) (permute
    qkv's outputs); the output is (B, Hkv, G, T, hd). attention=None means causal softmax:
    softmax_attention with the mask None, or causal_mask(T, sliding_window) for a Mistral model."""
    raise NotImplementedError

"""A LLaMA / Mistral decoder with two views of the same weights.

RNN view (`step`): one token at a time, every layer is
    x_t, (K, V)_t = f(x_t, (K, V)_{t-1})                       (Oren et al. 2024)
where (K, V) is the layer's multi-state, one key/value row per kept token.

Transformer view (`forward`): all positions at once under an attention mask.

With no compression policy the two compute the same function; test_equivalence.py proves it.
Weights are plain tensors in dataclasses. The multi-state lives outside (msrnn.py): `step` is
handed it and updates it in place; msrnn.prefill reads a whole text with the transformer view's
position-wise parts (attention_inputs, after_attention, output) around the multi-state's attention.
"""
import dataclasses
import math
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F


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
        # Speed only: q, k, v (and gate, up) read the same input, so one matrix each lets a decode
        # step stream every weight once in 4 products instead of 7. The named ones become views.
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
        """A copy on another device and/or in another float type. Each layer is rebuilt, so its fused
        matrices stay fused and the named ones their views; RoPE frequencies stay float64 on the CPU."""
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
    """RoPE inverse frequencies (Su et al. 2021), with Llama 3's or linear scaling."""
    inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim)
    s = cfg.rope_scaling
    if s is None:
        return inv_freq
    if s["rope_type"] == "linear":  # positions divided by the factor
        return inv_freq / s["factor"]
    # llama3: long wavelengths slowed by `factor`, short ones kept, a smooth ramp between
    # (the rule of Meta's Llama 3.1 reference code and transformers' _compute_llama3_parameters)
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
    """Rotate pairs (x_i, x_{i+d/2}) by their angle: the rotate-half layout of HF checkpoints."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def rms_norm(x, weight, eps):
    # RMSNorm (Zhang & Sennrich 2019), in float32 at least (see `wide`), then the weight in x's dtype
    h = x.to(wide(x.dtype))
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def mlp(L: Layer, h):
    # SwiGLU (Shazeer 2020, arXiv 2002.05202 eq. 5): down(silu(gate h) * up h)
    gate, up = F.linear(h, L.w_gate_up).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, L.w_down)


def random_model(cfg: Config, seed=0, dtype=torch.float64) -> Model:
    """Random weights for a config: the tests' and the policy checker's tiny models, no download."""
    g = torch.Generator().manual_seed(seed)
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


# ---------------------------------------------------------------- RNN view

def step(model: Model, tokens: torch.Tensor, state, policy=None) -> torch.Tensor:
    """One token per sequence through every layer: logits (B, vocab) for tokens (B,).

    state (msrnn.State): one multi-state per layer and the position t of these tokens; both are
    updated in place (the row is appended, t advances), so the caller keeps the same state object.
    policy: which row to drop when a layer holds more rows than its size (None for the unbounded
    multi-state, i.e. the transformer itself).
    """
    c, t = model.config, state.t
    B, G = tokens.shape[0], c.n_heads // c.n_kv_heads
    cos, sin = rope_angles(model, torch.tensor(t))                   # (head_dim/2,)
    x = model.embed[tokens]                                          # (B, dim)
    for L, ms in zip(model.layers, state.layers):
        # queries, keys and values of the current token
        h = rms_norm(x, L.attn_norm, c.norm_eps)
        qkv = F.linear(h, L.w_qkv).view(B, c.n_heads + 2 * c.n_kv_heads, c.head_dim)  # (B, H + 2 Hkv, hd)
        # RoPE at the token's absolute position, on queries and keys at once; keys keep that
        # rotation for as long as they are kept
        qk = rope(qkv[:, :c.n_heads + c.n_kv_heads], cos, sin)
        q = qk[:, :c.n_heads].view(B, c.n_kv_heads, G, c.head_dim)  # (B, Hkv, G, hd): G query heads share a KV head
        k, v = qk[:, c.n_heads:], qkv[:, c.n_heads + c.n_kv_heads:]  # (B, Hkv, hd) each
        # append (k, v) to the multi-state, attend over all its rows, and let the policy drop one
        # if more than `size` remain (msrnn.MultiState.attend; t2r.py's linear state has its own)
        o = ms.attend(q, k, v, t, policy).reshape(B, c.n_heads * c.head_dim)  # (B, Hkv, G, hd) -> (B, H*hd)
        x = x + F.linear(o, L.wo)
        x = x + mlp(L, rms_norm(x, L.mlp_norm, c.norm_eps))
    state.t += 1
    return output(model, x)


def output(model: Model, x: torch.Tensor) -> torch.Tensor:
    """The final norm and the unembedding: logits (..., vocab) for hidden states (..., dim)."""
    return F.linear(rms_norm(x, model.norm, model.config.norm_eps), model.lm_head)


# ---------------------------------------------------------------- transformer view

def causal_mask(T: int, window: int | None = None, device=None) -> torch.Tensor:
    """(T, T) bool, True where query i may attend to key j: j <= i, and i - j < window with a sliding window."""
    check_memory(T * T, f"a ({T}, {T}) attention mask")
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
    B, H, G, T, hd = q.shape
    if mask is not None and mask.dim() == 5:  # one per layer, or one shared by the G query heads of a KV head
        mask = mask[:, 0] if mask.shape[1] == 1 else mask.expand(B, H, G, T, T).reshape(B, H * G, T, T)
    o = F.scaled_dot_product_attention(q.reshape(B, H * G, T, hd), k[:, :, 0], v[:, :, 0], attn_mask=mask,
                                       is_causal=mask is None, enable_gqa=True)  # query head h reads KV head h // G
    return o.view(B, H, G, T, hd)


def attention_inputs(model: Model, L: Layer, x: torch.Tensor, cos, sin):
    """Queries, keys and values of every position of x (B, T, dim), RoPE applied:
    q (B, Hkv, G, T, hd); k, v (B, Hkv, 1, T, hd), the 1 broadcasting over a KV head's G query heads."""
    c = model.config
    B, T, _ = x.shape
    h = rms_norm(x, L.attn_norm, c.norm_eps)
    q = F.linear(h, L.wq).view(B, T, c.n_kv_heads, -1, c.head_dim).permute(0, 2, 3, 1, 4)  # (B, Hkv, G, T, hd)
    k = F.linear(h, L.wk).view(B, T, c.n_kv_heads, 1, c.head_dim).permute(0, 2, 3, 1, 4)   # (B, Hkv, 1, T, hd)
    v = F.linear(h, L.wv).view(B, T, c.n_kv_heads, 1, c.head_dim).permute(0, 2, 3, 1, 4)   # (B, Hkv, 1, T, hd)
    return rope(q, cos, sin), rope(k, cos, sin), v


def after_attention(model: Model, L: Layer, x: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    """The rest of a layer for every position: x (B, T, dim) plus the attention output o (B, Hkv, G, T, hd)
    through the output projection, then the MLP."""
    B, T, _ = x.shape
    o = o.permute(0, 3, 1, 2, 4).reshape(B, T, -1)                   # (B, Hkv, G, T, hd) -> (B, T, H*hd)
    x = x + F.linear(o, L.wo)
    return x + mlp(L, rms_norm(x, L.mlp_norm, model.config.norm_eps))


def forward(model: Model, tokens: torch.Tensor, attention=None) -> torch.Tensor:
    """Logits for every position at once: (T, vocab) for tokens (T,), (B, T, vocab) for (B, T).

    attention(layer_index, q, k, v) -> (B, Hkv, G, T, hd) replaces causal softmax attention: the
    tests' references and t2r.py's linear attention use it.
    """
    ids = check_tokens(model, tokens)                                # (B, T) on the model's device
    single = tokens.dim() == 1
    T, window = ids.shape[1], model.config.sliding_window
    check_positions(model, T)
    cos, sin = rope_angles(model, torch.arange(T))                   # (T, head_dim/2)
    causal = None if window is None else causal_mask(T, window, model.device)  # None: the kernel's own causal mask
    x = model.embed[ids]                                             # (B, T, dim)
    for i, L in enumerate(model.layers):
        q, k, v = attention_inputs(model, L, x, cos, sin)
        o = softmax_attention(q, k, v, causal) if attention is None else attention(i, q, k, v)
        x = after_attention(model, L, x, o)
    logits = output(model, x)
    return logits[0] if single else logits


# ---------------------------------------------------------------- checks at the boundary
# The entry points (forward here; run, feed, prefill, masked_forward, generate in msrnn.py) check
# their inputs once, so that the step itself stays the equation and a bad input gets a message
# that names it rather than a wrong answer (a negative id would silently index the last rows).

def check_tokens(model: Model, tokens, dims=(1, 2)) -> torch.Tensor:
    """tokens as (B, T) on the model's device: an integer tensor (T,) or (B, T), on any device, T >= 1,
    of ids 0 <= id < vocab_size."""
    if not isinstance(tokens, torch.Tensor) or tokens.dtype.is_floating_point or tokens.dtype.is_complex \
            or tokens.dtype == torch.bool:
        got = tokens.dtype if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(f"tokens must be an integer tensor of token ids, got {got}")
    if tokens.dim() not in dims or tokens.shape[-1] == 0 or tokens.numel() == 0:
        want = " or ".join({1: "(T,)", 2: "(B, T)"}[d] for d in dims)
        raise ValueError(f"tokens must have shape {want} with at least one token, got {tuple(tokens.shape)}")
    if tokens.device.type != "meta":  # meta tensors (test_devices.py) have shapes but no values
        lo, hi = tokens.aminmax()
        if lo < 0 or hi >= model.config.vocab_size:
            bad = lo.item() if lo < 0 else hi.item()
            raise ValueError(f"token id {bad} is outside the vocabulary (0 <= id < {model.config.vocab_size})")
    return (tokens.view(1, -1) if tokens.dim() == 1 else tokens).to(model.device)


def check_positions(model: Model, end: int):
    """A warning, not an error, when a run reaches past max_position_embeddings: a bounded multi-state
    still gives each token its absolute position, so RoPE angles the model never saw in training can
    come up, and quality may drop; studying that is legitimate, doing it unawares is not."""
    n = model.config.max_positions
    if n is not None and end > n:
        warnings.warn(f"positions up to {end - 1} are past the model's max_position_embeddings ({n}); "
                      "it was not trained on them and quality may drop", stacklevel=3)


def check_memory(nbytes: int, what: str):
    """Refuse, before allocating, something larger than the memory available now (Linux's MemAvailable,
    or the cgroup's limit where lower): a clear error rather than the kernel killing the process."""
    if nbytes < 2 ** 28:  # small things are not worth the look
        return
    available = None
    try:
        with open("/proc/meminfo") as f:
            available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
        with open("/sys/fs/cgroup/memory.max") as f, open("/sys/fs/cgroup/memory.current") as g:
            limit = f.read().strip()
            if limit != "max":
                available = min(available, int(limit) - int(g.read()))
    except (OSError, StopIteration, ValueError):
        pass
    if available is not None and nbytes > available:
        raise MemoryError(f"{what} needs {nbytes / 2 ** 30:.1f} GiB, but only {available / 2 ** 30:.1f} GiB "
                          "of memory is available")

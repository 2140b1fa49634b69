"""Tiny random models built in code, so most tests need no download."""
import torch

import llama


def tiny_config(**over) -> llama.Config:
    """2 layers, dim 32, 4 query heads sharing 2 KV heads (grouped-query attention)."""
    c = dict(vocab_size=61, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, ffn_dim=48,
             norm_eps=1e-5, rope_theta=10000.0)
    c.update(over)
    return llama.Config(**c)


def random_model(cfg: llama.Config, seed=0, dtype=torch.float64) -> llama.Model:
    g = torch.Generator().manual_seed(seed)
    # scale 0.3 (rather than 1/sqrt(dim)) gives peaked, position-dependent attention: a harder test
    r = lambda *shape, s=0.3: (torch.randn(*shape, generator=g, dtype=torch.float64) * s).to(dtype)
    norm = lambda: (1 + 0.1 * torch.randn(cfg.dim, generator=g, dtype=torch.float64)).to(dtype)
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    layers = [llama.Layer(attn_norm=norm(), wq=r(q, cfg.dim), wk=r(kv, cfg.dim), wv=r(kv, cfg.dim),
                          wo=r(cfg.dim, q), mlp_norm=norm(), w_gate=r(cfg.ffn_dim, cfg.dim),
                          w_up=r(cfg.ffn_dim, cfg.dim), w_down=r(cfg.dim, cfg.ffn_dim))
              for _ in range(cfg.n_layers)]
    embed = r(cfg.vocab_size, cfg.dim, s=1.0)
    return llama.Model(config=cfg, embed=embed, layers=layers, norm=norm(),
                       lm_head=embed if cfg.tie_embeddings else r(cfg.vocab_size, cfg.dim),
                       inv_freq=llama.rope_frequencies(cfg))


# ---------------------------------------------------------------- the real default model, loaded once

import pathlib

import pytest

GPL3 = pathlib.Path("/usr/share/common-licenses/GPL-3")


@pytest.fixture(scope="session")
def real_model():
    import load_weights
    return load_weights.load_model()


@pytest.fixture(scope="session")
def tokenizer():
    import load_weights
    return load_weights.load_tokenizer()


@pytest.fixture(scope="session")
def gpl3():
    if not GPL3.is_file():
        pytest.skip(f"{GPL3} is missing (Debian package base-files)")
    return GPL3.read_text()

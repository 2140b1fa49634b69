"""Tiny random models built in code, so most tests need no download."""
import llama
from llama import random_model  # noqa: F401  (the tests import it from here)


def tiny_config(**over) -> llama.Config:
    """2 layers, dim 32, 4 query heads sharing 2 KV heads (grouped-query attention)."""
    c = dict(vocab_size=61, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, ffn_dim=48,
             norm_eps=1e-5, rope_theta=10000.0)
    c.update(over)
    return llama.Config(**c)


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

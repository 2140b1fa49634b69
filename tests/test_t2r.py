"""T2R (t2r.py) on tiny random float64 models: its two views agree, its state is constant, the swap is
clean, attention transfer learns, and maps survive a save and load."""
import pytest
import safetensors.torch
import torch
import torch.nn.functional as F

import llama
import msrnn
from t2r import linear, train
from conftest import EXACT, assert_close, random_model, tiny_config, tokens

# (kind, r, window): plain T2R, ELU+1, and hybrids whose window is 1, shorter and longer than a block
MAPS = {"relu": ("relu", 6, 0), "elu": ("elu", 0, 0), "hybrid-1": ("relu", 5, 1), "hybrid-3": ("relu", 6, 3),
        "hybrid-9": ("relu", 4, 9)}


def maps_for(model, name, seed=0, **kw):
    kind, r, window = MAPS[name]
    maps = linear.FeatureMaps(model.config, r, kind, window, seed=seed, dtype=model.dtype, **kw)
    with torch.no_grad():  # random biases too, so some features are off and some on
        for p in maps.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=p.dtype))
    return maps


def parallel(model, maps, x, block):
    return llama.forward(model, x, lambda i, q, k, v: linear.attention(
        q, k, v, maps.phi(i, q, "q"), maps.phi(i, k, "k"), maps.window, block))


@pytest.mark.parametrize("name", MAPS)
def test_recurrent_equals_parallel(name):
    model = random_model(tiny_config(n_layers=3))
    maps = maps_for(model, name)
    x = tokens(2, 37)
    recurrent = linear.run(model, maps, x)
    for block in (4, 8, 64):  # many blocks, a ragged last one, one block holding everything
        assert_close(parallel(model, maps, x, block), recurrent, atol=EXACT, msg=f"{block=}")
    assert_close(linear.forward(model, maps, x), recurrent, atol=EXACT)
    assert (recurrent - llama.forward(model, x)).abs().max() > 1e-2, \
        "softmax attention's logits: the feature maps were not used"


@pytest.mark.parametrize("window", [1, 4, 7])
def test_hybrid_with_features_off_is_the_sliding_window_transformer(window):
    """φ = 0 leaves only the window's softmax: Mistral's sliding-window attention, an independent reference."""
    model = random_model(tiny_config())
    maps = linear.FeatureMaps(model.config, 4, window=window, dtype=torch.float64)
    with torch.no_grad():
        maps.wq.zero_(), maps.wk.zero_()
    mistral = llama.Model(**{**model.__dict__, "config": tiny_config(sliding_window=window)})
    x = tokens(2, 30)
    assert_close(linear.forward(model, maps, x), llama.forward(mistral, x), atol=EXACT)
    assert_close(linear.run(model, maps, x), llama.forward(mistral, x), atol=EXACT)


@pytest.mark.parametrize("name", ["relu", "hybrid-3"])
def test_state_size_is_constant(name):
    model = random_model(tiny_config())
    maps = maps_for(model, name)
    state = linear.init_state(model, maps, batch=2)
    x = tokens(2, 25)
    for t in range(x.shape[1]):
        llama.step(model, x[:, t], state)
        held = sum(ls.S.numel() + ls.z.numel() + ls.K.numel() + ls.V.numel() for ls in state)
        assert held * 8 == 2 * linear.state_bytes(model, maps), t  # 8 bytes: float64


def test_swap_and_swap_back():
    model = random_model(tiny_config(n_layers=3))
    x = tokens(2, 20)
    before = llama.forward(model, x)
    swapped = linear.forward(model, maps_for(model, "relu"), x)
    assert (swapped - before).abs().max() > 1e-2, "swapping every layer left the logits as they were"
    one = linear.forward(model, maps_for(model, "relu", layers=[1]), x)  # only layer 1 swapped
    assert (one - before).abs().max() > 1e-2, "swapping layer 1 left the logits as they were"
    assert (one - swapped).abs().max() > 1e-2, "swapping layer 1 alone gave the logits of swapping all layers"
    assert torch.equal(linear.forward(model, maps_for(model, "relu", layers=[]), x), before)  # nothing swapped
    assert torch.equal(llama.forward(model, x), before)  # the model itself was never touched
    assert torch.equal(linear.run(model, maps_for(model, "relu", layers=[]), x), msrnn.run(model, x))


@pytest.mark.parametrize("name", ["relu", "hybrid-3"])
def test_attention_transfer_lowers_its_loss(name):
    model = random_model(tiny_config())
    kind, r, window = MAPS[name]
    maps = linear.FeatureMaps(model.config, r, kind, window, dtype=torch.float64)
    data = train.collect(model, tokens(6, 48, seed=2), maps.layers)
    held_out = train.collect(model, tokens(2, 48, seed=3), maps.layers)
    before = train.transfer_loss(model, maps, held_out)
    losses = train.transfer(model, maps, data, steps=40, lr=3e-2, log=None)
    assert len(losses) == 40
    assert train.transfer_loss(model, maps, held_out) < 0.7 * before


def test_finetune_lowers_next_token_loss():
    model = random_model(tiny_config())
    maps = maps_for(model, "hybrid-3")
    x = tokens(1, 40, seed=4)
    loss = lambda: F.cross_entropy(linear.forward(model, maps, x)[0, :-1], x[0, 1:]).item()
    before = loss()
    train.finetune_maps(model, maps, x, steps=10, lr=1e-2, log=None)
    assert loss() < before


@pytest.mark.parametrize("name", ["relu", "elu", "hybrid-3"])
def test_saved_maps_give_identical_logits(tmp_path, name):
    model = random_model(tiny_config(n_layers=3))
    maps = maps_for(model, name, layers=[0, 2])
    train.save(maps, tmp_path / "maps.safetensors")
    loaded = train.load(tmp_path / "maps.safetensors", model)
    assert (loaded.kind, loaded.r, loaded.window, loaded.layers) == (maps.kind, maps.r, maps.window, [0, 2])
    x = tokens(2, 15)
    assert torch.equal(linear.forward(model, loaded, x), linear.forward(model, maps, x))


def test_maps_that_do_not_fit_are_refused(tmp_path):
    model = random_model(tiny_config())
    other = random_model(tiny_config(head_dim=16))
    train.save(maps_for(other, "relu"), tmp_path / "other.safetensors")
    with pytest.raises(ValueError, match=r"tensor 'wk' has shape \(2, 2, 1, 6, 16\), this model needs \(2, 2, 1, 6, 8\)"):
        train.load(tmp_path / "other.safetensors", model)
    tensors = {n: p.detach() for n, p in maps_for(model, "relu").named_parameters() if n != "bq"}
    meta = {"kind": "relu", "r": "6", "window": "0", "layers": "0,1"}
    safetensors.torch.save_file(tensors, tmp_path / "missing.safetensors", metadata=meta)
    with pytest.raises(ValueError, match="tensor 'bq' is missing"):
        train.load(tmp_path / "missing.safetensors", model)
    safetensors.torch.save_file(tensors, tmp_path / "plain.safetensors")
    with pytest.raises(ValueError, match="not a T2R maps file"):
        train.load(tmp_path / "plain.safetensors", model)

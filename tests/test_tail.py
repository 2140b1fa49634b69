"""A finite MSRNN with a T2R tail (t2r/tail.py) on tiny random float64 models: its two views agree, a
zero tail is the policy alone, the window tail is the hybrid of t2r/linear.py, the transformer view is
differentiable in the maps, and its state does not grow."""
import copy
import functools

import pytest
import torch

import llama
import msrnn
import policies
from lab import zoo
from t2r import linear, tail
from conftest import EXACT, assert_close, random_model, tiny_config, tokens

# the paper's policies, a head-wise one, and recurrent zoo rules (they read rows.prev)
POLICIES = {"tova": policies.tova, "h2o": policies.h2o, "window": policies.window, "h2o_head": policies.h2o_head,
            "h2o_decay": zoo.h2o_decay, "snapkv": functools.partial(zoo.snapkv, window=4)}


@pytest.fixture(autouse=True)
def one_thread():
    """Tensors this small gain nothing from a second thread, and waking one costs more than the work
    where the 2 cores are shared (a softmax of 7 numbers took 10 ms): 7 s for this file, not 90."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def maps_for(model, r=5, kind="relu", seed=0, **kw):
    maps = linear.FeatureMaps(model.config, r, kind, seed=seed, dtype=model.dtype, **kw)
    with torch.no_grad():  # random biases too, so that some features are off and some on
        for p in maps.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=p.dtype))
    return maps


def rnn(model, maps, x, policy, size):
    state = tail.init_state(model, maps, size, batch=x.shape[0])
    return msrnn.feed(model, x, state, policy)


MAPS = {"": {}, "decay": dict(decay=True, horizon=6.0),  # a horizon of a few tokens, so that 37 show it
        "decay-before-RoPE": dict(decay=True, horizon=6.0, rotated=False),  # φ told each dropped row's own position
        # the tails of t2r.length's results: Hedgehog, decayed, before RoPE; and the other kinds of linear.py
        "hedgehog-decay-before-RoPE": dict(kind="hedgehog", r=6, decay=True, horizon=6.0, rotated=False),
        "t2r-tied": dict(kind="t2r"), "elu": dict(kind="elu")}


@pytest.mark.parametrize("kw", MAPS.values(), ids=MAPS)
@pytest.mark.parametrize("name", POLICIES)
def test_rnn_view_equals_transformer_view(name, kw):
    model = random_model(tiny_config(n_layers=3))
    maps = maps_for(model, **kw)
    x = tokens(2, 37)
    for size in (1, 3, 7):
        recurrent = rnn(model, maps, x, POLICIES[name], size)
        assert_close(tail.forward(model, maps, x, POLICIES[name], size), recurrent, atol=EXACT, msg=f"{name=}, {size=}")
        alone = msrnn.run(model, x, POLICIES[name], size)
        assert (recurrent - alone).abs().max() > 1e-3, f"{name=}, {size=}: the policy alone's logits: the tail did nothing"


def test_some_layers_only():
    """A layer outside maps.layers keeps the policy's rows only, in both views."""
    model = random_model(tiny_config(n_layers=3))
    maps, x = maps_for(model, layers=[1]), tokens(2, 30)
    recurrent = rnn(model, maps, x, policies.tova, 4)
    assert [type(ms) for ms in tail.init_state(model, maps, 4).layers] == [msrnn.MultiState, tail.TailState, msrnn.MultiState]
    assert_close(tail.forward(model, maps, x, policies.tova, 4), recurrent, atol=EXACT)
    assert (recurrent - rnn(model, maps_for(model), x, policies.tova, 4)).abs().max() > 1e-3


@pytest.mark.parametrize("name", POLICIES)
def test_zero_tail_is_the_policy_alone(name):
    """φ = 0 (W = b = 0) or no features (r = 0): the RNN view gives msrnn.run's logits bit for bit, the
    transformer view the same to 1e-10."""
    model = random_model(tiny_config())
    x = tokens(2, 30)
    zeroed = linear.FeatureMaps(model.config, 4, dtype=model.dtype)
    with torch.no_grad():
        for p in zeroed.parameters():
            p.zero_()
    for maps, size in ((zeroed, 2), (linear.FeatureMaps(model.config, 0, dtype=model.dtype), 5)):
        alone = msrnn.run(model, x, POLICIES[name], size)
        assert torch.equal(rnn(model, maps, x, POLICIES[name], size), alone), f"{name=}, r={maps.r}, {size=}"
        assert_close(tail.forward(model, maps, x, POLICIES[name], size), alone, atol=EXACT)


@pytest.mark.parametrize("rotated", [True, False])
def test_a_decay_of_one_is_the_undecayed_tail(rotated):
    """γ = 1 (a horizon of e^1000 tokens) gives the undecayed tail's logits under TOVA, in both views
    (float64); a short horizon does not."""
    model = random_model(tiny_config())
    x = tokens(2, 30)
    plain, decayed = (maps_for(model, seed=3, rotated=rotated, **kw) for kw in ({}, dict(decay=True)))
    with torch.no_grad():
        decayed.log_h.fill_(1000.0)
    assert (decayed.gamma(0) == 1).all()
    want = rnn(model, plain, x, policies.tova, 4)
    assert_close(rnn(model, decayed, x, policies.tova, 4), want, atol=EXACT)
    assert_close(tail.forward(model, decayed, x, policies.tova, 4), want, atol=EXACT)
    with torch.no_grad():
        decayed.log_h.fill_(1.0)
    assert (rnn(model, decayed, x, policies.tova, 4) - want).abs().max() > 1e-3


@pytest.mark.parametrize("kw", MAPS.values(), ids=MAPS)
@pytest.mark.parametrize("w", [2, 4, 7])
def test_window_tail_is_the_hybrid(w, kw):
    """The hybrid with a window of w exact rows (linear.LinearState) is the policy `window` of size
    w - 1 with a tail: a finite MSRNN of size k attends k + 1 rows; with a decay, both fold row j at
    step j + w - 1 and shrink it from then on; before RoPE, both turn row j back by j."""
    model = random_model(tiny_config())
    x = tokens(2, 24)
    maps = maps_for(model, window=w, **kw)
    hybrid = linear.run(model, maps, x)
    maps = copy.copy(maps)  # the same weights as a tail's: its exact rows are the policy's (a tail refuses a window)
    maps.window = 0
    assert_close(rnn(model, maps, x, policies.window, w - 1), hybrid, atol=EXACT, msg=f"{w=}")
    assert_close(tail.forward(model, maps, x, policies.window, w - 1), hybrid, atol=EXACT, msg=f"{w=}")
    assert (rnn(model, maps, x, policies.window, w) - hybrid).abs().max() > 1e-3, \
        f"{w=}: size w gives the hybrid's logits as w - 1 does, so this test cannot tell them apart"


def test_student_is_differentiable_in_the_maps():
    """The drops do not depend on the maps; the output's gradient in them is the finite difference's."""
    model = random_model(tiny_config())
    x = tokens(1, 24)
    maps = maps_for(model)
    logits = tail.forward(model, maps, x, policies.tova, 3)
    logits.square().mean().backward()
    assert all(p.grad is not None and p.grad.abs().max() > 0 for p in maps.parameters())
    with torch.no_grad():  # one weight of the key map, moved both ways
        w, eps = maps.wk, 1e-6
        w[1, 0, 0, 2, 3] += eps
        up = tail.forward(model, maps, x, policies.tova, 3).square().mean()
        w[1, 0, 0, 2, 3] -= 2 * eps
        down = tail.forward(model, maps, x, policies.tova, 3).square().mean()
    assert abs((up - down).item() / (2 * eps) - maps.wk.grad[1, 0, 0, 2, 3].item()) < 1e-6
    q, k, v = (torch.randn(1, 2, *s, 8, dtype=torch.float64) for s in ((2, 20), (1, 20), (1, 20)))
    assert all(torch.equal(a, b) for a, b in zip(tail.drops(model, 0, q, k, v, policies.tova, 4),
                                                 tail.drops(model, 0, q, k, v, policies.tova, 4)))


def test_student_takes_its_sizes_in_turn():
    """A student of sizes [2, 5] reads its first pass at 2 rows, the next at 5, then 2 again: each pass
    is the transformer view at that size (how t2r/length.py trains one tail for every size)."""
    model = random_model(tiny_config())
    maps, x = maps_for(model, decay=True, horizon=6.0, rotated=False), tokens(1, 20)
    turns = tail.student(model, maps, policies.tova, [2, 5])
    for size in (2, 5, 2):
        assert_close(llama.forward(model, x, turns), tail.forward(model, maps, x, policies.tova, size), atol=EXACT,
                     msg=f"{size=}")
    with pytest.raises(ValueError, match="size must be a positive integer"):
        tail.student(model, maps, policies.tova, [4, 0])


def test_state_size_is_constant():
    """Once the rows fill its size + 1 slots, the state holds the same bytes whatever was read."""
    model = random_model(tiny_config())
    maps = maps_for(model)
    size, x = 5, tokens(2, 25)
    state = tail.init_state(model, maps, size, batch=2)
    for t in range(x.shape[1]):
        llama.step(model, x[:, t], state, policies.tova)
        held = sum(ms.k.numel() + ms.v.numel() + ms.S.numel() + ms.z.numel() for ms in state)
        if t >= size:  # keys, values (size + 1 slots), S, z; float64
            assert held * 8 == 2 * (tail.state_bytes(model, maps, size) + msrnn.state_bytes(model, 1)), t


def test_what_a_tail_cannot_be_is_refused():
    model = random_model(tiny_config())
    mistral = random_model(tiny_config(sliding_window=6))
    with pytest.raises(ValueError, match="sliding_window"):
        tail.init_state(mistral, maps_for(mistral), 4)
    other = random_model(tiny_config(head_dim=16))
    with pytest.raises(ValueError, match="do not fit this model"):
        tail.init_state(model, maps_for(other), 4)
    with pytest.raises(ValueError, match="do not fit this model"):  # float32 maps on a float64 model
        tail.init_state(model, linear.FeatureMaps(model.config, 4), 4)
    with pytest.raises(ValueError, match="size must be a positive integer"):
        tail.student(model, maps_for(model), policies.tova, None)
    with pytest.raises(ValueError, match="not the full cache"):
        tail.perplexity(model, maps_for(model), tokens(1, 10)[0], "full", 4)


@pytest.mark.parametrize("kind", ["full", "tova", "tail", "t2r", "hybrid"])
def test_speed_builds_the_state_reading_would_leave(kind):
    """t2r/speed.py times steps from states built without reading the tokens: each holds the bytes of
    the state that read them, and a step from it runs."""
    from t2r import speed
    model = random_model(tiny_config())
    n, size, t2r_maps, tail_maps = 20, 5, maps_for(model, r=6), maps_for(model)
    hybrid = linear.FeatureMaps(model.config, 4, "hedgehog", 3, dtype=model.dtype, sinks=2, decay=True, rotated=False)
    x = tokens(1, n)
    read = {"full": lambda: msrnn.init_state(model), "tova": lambda: msrnn.init_state(model, 1, size),
            "tail": lambda: tail.init_state(model, tail_maps, size), "t2r": lambda: linear.init_state(model, t2r_maps),
            "hybrid": lambda: linear.init_state(model, hybrid)}[kind]()
    policy = policies.tova if kind in ("tova", "tail") else None
    for t in range(n):  # msrnn.feed reads only multi-states
        llama.step(model, x[:, t], read, policy)
    built = speed.built(model, kind, n, size, t2r_maps, tail_maps, hybrid)
    assert speed.held_bytes(built) == speed.held_bytes(read) > 0
    assert built.t == read.t == n
    llama.step(model, x[:, 0], built, policy)
    assert speed.held_bytes(built) == speed.held_bytes(read) + (msrnn.state_bytes(model, 1) if kind == "full" else 0)


def test_nll_and_perplexity_are_the_forward_views():
    """What t2r/train.py and demo.py call: nll (T - 1,) for (T,) and (B, T - 1) for (B, T), the
    cross-entropy of forward's logits; perplexity over chunks read from scratch, a policy by name."""
    model, x = random_model(tiny_config()), tokens(2, 20)
    maps = maps_for(model)
    logits = tail.forward(model, maps, x, policies.tova, 3)
    want = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), x[:, 1:].flatten(), reduction="none").view(2, 19)
    assert_close(tail.nll(model, maps, x, "tova", 3), want, atol=EXACT)
    assert_close(tail.nll(model, maps, x[1], policies.tova, 3), want[1], atol=EXACT)
    r = tail.perplexity(model, maps, x[0], "tova", 3, chunk=10)
    halves = [tail.nll(model, maps, x[0, i:i + 10], policies.tova, 3) for i in (0, 10)]
    assert r["chunks"] == 2 and r["tokens"] == 18
    assert abs(r["ppl"] - torch.cat(halves).mean().exp().item()) < 1e-9

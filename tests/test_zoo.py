"""The zoo's rules are policies like any other (their exactness is in test_policies.py, their checks in
test_check.py); here, what is new: a policy that remembers its own scores through Rows.prev, and the
new Rows fields."""
import math

import pytest
import torch

import llama
import msrnn
from engine import oneshot
import policies
from lab import specs
from lab import zoo
from conftest import EXACT, assert_close, random_model, tiny_config, tokens


def decayed_h2o_by_hand(model, x, size, decay, recent=0.5):
    """H2O-decay for one sequence (T,), written out: per layer, the kept positions in a list and each
    row's decayed sum in a dict, updated at every step that drops (when the policy is called)."""
    def attention(layer, q, k, v):                                   # q (1, Hkv, G, T, hd)
        T, kept, memory = q.shape[3], [], {}
        mask = torch.zeros(T, T, dtype=torch.bool)
        for t in range(T):
            kept.append(t)
            mask[t, kept] = True
            attn = (q[0, :, :, t] @ k[0, :, 0, kept].mT / q.shape[-1] ** 0.5).softmax(-1)  # (Hkv, G, n)
            if len(kept) <= size:
                continue
            a = attn.sum((0, 1)).tolist()                            # layer-wise: every head's attention
            for r, p in enumerate(kept):
                old = memory.get(p, math.nan)
                memory[p] = decay * old + a[r] if math.isfinite(old) else a[r]
                if p > t - int(size * recent):                       # the recent share is protected
                    memory[p] = math.inf
            kept.remove(min(kept, key=memory.get))
        return llama.softmax_attention(q, k, v, mask)
    return llama.forward(model, x, attention)


@pytest.mark.parametrize("decay", [0.0, 0.5, 0.9])
def test_a_policy_that_remembers_through_prev_is_its_recurrence_by_hand(decay):
    """40 steps, float64: the state hands the policy its own last scores, NaN for a row added since."""
    model = random_model(tiny_config(), seed=4)
    x = tokens(1, 40, seed=5)[0]
    policy = specs.named(f"h2o_decay:decay={decay}").fn
    for size in (4, 9):
        want = decayed_h2o_by_hand(model, x, size, decay)
        assert_close(msrnn.run(model, x, policy, size), want, atol=EXACT, msg=f"{decay=}, {size=}")
        if decay:
            assert (msrnn.run(model, x, specs.named("h2o_decay:decay=0.0").fn, size) - want).abs().max() > 1e-3, \
                "decay changes nothing here, so this test cannot tell it is applied"


def test_prev_is_nan_for_new_rows_and_the_last_scores_for_the_others():
    model = random_model(tiny_config())
    seen = []

    def spy(rows):
        seen.append((rows.t, rows.pos.clone(), rows.prev.clone()))
        return rows.pos.double()                                     # Window, per KV head: scores = positions
    msrnn.run(model, tokens(1, 12), spy, 4)
    for (t0, pos0, prev0), (t1, pos1, prev1) in zip(seen, seen[1:]):
        if t1 != t0 + 1:
            continue  # the next layer's first call
        new = pos1 == t1
        assert prev1[new].isnan().all()
        assert torch.equal(prev1[~new], pos1[~new].double())         # what the policy returned last time


def test_oneshot_cut_sees_every_row_new():
    model = random_model(tiny_config())
    prevs = []

    def spy(rows):
        prevs.append(rows.prev.clone())
        return rows.attn.mean((1, 2))[:, None]
    oneshot.run(model, tokens(1, 14), spy, 4, 10)
    for layer in (0, 1):  # the cut in each layer: 10 rows, none scored before
        assert prevs[layer].isnan().all() and prevs[layer].shape[-1] == 10
    nxt = prevs[2]  # layer 0's next step: the 4 rows kept carry their scores from the cut, the new one none
    assert not nxt[..., :4].isnan().any() and nxt[..., 4].isnan().all()


def test_rows_carry_values_and_the_query():
    model = random_model(tiny_config())
    state = msrnn.init_state(model, 1, 3)
    got = {}

    def spy(rows):
        got.update(values=rows.values.clone(), query=rows.query.clone(), keys=rows.keys.clone(), pos=rows.pos.clone())
        return rows.pos.double()
    x = tokens(1, 5)
    msrnn.feed(model, x, state, spy)  # the last call: layer 1, step 4
    ms = state.layers[1]
    slot = {p: i for i, p in enumerate(ms.pos[0, 0].tolist())}
    for j, p in enumerate(got["pos"][0, 0].tolist()):  # the rows still held are the state's, row for row
        if p in slot:
            assert torch.equal(got["values"][0, :, j], ms.v[0, :, slot[p]])
    assert got["query"].shape == (1, 2, 2, 8)                        # (B, Hkv, G, hd)
    assert_close(got["values"].norm(), got["values"].norm(), atol=0)


def test_h2o_recent_share_is_a_parameter():
    model = random_model(tiny_config())
    x = tokens(1, 30)
    assert_close(msrnn.run(model, x, specs.named("h2o:recent=0.5").fn, 8), msrnn.run(model, x, policies.h2o, 8), atol=0)
    assert (msrnn.run(model, x, specs.named("h2o:recent=0.25").fn, 8) - msrnn.run(model, x, policies.h2o, 8)).abs().max() > 1e-3
    assert (msrnn.run(model, x, specs.named("h2o_head:recent=0.25").fn, 8)  # h2o_head's too (h2o_head gives ...)
            - msrnn.run(model, x, policies.h2o_head, 8)).abs().max() > 1e-3
    assert specs.named("h2o:recent=0.25").label == "H2O (recent 0.25)"
    with pytest.raises(ValueError, match="recent must be a number from 0 to 1"):
        specs.named("h2o:recent=2")


def test_the_zoo_has_its_papers():
    assert len(zoo.ZOO) >= 8
    for name, fn in zoo.ZOO.items():
        assert "arXiv" in fn.__doc__ or name == "random", name
        assert len(__import__("inspect").getsource(fn).splitlines()) <= 14, f"{name} is longer than a ten-line policy"

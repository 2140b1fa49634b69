"""The compiled steps compute what the eager ones do: the decode step (fast.compiled_step, torch.compile
of llama.step) and prefill's (compile=True, fast.scored_step compiled) hold the same rows and
give logits within float32 rounding, and within 1e-10 in float64. Tiny models: compiling is the cost."""
import pytest
import torch

from engine import fast
import llama
import msrnn
import policies
from lab import specs
from conftest import EXACT, assert_close, random_model, tiny_config, tokens

if fast.compiled_step() is llama.step:
    pytest.skip("no C++ compiler for torch.compile here", allow_module_level=True)

FLOAT32 = 1e-4  # logits up to about 7: a few float32 roundings, summed in another order by the fused kernels


def decode(step, model, policy, size, prompt, steps):
    """Logits of `steps` greedy decode steps after the prompt (read eagerly), and the state."""
    state = msrnn.init_state(model, prompt.shape[0], size)
    logits = msrnn.feed(model, prompt, state, policy)[:, -1]
    out = []
    for _ in range(steps):
        logits = step(model, logits.argmax(-1), state, policy)
        out.append(logits)
    return torch.stack(out, 1), state


def assert_same_run(compiled, eager, name):
    """(logits, state) of a compiled and an eager run: logits within FLOAT32, the same rows held."""
    assert_close(compiled[0], eager[0], atol=FLOAT32, msg=f"{name}: compiled vs eager logits")
    for a, b in zip(compiled[1], eager[1]):
        assert torch.equal(a.pos, b.pos), f"{name}: the same rows held"


@pytest.mark.parametrize("name", [None, "tova", "tova_head", "h2o", "sink"])
def test_compiled_decoding_is_the_eager_step(name):
    """Over 40 steps: a bounded state full from the start, an unbounded one that doubles twice."""
    model = random_model(tiny_config(sliding_window=None), dtype=torch.float32)
    policy, size = (specs.POLICIES[name], 8) if name else (None, None)
    prompt = tokens(2, 12)
    assert_same_run(decode(fast.compiled_step(), model, policy, size, prompt, 40),
                    decode(llama.step, model, policy, size, prompt, 40), name)


def test_compiled_decoding_in_float64_is_exact():
    """float64: compiled and eager steps agree to 1e-10 (the eager one is the transformer: test_equivalence.py)."""
    model = random_model(tiny_config())
    prompt = tokens(1, 10)
    compiled, _ = decode(fast.compiled_step(), model, None, None, prompt, 20)
    assert_close(compiled, decode(llama.step, model, None, None, prompt, 20)[0], atol=EXACT)


def test_generate_compiled():
    model = random_model(tiny_config(), dtype=torch.float32)
    prompt = tokens(1, 6)
    eager = torch.cat(list(msrnn.generate(model, prompt, 12, policies.tova, 4)))
    assert torch.equal(torch.cat(list(fast.generate(model, prompt, 12, policies.tova, 4, compile=True))), eager)


@pytest.mark.parametrize("name", ["window", "sink", "h2o", "h2o_head", "tova", "tova_head", "lookahead",
                                  "snapkv", "h2o_decay", "expected_attention"])
def test_compiled_prefill_is_the_eager_one(name, monkeypatch):
    """Every built-in policy, layer- and head-wise, and the lookahead: 52 steps in blocks of 16, the
    last one short, with the model's own sliding window for TOVA."""
    monkeypatch.setattr(fast, "STEP_BLOCK", 16)
    model = random_model(tiny_config(sliding_window=6 if name == "tova" else None), dtype=torch.float32)
    x = tokens(2, 60)
    policy = specs.named(name).on(model, x)
    assert_same_run(fast.prefill(model, x, policy, 8, compile=True), fast.prefill(model, x, policy, 8), name)


def test_compiled_prefill_in_float64_is_exact():
    model = random_model(tiny_config())
    x = tokens(2, 40)
    assert_close(fast.prefill(model, x, policies.tova, 6, compile=True)[0], msrnn.run(model, x, policies.tova, 6),
                 atol=EXACT)


def test_a_growing_state_stops_compiling():
    """An unbounded state doubles its slots as rows arrive (MultiState._grow). Once the position and
    the row count are symbolic, neither a new row nor a doubling compiles again: after the first 40
    steps (16 and 32 slots), 150 more, through the doublings to 64, 128 and 256 slots, add no graph."""
    model = random_model(tiny_config(sliding_window=None), dtype=torch.float32)
    state, token = msrnn.init_state(model, 1), torch.zeros(1, dtype=torch.long)
    step = fast.compiled_step()
    for _ in range(40):
        step(model, token, state)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for _ in range(150):
        step(model, token, state)
    assert state.layers[0].k.shape[2] == 256
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs

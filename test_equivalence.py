"""The unbounded MSRNN (token by token) is the transformer (all positions at once), exactly."""
import pytest
import torch

from engine import fast
import llama
import load_weights
import msrnn
import policies
from conftest import EXACT, assert_close, random_model, tiny_config, tokens

CONFIGS = {
    "llama-gqa": tiny_config(),
    "llama-gqa-tied": tiny_config(tie_embeddings=True),
    "llama-mha": tiny_config(n_kv_heads=4),
    "mistral-window5": tiny_config(sliding_window=5),
    "llama3-rope": tiny_config(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 16.0}),
    "linear-rope": tiny_config(rope_scaling={"rope_type": "linear", "factor": 4.0}),
    "head-dim-16": tiny_config(head_dim=16),  # head_dim * heads != dim, as some checkpoints have
}


@pytest.mark.parametrize("name", CONFIGS)
def test_unbounded_msrnn_equals_transformer(name):
    model = random_model(CONFIGS[name])
    x = tokens(3, 40)
    parallel = llama.forward(model, x)                    # (B, T, vocab)
    recurrent = msrnn.run(model, x)
    assert_close(recurrent, parallel, atol=EXACT)
    assert_close(llama.forward(model, x[1]), parallel[1], atol=EXACT)  # a batch is independent sequences
    assert_close(llama.forward(model, x, last=True), parallel[:, -1:], atol=EXACT)
    assert_close(fast.prefill(model, x, policies.tova, 9, last=True)[0], fast.prefill(model, x, policies.tova, 9)[0][:, -1:],
                 atol=EXACT)


@pytest.mark.parametrize("name", ["llama-gqa", "mistral-window5"])
def test_identical_greedy_tokens(name):
    model = random_model(CONFIGS[name])
    prompt = tokens(1, 6)[0]
    new = torch.stack(list(msrnn.generate(model, prompt, 20)))[:, 0]
    seq = prompt.tolist()
    for _ in range(20):  # the reference: re-run the whole transformer for every new token
        seq.append(llama.forward(model, torch.tensor(seq))[-1].argmax().item())
    assert new.tolist() == seq[6:]


@pytest.mark.parametrize("parallel", [msrnn.masked_forward, fast.prefill])
def test_parallel_views_unbounded_hand_over_the_state(parallel):
    model = random_model(CONFIGS["llama-gqa"])
    x = tokens(2, 30)
    logits, state = parallel(model, x[:, :20])
    rest = msrnn.feed(model, x[:, 20:], state)            # continue token by token
    assert_close(torch.cat([logits, rest], 1), llama.forward(model, x), atol=EXACT)


def test_sampling_is_seeded_and_continues_a_state():
    model = random_model(CONFIGS["llama-gqa"])
    prompt = tokens(2, 5)
    a = torch.stack(list(msrnn.generate(model, prompt, 10, temperature=0.8, top_k=20, seed=3)))
    b = torch.stack(list(msrnn.generate(model, prompt, 10, temperature=0.8, top_k=20, seed=3)))
    assert torch.equal(a, b) and a.shape == (10, 2)
    state = msrnn.init_state(model, 2)
    list(msrnn.generate(model, prompt, 3, state=state))
    assert state.t == 5 + 2 and state.n_rows == 7  # the last generated token is not fed yet


# ---------------------------------------------------------------- the real default model (float32)

def test_default_model_views_agree(real_model, tokenizer, gpl3):
    """float32: the views differ by rounding only. Measured on these 300 tokens (logits up to 38):
    parallel 1.9e-4 and recurrent 7.6e-5 from float64, 1.9e-4 from each other; the parallel view's
    larger error is float32 matrix-matrix products (row by row products give 6.7e-5)."""
    ids = torch.tensor(tokenizer.encode(gpl3[:1500]).ids[:300])
    parallel, recurrent = llama.forward(real_model, ids), msrnn.run(real_model, ids)
    exact = llama.forward(load_weights.load_model(dtype=torch.float64), ids)
    print(f"default model, {len(ids)} tokens, float32: max |dlogit| = {(parallel - recurrent).abs().max():.2e}")
    FLOAT32 = 3e-4  # the bound for all three comparisons; compared in float64, so no rounding is added
    assert_close(parallel.double(), exact, atol=FLOAT32, msg="parallel view vs float64")
    assert_close(recurrent.double(), exact, atol=FLOAT32, msg="recurrent view vs float64")
    assert_close(recurrent, parallel, atol=FLOAT32, msg="recurrent vs parallel view")


# Produced once (2 CPU threads, torch 2.13, the float32 default model) by
#   tok = load_weights.load_tokenizer(); ids = torch.tensor(tok.encode("The capital of France is").ids)
#   [t.item() for t in msrnn.generate(load_weights.load_model(), ids, 30)]
# and the same with 1 thread. Along this path the top two logits are at least 0.05 apart, over 100 times
# the float32 bound above (3e-4), so rounding cannot flip a token. The last id, 2, is <|im_end|>: a
# special token, which decode leaves out.
GOLDEN_IDS = [7042, 30, 198, 198, 504, 2988, 314, 42, 216, 34, 32, 33, 40, 29, 32, 33, 29, 34, 34, 216, 33, 34, 42,
              33, 34, 42, 37, 35, 30, 2]
GOLDEN_TEXT = " Paris.\n\nThe answer is: 2018-01-22 12:12:53."


def test_default_model_knows_paris(real_model, tokenizer):
    """The golden greedy continuation, as llama2.c's test checks one: first the answer, then all 30 ids."""
    prompt = torch.tensor(tokenizer.encode("The capital of France is").ids)
    new = [t.item() for t in msrnn.generate(real_model, prompt, 30)]
    assert tokenizer.decode(new[:1]) == " Paris", tokenizer.decode(new)
    assert new == GOLDEN_IDS
    assert tokenizer.decode(new) == GOLDEN_TEXT


def test_default_model_perplexity_on_gpl3(real_model, tokenizer, gpl3):
    ids = torch.tensor(tokenizer.encode(gpl3[:8000]).ids)
    assert len(ids) == 1744
    logits = llama.forward(real_model, ids)
    ppl = torch.nn.functional.cross_entropy(logits[:-1], ids[1:]).exp().item()
    print(f"default model perplexity on GPL-3[:8000] = {ppl:.3f}")
    assert abs(ppl - 19.1) <= 0.3

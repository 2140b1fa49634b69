"""The check: the unbounded MSRNN (token by token) is the transformer (all positions at once), to 1e-10 in float64.

First, the paper in plain Python lists, the reference the tests hold every other view to. Oren et al.
2024: every layer keeps a set of (key, value, position) rows. At each token it appends the token's
row, attends over all its rows, and, if it now holds more than `size`, drops the rows a policy scores
lowest. That is all. `ListMultiState` says it with a list of rows per sequence and KV head, so that it
is easy to check by eye; msrnn.py says the same with fixed slots, engine/fast.py faster. It plugs into
llama.step in place of msrnn.MultiState, so the decoder around it is the same (tests/test_policies.py
holds msrnn.run to it, and the other views to run, float64, 1e-10). Then the proofs that the unbounded MSRNN
is the transformer.
"""
import math

import pytest
import torch

from engine import fast
import llama
import load_weights
import msrnn
import policies
from conftest import EXACT, assert_close, random_model, tiny_config, tokens


class ListMultiState:
    """One layer's rows: rows[b][h] is the list of [key, value, position, attention received, the
    policy's last score] of sequence b's KV head h, oldest first."""

    def __init__(self, batch, kv_heads, size, layer, window=None, oneshot=0):
        self.rows = [[[] for _ in range(kv_heads)] for _ in range(batch)]
        self.size, self.layer, self.window, self.oneshot = size, layer, window, oneshot

    def attend(self, q, k, v, t, policy):
        """q (B, Hkv, G, hd), k and v (B, Hkv, hd) of the token at position t -> output (B, Hkv, G, hd)."""
        out, attn = torch.empty_like(q), {}
        for b, heads in enumerate(self.rows):
            for h, rows in enumerate(heads):
                rows.append([k[b, h], v[b, h], t, 0.0, math.nan])         # 1. append the token's row
                K, V = torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])  # (n, hd)
                s = q[b, h] @ K.T / math.sqrt(q.shape[-1])               # (G, n)
                if self.window:  # Mistral's sliding window: rows W or more steps old are not seen
                    s[:, [t - r[2] >= self.window for r in rows]] = -math.inf
                attn[b, h] = s.softmax(-1)                                # 2. attend
                out[b, h] = attn[b, h] @ V
                for r, a in zip(rows, attn[b, h].sum(0).tolist()):       # what H2O accumulates
                    r[3] += a
        n = len(self.rows[0][0])
        if self.size is None or n <= self.size or t < self.oneshot - 1:  # one-shot: no drop before the prompt's last token
            return out
        # 3. drop: the policy scores every row (msrnn.Rows), and the n - size lowest go; of equal
        # scores the older row goes first (the rows are oldest first): policies.py's tie rule
        B, H = len(self.rows), len(self.rows[0])
        every = [r for heads in self.rows for rows in heads for r in rows]  # the B * Hkv * n rows, in order
        wide = llama.wide(q.dtype)  # what msrnn.py keeps scores in
        keys = torch.stack([r[0] for r in every]).view(B, H, n, -1)      # (B, Hkv, n, hd)
        values = torch.stack([r[1] for r in every]).view(B, H, n, -1)    # (B, Hkv, n, hd)
        pos, score, prev = (torch.tensor([r[i] for r in every], dtype=d).view(B, H, n)  # (B, Hkv, n) each
                            for i, d in ((2, torch.long), (3, wide), (4, wide)))
        A = torch.stack([attn[b, h] for b in range(B) for h in range(H)]).view(B, H, -1, n)  # (B, Hkv, G, n)
        rows = msrnn.Rows(attn=A, pos=pos, score=score, keys=keys, values=values, query=q, prev=prev, t=t,
                          size=self.size, layer=self.layer)
        scores = policy(rows).expand(B, H, n).tolist()
        for b in range(B):
            for h in range(H):
                for r, s in zip(self.rows[b][h], scores[b][h]):          # what the policy sees next time
                    r[4] = s
                lowest = sorted(range(n), key=lambda i: (scores[b][h][i], i))[:n - self.size]
                self.rows[b][h] = [r for i, r in enumerate(self.rows[b][h]) if i not in lowest]
        return out


@torch.no_grad()
def reference_run(model: llama.Model, tokens: torch.Tensor, policy=None, size=None, oneshot=0) -> torch.Tensor:
    """msrnn.run, with list-based multi-states: logits (B, T, vocab) for tokens (B, T). oneshot > 0: the
    official code's prompt regime, read in full, cut once (engine/oneshot.py)."""
    c = model.config
    state = msrnn.State([ListMultiState(tokens.shape[0], c.n_kv_heads, size, i, c.sliding_window, oneshot)
                         for i in range(c.n_layers)])
    return torch.stack([llama.step(model, tokens[:, t], state, policy) for t in range(tokens.shape[1])], 1)


# ---------------------------------------------------------------- the proofs

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


@pytest.mark.parametrize("name", CONFIGS)
def test_prefill_last_is_the_last_position(name):
    model = random_model(CONFIGS[name])
    x = tokens(3, 40)
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


def test_queries_and_keys_are_rotated_pairs_and_values_are_not():
    """RoPE as Hugging Face's Llama lays it out, written with complex numbers: dimensions i and
    i + hd/2 of a head are one number, turned by position * theta^(-2i/hd). Both views share qkv, so
    a mistake in it (RoPE on interleaved pairs, or on the values) passes the tests above; this reads
    qkv alone, against the weights."""
    c = tiny_config()
    model, T, half = random_model(c), 7, c.head_dim // 2
    L = model.layers[1]
    x = torch.randn(2, T, c.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    q, k, v = llama.qkv(model, L, x, *llama.rope_angles(model, torch.arange(T)))
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c.norm_eps) * L.attn_norm  # RMSNorm
    i = torch.arange(half, dtype=torch.float64)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * c.rope_theta ** (-2 * i / c.head_dim)  # (T, hd/2)
    turn = torch.polar(torch.ones_like(angle), angle)                # (T, hd/2) e^(i * angle)

    def rotated(w, heads):
        y = (h @ w.T).unflatten(-1, (heads, c.head_dim))              # (B, T, heads, hd)
        z = torch.complex(y[..., :half], y[..., half:]) * turn[:, None]
        return torch.cat([z.real, z.imag], -1)
    by_token = lambda y: y.movedim(1, -2)                            # (B, .., T, hd): a report names the token
    assert_close(by_token(q), by_token(rotated(L.wq, c.n_heads).unflatten(-2, (c.n_kv_heads, -1))), EXACT, "queries")
    assert_close(by_token(k), by_token(rotated(L.wk, c.n_kv_heads)), EXACT, "keys")
    assert_close(by_token(v), by_token((h @ L.wv.T).unflatten(-1, (c.n_kv_heads, c.head_dim))), EXACT, "values: no RoPE")


def test_query_head_h_reads_kv_head_h_over_g():
    """Grouped-query attention: query head h shares KV head h // G (Hugging Face's repeat_kv), so the
    G query heads of KV head j are heads jG .. jG + G - 1. A head's norm is kept by any rotation or
    reordering of its dimensions, so this reads the grouping alone, whatever RoPE does: first the norms
    in any order (which no grouping changes, but a wrong RMSNorm or wq does), then each head's group (a head
    out of its group named first), then its place in the group."""
    c = tiny_config(n_heads=6)  # G = 3 != Hkv = 2: with G = Hkv, (G, Hkv) and (Hkv, G) are one split
    model, L, G = random_model(c), random_model(c).layers[0], c.n_heads // c.n_kv_heads
    x = torch.randn(3, 1, c.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    q, _, _ = llama.qkv(model, L, x, *llama.rope_angles(model, torch.arange(1)))  # (B, 1, Hkv, G, hd)
    assert q.shape[2:4] == (c.n_kv_heads, G), f"queries of shape {tuple(q.shape)}, not in groups: (B, T, Hkv, G, hd)"
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c.norm_eps) * L.attn_norm
    heads = (h @ L.wq.T).unflatten(-1, (c.n_heads, c.head_dim))      # (B, 1, H, hd)
    norms = lambda y: y.norm(dim=-1).sort(-1).values                 # (B, 1, H): a head's norm, in any order
    assert_close(norms(q.flatten(2, 3)), norms(heads), EXACT, "the query heads' norms, in any order: not a grouping "
                 "but RMSNorm or wq")                                 # (a norm or a weight wrong, no head moved)
    norm = lambda y: y.norm(dim=-1)                                  # (B, 1): one head's
    at = [[p for p in range(G) if torch.allclose(norm(q[:, :, h // G, p]), norm(heads[:, :, h]), rtol=0, atol=EXACT)]
          for h in range(c.n_heads)]                                 # where in its group each head is, if it is
    for head in sorted(range(c.n_heads), key=lambda h: bool(at[h])):  # a head out of its group is named first
        (j, g), found = divmod(head, G), at[head]
        assert_close(norm(q[:, :, j, g]), norm(heads[:, :, head]), EXACT, f"query head {head}: " +
                     (f"in group {j}, but its place {found[0]}, not {g}" if found else f"not in group {j}"))


def test_a_step_writes_its_row_at_its_position():
    """Token t is at position t: its row's pos and its RoPE angle read state.t before the step, which
    advances it once the layers are done. RoPE sees only the distance between two positions, so a
    shift of every position passes the tests above; the rows' positions (which the policies read) do not."""
    model = random_model(tiny_config())
    state = msrnn.init_state(model, 2)
    for t, token in enumerate(tokens(2, 6).T):
        assert state.t == t, f"before step {t}, state.t is {state.t}: a step advances it by one, after its layers"
        llama.step(model, token, state)
        given = [ms.pos[0, 0, t].item() for ms in state]
        assert given == [t] * len(given), f"token {t} was given position {given[0]}, not {t}, in the state's rows"


@pytest.mark.parametrize("name", ["llama-mha", "llama-gqa"])
def test_forward_hands_the_heads_to_wo_in_order(name):
    """forward, given an attention's output o (B, Hkv, G, T, hd), hands it to the output projection as
    (B, T, H·hd), query head h = jG + g being KV head j's g-th, as qkv split it: this replaces attention
    by fixed random outputs and computes the rest of the layers by hand (one query head per KV head,
    G = 1, and a group of two)."""
    model = random_model(CONFIGS[name])
    c, x = model.config, tokens(2, 9)
    G, g = c.n_heads // c.n_kv_heads, torch.Generator().manual_seed(5)
    outs = [torch.randn(2, c.n_kv_heads, G, 9, c.head_dim, generator=g, dtype=torch.float64) for _ in model.layers]
    got = llama.forward(model, x, lambda i, q, k, v: outs[i])
    norm = lambda h, w: h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + c.norm_eps) * w  # RMSNorm

    def by_hand(outs):
        h = model.embed[x]                                           # (B, T, dim)
        for L, o in zip(model.layers, outs):
            h = h + o.permute(0, 3, 1, 2, 4).flatten(2) @ L.wo.T     # (B, Hkv, G, T, hd) -> (B, T, H*hd) -> (B, T, dim)
            u = norm(h, L.mlp_norm)
            h = h + (torch.nn.functional.silu(u @ L.w_gate.T) * (u @ L.w_up.T)) @ L.w_down.T
        return norm(h, model.norm) @ model.lm_head.T
    if G > 1:  # the (G, Hkv) order: the same numbers, each head's output projected by another head's columns
        assert not torch.allclose(got, by_hand([o.transpose(1, 2) for o in outs]), rtol=0, atol=EXACT), \
            "forward handed the heads to wo in (G, Hkv) order, not (Hkv, G)"
    assert_close(got, by_hand(outs), EXACT, "forward, given the attention's output o, adds o (B, T, H*hd) @ woᵀ, "
                 "then the MLP, each with its residual")

"""The kvpress bridge (bridge.py) both ways, on the default model and the experiments' passkey prompt
(2,048 tokens), in float64:

- our policies run as kvpress presses keep, in every layer and KV head, the rows our one-shot regime
  keeps, and the first two new tokens' logits agree;
- kvpress's own presses keep the rows of our policies, each with its documented difference applied;
- a policy, ours or a user's file, runs inside kvpress's own pipeline.

In the one-shot regime the prompt's forward pass does not depend on the policy: kvpress cuts a layer's
cache after that layer's attention, and our prefill cuts after the last token attends. So the prompt
is read once on each side, and each policy's cut is replayed from what that pass recorded: on
kvpress's side its own hook (`forward_hook`, what `with press(model)` registers) with each layer's
recorded arguments, on ours fast.fill, what fast.prefill runs when the cut ends the prompt. The first
case runs both sides for real and checks the replays against them.

Where kvpress is not installed (it is not in requirements.txt) these tests are skipped; CI installs it.
"""
import math

import pytest
import torch

from lab import bridge
from data import default_model
from lab import experiments
from engine import fast, oneshot
import llama
import load_weights
import msrnn
import policies
from lab import zoo

kvpress = pytest.importorskip("kvpress")
transformers = pytest.importorskip("transformers")
transformers.utils.logging.disable_progress_bar()
pytestmark = pytest.mark.model  # skipped with the reason where the default model cannot be had (conftest.py)

EXACT = 1e-9  # float64 logits of two implementations of one model: only the summation order differs


def float64_oracle(hf, ours):
    """transformers computes RMSNorm and the RoPE angles in float32 even in a float64 model (~1e-4 in
    the logits at 2,048 tokens: then rounding, not the policy, decides near-ties). Both are done in
    float64 here, so that the two models differ by summation order only; test_transformers.py checks
    transformers' own arithmetic."""
    def rms(m, x):
        return m.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m.variance_epsilon))

    def rotary(x, position_ids):                                     # -> cos, sin (B, T, hd)
        angles = position_ids.to(torch.float64)[..., None] * ours.inv_freq  # (B, T, hd/2)
        emb = torch.cat([angles, angles], -1)                        # the rotate-half layout
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    for m in hf.modules():
        if type(m).__name__.endswith("RMSNorm"):
            m.forward = rms.__get__(m)
    hf.model.rotary_emb.forward = rotary


class Prompt:
    """The prompt read once by each side: transformers' hook arguments per attention layer, and our
    queries, keys and values per layer; the first new token's logits from each."""

    @torch.no_grad()
    def __init__(self, hf, ours, ids):
        self.hf, self.ours, self.ids = hf, ours, ids
        hf.set_attn_implementation("sdpa")
        self.calls = []
        record = lambda module, args, kwargs, output: self.calls.append((module, kwargs, output)) and None
        hooks = [layer.self_attn.register_forward_hook(record, with_kwargs=True) for layer in hf.model.layers]
        self.cache = transformers.DynamicCache()
        try:
            self.hf_first = hf(ids, past_key_values=self.cache).logits[:, -1]
        finally:
            for h in hooks:
                h.remove()
        self.keys = [layer.keys for layer in self.cache.layers]     # (B, Hkv, T, hd) per layer
        self.qkv = []
        attend = lambda i, q, k, v: self.qkv.append((q, k[:, :, 0], v[:, :, 0])) or llama.softmax_attention(q, k, v)
        self.our_first = llama.forward(ours, ids, attend)[:, -1]

    @torch.no_grad()
    def kvpress(self, press):
        """kvpress's cut of the recorded prompt, then one greedy token: (kept positions per layer
        (B, Hkv, kept), sorted; logits of the first two new tokens (2, vocab))."""
        cache = transformers.DynamicCache()
        for i, layer in enumerate(self.cache.layers):  # the prompt's whole cache, as the forward leaves it
            cache.update(layer.keys, layer.values, i)
        press.post_init_from_model(self.hf)
        for module, kwargs, output in self.calls:
            press.forward_hook(module, [], {**kwargs, "past_key_values": cache}, output)
        kept = [positions(layer.keys, keys) for layer, keys in zip(cache.layers, self.keys)]
        return kept, torch.cat([self.hf_first, next_logits(self.hf, self.hf_first, cache, self.ids.shape[1])])

    @torch.no_grad()
    def ours_cut(self, policy, size):
        """Our one-shot cut of the recorded prompt (fast.fill, as fast.prefill runs it when the cut ends the
        prompt), then one greedy token: (kept positions per layer, sorted; logits (2, vocab))."""
        T = self.ids.shape[1]
        state = oneshot.init_state(self.ours, 1, size, T)
        for ms, (q, k, v) in zip(state.layers, self.qkv):
            fast.fill(ms, q, k, v, policy)
        state.t = T
        return ours_after(self.ours, state, self.our_first, policy)


def ours_after(ours, state, first, policy):
    kept = [ms.pos[:, :, :ms.n].sort(-1).values for ms in state.layers]
    second = llama.step(ours, first.argmax(-1), state, policy)
    return kept, torch.cat([first, second])


def next_logits(hf, first, cache, at):
    # the new token's position is the prompt's length, not the cut cache's (kvpress's pipeline passes it so)
    return hf(first.argmax(-1)[:, None], past_key_values=cache, position_ids=torch.tensor([[at]])).logits[:, -1]


def positions(kept_keys, all_keys, tol=1e-9):
    """Which positions kvpress kept: each kept key (B, Hkv, kept, hd) matched to the prompt's (B, Hkv, T, hd)."""
    nearest = torch.cdist(kept_keys, all_keys).argmin(-1)            # (B, Hkv, kept): the closest prompt key
    found = all_keys.gather(2, nearest[..., None].expand_as(kept_keys))
    assert (found - kept_keys).abs().max() < tol, "a kept key is none of the prompt's keys"
    return nearest.sort(-1).values                                   # (B, Hkv, kept)


def n_kept(T, ratio):
    return kvpress.utils.compute_n_kept(T, ratio)


@pytest.fixture(scope="module")
def models():
    """(transformers' model, ours) from the default checkpoint, float64."""
    folder = default_model.default_model_dir()
    ours = load_weights.load_model(folder, torch.float64)
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
    float64_oracle(hf, ours)
    return hf, ours


@pytest.fixture(scope="module")
def prompt(models):
    ids = experiments.passkey_prompts(load_weights.load_tokenizer(), 2048, (0.5,), (71432,))
    return Prompt(*models, ids)


def assert_same_rows(kept, ours_kept, what):
    for layer, (theirs, mine) in enumerate(zip(kept, ours_kept)):
        assert torch.equal(theirs, mine), f"{what}: layer {layer} keeps other rows"


@torch.no_grad()
def test_tova_as_a_press_keeps_our_rows_for_real(models, prompt):
    """Both sides for real, once: kvpress's context manager on the model, and fast.prefill. The replays
    the other cases use give the same rows and logits."""
    hf, ours = models
    ids, T = prompt.ids, prompt.ids.shape[1]
    press, size = bridge.press(policies.tova, 0.5), n_kept(T, 0.5)
    cache = transformers.DynamicCache()
    with press(hf):
        first = hf(ids, past_key_values=cache).logits[:, -1]
    kept = [positions(layer.keys, keys) for layer, keys in zip(cache.layers, prompt.keys)]
    hf_logits = torch.cat([first, next_logits(hf, first, cache, T)])
    logits, state = fast.prefill(ours, ids, policies.tova, size, oneshot=T)
    ours_kept, our_logits = ours_after(ours, state, logits[:, -1], policies.tova)
    assert_same_rows(kept, ours_kept, "TOVA as a press")
    torch.testing.assert_close(hf_logits, our_logits, rtol=0, atol=EXACT)
    assert torch.equal(hf_logits.argmax(-1), our_logits.argmax(-1))
    replayed, replayed_logits = prompt.kvpress(press)
    assert_same_rows(replayed, kept, "kvpress's hook replayed")
    torch.testing.assert_close(replayed_logits, hf_logits, rtol=0, atol=0)
    replayed, replayed_logits = prompt.ours_cut(policies.tova, size)
    assert_same_rows(replayed, ours_kept, "our cut replayed")
    torch.testing.assert_close(replayed_logits, our_logits, rtol=0, atol=EXACT)


@pytest.mark.parametrize("name,policy,ratio", [("knorm", zoo.knorm, 0.75), ("window+4", policies.sink, 0.9),
                                               ("h2o", policies.h2o, 0.25)])
def test_our_policy_as_a_press_keeps_our_rows(prompt, name, policy, ratio):
    kept, hf_logits = prompt.kvpress(bridge.press(policy, ratio))
    ours_kept, our_logits = prompt.ours_cut(policy, n_kept(prompt.ids.shape[1], ratio))
    assert_same_rows(kept, ours_kept, f"{name} at ratio {ratio}")
    # the first new token is read with the whole prompt, the second with the cut state (kvpress: the kept
    # rows and the new one; ours: the same, then one row dropped). After that kvpress's cache grows and
    # ours keeps its size, so nothing further is compared.
    torch.testing.assert_close(hf_logits, our_logits, rtol=0, atol=EXACT)
    assert torch.equal(hf_logits.argmax(-1), our_logits.argmax(-1))


def keep_last(policy):
    """kvpress's TOVAPress scores the rows with the last query but leaves the last row out and always keeps it."""
    def fn(rows):
        return policy(rows).masked_fill(rows.pos[:, :1] == rows.t, math.inf)
    return fn


def knorm_untied(rows):
    """zoo.knorm without its tie-break (the newer of two equal norms wins), as KnormPress scores."""
    return -rows.keys.norm(dim=-1).to(rows.attn.dtype)


def observed(rows):
    """kvpress's ObservedAttentionPress: the attention a row received, averaged over the queries that saw
    it, with no recent share kept; our h2o sums it and keeps the recent half."""
    return rows.score / (rows.t - rows.pos + 1)


@pytest.mark.parametrize("press,ours", [("TOVAPress", keep_last(policies.tova)), ("KnormPress", knorm_untied),
                                        ("StreamingLLMPress", policies.sink)])
def test_kvpress_presses_keep_our_rows(prompt, press, ours):
    ratio = 0.5
    kept, _ = prompt.kvpress(getattr(kvpress, press)(compression_ratio=ratio))
    ours_kept, _ = prompt.ours_cut(ours, n_kept(prompt.ids.shape[1], ratio))
    for layer, (theirs, mine) in enumerate(zip(kept, ours_kept)):
        if press == "KnormPress" and not torch.equal(theirs, mine):
            # in layer 0 a key's norm depends on its token alone (RoPE keeps norms), so a repeated token's
            # rows tie up to rounding, which differs between the two implementations: the rows kept may
            # differ only by such ties, so the norms kept are the same
            norm = lambda p: prompt.keys[layer].norm(dim=-1).gather(-1, p).sort(-1).values
            torch.testing.assert_close(norm(theirs), norm(mine), rtol=0, atol=1e-12)
            continue
        assert torch.equal(theirs, mine), f"{press}: layer {layer} keeps other rows"


@torch.no_grad()
def test_observed_attention_press_keeps_our_rows(models):
    """ObservedAttentionPress reads the layers' own attention weights, which only eager attention returns
    (in float32, hence the looser match); its full (T, T) weights for 30 layers are why this one
    runs for real, on the prompt's first 1,024 tokens."""
    hf, ours = models
    ids = experiments.passkey_prompts(load_weights.load_tokenizer(), 2048, (0.5,), (71432,))[:, :1024]
    hf.set_attn_implementation("eager")
    try:
        cache = transformers.DynamicCache()
        with kvpress.ObservedAttentionPress(compression_ratio=0.5)(hf):
            hf(ids, past_key_values=cache)
    finally:
        hf.set_attn_implementation("sdpa")
    keys = []
    llama.forward(ours, ids, lambda i, q, k, v: keys.append(k[:, :, 0]) or llama.softmax_attention(q, k, v))
    _, state = fast.prefill(ours, ids, observed, n_kept(1024, 0.5), oneshot=1024)
    kept = [positions(layer.keys, k, tol=1e-4) for layer, k in zip(cache.layers, keys)]
    assert_same_rows(kept, [ms.pos[:, :, :ms.n].sort(-1).values for ms in state.layers], "ObservedAttentionPress")


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="compression_ratio must be a number in \\[0, 1\\).*got 1.5"):
        bridge.press(policies.tova, 1.5)
    with pytest.raises(ValueError, match="causal policy.*Lookahead"):
        bridge.press("lookahead")
    with pytest.raises(ValueError, match="unknown policy 'tovaa'"):
        bridge.press("tovaa")


def test_a_policy_runs_in_kvpress_pipeline(models, tmp_path):
    """docs/files.md's "From here to scale": press(policies.tova) and a user's file policy inside kvpress's own
    pipeline on the default model, float32 on the CPU; each cuts the context's cache to half."""
    mine = tmp_path / "mine.py"
    mine.write_text("def fn(rows):\n    return rows.pos[:, :1].double().masked_fill(rows.pos[:, :1] < 4, float('inf'))\n")
    pipe = bridge.pipeline()
    filler = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. " * 20
    context = ("There is a pass key hidden inside a lot of irrelevant text. Find it and memorize it.\n"
               f"{filler} The pass key is 71432. Remember it. 71432 is the pass key. {filler}")
    question = "What is the pass key? The pass key is"
    answers = {}
    for name, press in [("full", None), ("tova", bridge.press(policies.tova, 0.5)), ("mine", bridge.press(f"{mine}:fn", 0.5))]:
        cache = transformers.DynamicCache()
        answers[name] = pipe(context, question=question, press=press, cache=cache, max_new_tokens=8)["answer"]
        length = len(pipe.tokenizer.encode(pipe.tokenizer.bos_token + context, add_special_tokens=False))
        assert cache.get_seq_length() == (length if press is None else n_kept(length, 0.5)), name
    assert "714" in answers["full"] and "714" in answers["tova"], answers  # the model writes numbers digit by digit
    assert "714" not in answers["mine"], answers  # the key sits in the middle, which a window with sinks drops

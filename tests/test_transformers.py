"""Logits equal those of the `transformers` library on tiny random checkpoints it saved itself.

Optional: skipped where transformers is not installed (it is not in requirements.txt).
"""
import pytest
import torch

import llama
import load_weights
import msrnn

transformers = pytest.importorskip("transformers")

TINY = dict(vocab_size=101, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=6,
            num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5)
CASES = {
    "llama-gqa": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-tied-headdim": ("LlamaConfig", "LlamaForCausalLM", {"tie_word_embeddings": True, "head_dim": 16}),
    "llama3-rope": ("LlamaConfig", "LlamaForCausalLM", {"rope_theta": 5e5, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32}}),
    "linear-rope": ("LlamaConfig", "LlamaForCausalLM", {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
    "mistral-window": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 9}),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("shard", [False, True])
def test_logits_match_transformers(tmp_path, name, shard):
    cfg_cls, model_cls, over = CASES[name]
    torch.manual_seed(0)
    config = getattr(transformers, cfg_cls)(**TINY, **over)
    config._attn_implementation = "eager"
    hf = getattr(transformers, model_cls)(config).eval()
    for p in hf.parameters():  # stronger than the default init, so that attention is not uniform
        torch.nn.init.normal_(p, std=0.2)
    hf.save_pretrained(tmp_path, max_shard_size="100KB" if shard else "1GB")
    if shard:
        assert (tmp_path / "model.safetensors.index.json").exists()
    x = torch.randint(0, 101, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = hf.double()(x).logits
    ours = load_weights.load_model(tmp_path, torch.float64)
    # transformers computes RoPE angles in float32, hence ~1e-7 differences, not 1e-15
    torch.testing.assert_close(llama.forward(ours, x), ref, rtol=0, atol=1e-6)
    torch.testing.assert_close(msrnn.run(ours, x), ref, rtol=0, atol=1e-6)

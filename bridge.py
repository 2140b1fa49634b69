"""From here to scale: a policy written here, run as a press of NVIDIA's kvpress (PyPI `kvpress`).

kvpress compresses a Hugging Face model's cache once, after the prompt: each attention layer's
press scores every prompt row (`ScorerPress.score`) and keeps the best. That is this project's
one-shot regime (msrnn.init_state(oneshot=...)) with another signature, so `press(policy)` builds
the policy's `Rows` from kvpress's arguments and hands the scores back. test_bridge.py shows that
the rows kept are those of fast.prefill's one-shot cut, on the default model.

Optional: kvpress is imported only when `press` is called; nothing else here imports this file.
Install: pip install kvpress==0.5.5 transformers==5.2.0 (kvpress 0.5.5 needs transformers < 5.3).
"""
import math

import torch

import checks
import llama
import load_weights
import msrnn
import specs

BLOCK = 256  # prompt queries whose attention is computed at once: memory O(BLOCK * T) per layer, not O(T²)


def press(policy, compression_ratio: float = 0.5):
    """A kvpress ScorerPress that keeps, in every layer, the rows `policy` scores highest.

    policy: a function rows -> scores, or a name as the commands take it ('tova', 'sink:8',
    'mine.py:fn'). compression_ratio: the share of the prompt's rows dropped, as in kvpress."""
    try:
        from kvpress import ScorerPress  # the optional dependency, only here
    except ImportError as e:
        raise ImportError(f"bridge.press needs kvpress ({e}): pip install kvpress==0.5.5 transformers==5.2.0") from None

    named = specs.named(policy)
    if named.fn is None or named.reads_ahead:
        raise ValueError(f"press needs a causal policy rows -> scores; {named.label} is not one")
    if not (isinstance(compression_ratio, (int, float)) and 0 <= compression_ratio < 1):
        raise ValueError(f"compression_ratio must be a number in [0, 1), the share of rows dropped; got {compression_ratio!r}")

    class PolicyPress(ScorerPress):
        def score(self, module, hidden_states, keys, values, attentions, kwargs):
            from kvpress.utils import compute_n_kept
            rows = rows_of(module, hidden_states, keys, values, attentions, kwargs,
                           size=compute_n_kept(keys.shape[2], self.compression_ratio))
            scores = checks.score_rows(named.fn, rows).expand(keys.shape[:3])  # (B, Hkv, T): a layer-wise score per KV head
            return ranks(scores)

        def __repr__(self):
            return f"press({named.label}, compression_ratio={self.compression_ratio})"

    return PolicyPress(compression_ratio=compression_ratio)


def rows_of(module, hidden_states, keys, values, attentions, kwargs, size: int):
    """What a policy sees at the one-shot cut (msrnn.Rows), from a kvpress hook's arguments: the
    prompt's last token is the current one; every row is new to the policy, so prev is NaN.
    keys, values (B, Hkv, T, hd) with RoPE applied, as in the cache; hidden_states (B, T, d)."""
    from kvpress.utils import get_prerope_query_states
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    B, Hkv, T, hd = keys.shape
    G = module.config.num_attention_heads // Hkv
    cos, sin = kwargs["position_embeddings"]                          # (B, T, hd) each
    q = get_prerope_query_states(module, hidden_states)               # (B, H, T, hd), as kvpress's presses get it
    q, _ = apply_rotary_pos_emb(q, q, cos, sin)                       # RoPE, as the layer applied it to its queries
    q = q.view(B, Hkv, G, T, hd)                                      # (B, Hkv, G, T, hd): G heads share a KV head
    scale = getattr(module, "scaling", hd ** -0.5)
    wide = llama.wide(keys.dtype)
    score = torch.zeros(B, Hkv, T, dtype=wide, device=keys.device)
    for i0 in range(0, T, BLOCK):  # attention of queries i0..i1-1, under the causal mask, in blocks
        i1 = min(i0 + BLOCK, T)
        if attentions is not None:  # the layer's own weights (eager attention): (B, H, T, T)
            a = attentions[:, :, i0:i1, :i1].view(B, Hkv, G, i1 - i0, i1).to(wide)
        else:  # computed from the hidden states, as kvpress's SnapKV and TOVA presses do under SDPA
            s = (q[:, :, :, i0:i1] * scale) @ keys[:, :, None, :i1].mT  # (B, Hkv, G, b, i1): rows after i1 are unseen
            s = s.masked_fill(~llama.causal_mask(i1, None, keys.device)[i0:i1], -math.inf)
            a = s.softmax(-1, dtype=wide)
        score[:, :, :i1] += a.sum((2, 3))                            # attention each row received, summed over G heads
    pos = kwargs["cache_position"].expand(B, Hkv, T)                  # (B, Hkv, T): kvpress compresses a prompt from 0
    return msrnn.Rows(attn=a[:, :, :, -1], pos=pos, score=score, keys=keys, values=values, query=q[:, :, :, -1],
                      prev=torch.full_like(score, math.nan), t=T - 1, size=size, layer=module.layer_idx)


def ranks(scores):
    """Scores (B, Hkv, T) as their ranks 0..T-1, ties ranked by row (the earlier lower), so that
    kvpress's top-k keeps exactly the rows msrnn's cut keeps (msrnn.lowest: ties go against the earlier row)."""
    order = scores.sort(dim=-1, stable=True).indices                  # (B, Hkv, T): lowest first
    rank = torch.arange(scores.shape[-1], device=scores.device, dtype=torch.float32).expand_as(order)  # exact to 2^24 rows
    return torch.empty_like(rank).scatter_(-1, order, rank)


def pipeline(path=None, dtype=torch.float32, device="cpu"):
    """kvpress's "kv-press-text-generation" pipeline on a checkpoint folder (None: the default model).
    A folder without tokenizer_config.json (the default model's, unpacked from a GGUF file) gets its
    tokenizer from tokenizer.json and config.json's token ids, which transformers would not guess."""
    import kvpress  # noqa: F401  (registers the pipeline with transformers)
    import transformers

    folder = load_weights.checkpoint_folder(path)
    if (folder / "tokenizer_config.json").is_file():
        tok = transformers.AutoTokenizer.from_pretrained(folder)
    else:
        tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
        config = transformers.AutoConfig.from_pretrained(folder)
        tok.bos_token, tok.eos_token = (tok.convert_ids_to_tokens(config.bos_token_id),
                                        tok.convert_ids_to_tokens(config.eos_token_id))
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device)
    return transformers.pipeline("kv-press-text-generation", model=model, tokenizer=tok, device=device)

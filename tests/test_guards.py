"""Bad arguments and hostile checkpoint folders get an error naming the file, argument or entry, and its value:
never a deep traceback, and never a file read from outside the checkpoint folder."""
import json
import re

import pytest
from safetensors.torch import save_file
from tokenizers import Tokenizer, models

import load_weights
from conftest import random_model, tiny_config
from load_weights import CheckpointError
from test_loader import hf_tensors, save


def write_tokenizer(file):
    Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")).save(str(file))


def outside(tmp_path, case):
    """A checkpoint folder tmp_path/m whose `case` file lies outside it, in tmp_path/out: a valid file, so that
    its place is the only thing wrong. Returns (the call, the message expected, the outside file)."""
    model = random_model(tiny_config())
    folder, out = tmp_path / "m", tmp_path / "out"
    out.mkdir()
    if case in ("model.safetensors", "config.json", "tokenizer.json"):  # the whole file lives in out/, linked in
        save(out, model)
        write_tokenizer(out / "tokenizer.json")
        save(folder, model)
        write_tokenizer(folder / "tokenizer.json")
        (folder / case).unlink()
        (folder / case).symlink_to(out / case)
        call = load_weights.load_tokenizer if case == "tokenizer.json" else load_weights.load_model
        return call, f"{re.escape(str(folder / case))}: resolves to {re.escape(str(out / case))}, outside", out / case
    # sharded: model.norm.weight in a file of its own, that the index names outside the folder
    tensors = hf_tensors(model)
    norm = {"model.norm.weight": tensors.pop("model.norm.weight")}
    save(folder, model, tensors=tensors)
    (folder / "model.safetensors").rename(folder / "rest.safetensors")
    save_file(norm, out / "norm.safetensors")
    entry = {"dotdot": "../out/norm.safetensors", "absolute": str(out / "norm.safetensors"),
             "symlinked file": "norm.safetensors", "symlinked folder": "sub/norm.safetensors"}[case]
    if case == "symlinked file":
        (folder / "norm.safetensors").symlink_to(out / "norm.safetensors")
    if case == "symlinked folder":
        (folder / "sub").symlink_to(out)
    weight_map = dict.fromkeys(tensors, "rest.safetensors") | {"model.norm.weight": entry}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    message = re.escape(f"model.safetensors.index.json: entry 'model.norm.weight' -> '{entry}': resolves to "
                        f"{out / 'norm.safetensors'}, outside the checkpoint folder {folder.resolve()}; refused unopened")
    return load_weights.load_model, message, out / "norm.safetensors"


@pytest.mark.parametrize("case", ["dotdot", "absolute", "symlinked file", "symlinked folder",
                                  "model.safetensors", "config.json", "tokenizer.json"])
def test_a_file_outside_the_folder_is_refused_unopened(tmp_path, monkeypatch, case):
    call, message, file = outside(tmp_path, case)
    opened = []
    real_open = load_weights.safe_open
    monkeypatch.setattr(load_weights, "safe_open", lambda f, **kw: opened.append(f) or real_open(f, **kw))
    with pytest.raises(CheckpointError, match=message):
        call(tmp_path / "m")
    assert file not in opened and not any(tmp_path / "out" in f.resolve().parents for f in opened)


def test_a_symlink_within_the_folder_still_loads(tmp_path):
    """Not a new refusal: a link that stays inside the folder is the folder's own file."""
    folder = save(tmp_path / "m", random_model(tiny_config()))
    (folder / "real").mkdir()
    (folder / "model.safetensors").rename(folder / "real" / "weights.safetensors")
    (folder / "model.safetensors").symlink_to(folder / "real" / "weights.safetensors")
    assert load_weights.load_model(folder).config.n_layers == 2


@pytest.mark.parametrize("content, message", [
    (b"", "tokenizer.json: empty, expected a tokenizers JSON file"),
    (b'{"version": "1.0", "model":', r"tokenizer.json: not a valid tokenizer \(.*EOF"),
    (b"[1, 2]", "tokenizer.json: not a valid tokenizer"),
    (b"{}", "tokenizer.json: not a valid tokenizer"),
    (b"\xff\xfe\x00", "tokenizer.json: not a valid tokenizer"),
], ids=["empty", "truncated", "a list", "no model", "not utf-8"])
def test_a_bad_tokenizer_json_is_named(tmp_path, content, message):
    (tmp_path / "tokenizer.json").write_bytes(content)
    with pytest.raises(CheckpointError, match=re.escape(f"{tmp_path}/") + message):
        load_weights.load_tokenizer(tmp_path)


@pytest.mark.parametrize("function", [load_weights.load_model, load_weights.load_tokenizer,
                                      load_weights.read_config, load_weights.checkpoint_folder])
@pytest.mark.parametrize("path, shown", [(123, "int 123"), (["m"], r"list \['m'\]"), (b"m", "bytes b'm'")])
def test_a_path_that_is_not_a_path_is_named(function, path, shown):
    with pytest.raises(TypeError, match=f"^checkpoint path must be a str or os.PathLike, got {shown}$"):
        function(path)


@pytest.mark.parametrize("name", ["float64", "float32", "bfloat16", "float16"])
def test_dtype_by_name_is_accepted(tmp_path, name):
    """The CLI's names (load_weights.DTYPES) mean their torch.dtype."""
    loaded = load_weights.load_model(save(tmp_path / "m", random_model(tiny_config())), dtype=name)
    assert loaded.dtype == load_weights.DTYPES[name] and loaded.layers[0].w_qkv.dtype == loaded.dtype


@pytest.mark.parametrize("kwargs, error, message", [
    ({"dtype": "float8"}, ValueError, r"dtype must be a torch.dtype such as torch.float64 \(or its name: float64, "
                                      r"float32, bfloat16, float16\), got str 'float8'"),
    ({"dtype": "torch.float64"}, ValueError, "got str 'torch.float64'"),
    ({"dtype": 64}, ValueError, "dtype must be a torch.dtype .* got int 64"),
    ({"device": 0}, TypeError, "device must be a str or torch.device, got int 0"),
    ({"device": 1.5}, TypeError, "device must be a str or torch.device, got float 1.5"),
    ({"device": "gpu"}, ValueError, r"unknown device 'gpu' \(cpu, cuda, cuda:N, mps or auto\)"),
])
def test_a_bad_dtype_or_device_is_named(tmp_path, kwargs, error, message):
    folder = save(tmp_path / "m", random_model(tiny_config()))
    with pytest.raises(error, match=message):
        load_weights.load_model(folder, **kwargs)


def test_the_project_never_imports_kvpress_or_transformers():
    """kvpress and transformers are test oracles and bridge.py's optional dependency: importing every module
    (the reading path, the engine, the commands, bridge.py itself) loads neither, so the project runs without them."""
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parent.parent
    modules = sorted(".".join(p.relative_to(root).with_suffix("").parts) for p in root.rglob("*.py")
                     if p.parts[len(root.parts)] not in ("tests", "docs", "course", "results") and not p.stem.startswith("test_")
                     and p.stem != "conftest")
    code = (f"import sys; import {', '.join(modules)}\n"
            "print(sorted(m for m in ('kvpress', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert "lab.bridge" in modules and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_bridge_without_kvpress_says_how_to_install_it(monkeypatch):
    import sys
    from lab import bridge
    import policies
    monkeypatch.setitem(sys.modules, "kvpress", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install kvpress==0\.5\.5 transformers==5\.2\.0"):
        bridge.press(policies.tova)

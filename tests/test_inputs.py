"""Nothing silent: a bad input to the core, a damaged cache, an interrupted write, an allocation that
cannot fit each get an error that names the culprit (or the right answer), never a wrong result.
The loader's bad checkpoints are in test_loader.py, the CLI's bad arguments in test_experiments.py."""
import dataclasses
import json
import re
import subprocess
import sys
import warnings

import pytest
import torch

from engine import guards
from data import default_model
from engine import fast, oneshot
from lab import harness
import llama
import msrnn
import policies
from lab import specs
from conftest import EXACT, assert_close, random_model, tiny_config, tokens

MODEL = random_model(tiny_config())  # vocabulary 61

ENTRY_POINTS = {  # every way into the core that takes token ids
    "forward": lambda x: llama.forward(MODEL, x),
    "run": lambda x: msrnn.run(MODEL, x, policies.tova, 4),
    "prefill": lambda x: fast.prefill(MODEL, x, policies.tova, 4),
    "masked_forward": lambda x: msrnn.masked_forward(MODEL, x, policies.tova, 4),
    "generate": lambda x: next(msrnn.generate(MODEL, x, 2)),
    "feed": lambda x: msrnn.feed(MODEL, x, msrnn.init_state(MODEL, 1)),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("bad, message", [
    (torch.tensor([[3, -1, 5]]), r"token id -1 is outside the vocabulary \(0 <= id < 61\)"),  # used to wrap around
    (torch.tensor([[3, 61]]), "token id 61 is outside the vocabulary"),
    (torch.tensor([[1.0, 2.0]]), "must be an integer tensor of token ids, got torch.float32"),
    ([[1, 2]], "must be an integer tensor of token ids, got list"),
    (torch.zeros(1, 0, dtype=torch.long), r"with at least one token, got \(1, 0\)"),
    (torch.zeros(1, 2, 3, dtype=torch.long), r"tokens must have shape .*got \(1, 2, 3\)"),
])
def test_bad_tokens_are_named(entry, bad, message):
    with pytest.raises(ValueError, match=message):
        ENTRY_POINTS[entry](bad)


def test_every_entry_point_takes_one_sequence_or_a_batch():
    x = tokens(1, 12)
    full = msrnn.run(MODEL, x[0], policies.tova, 4)  # (T, vocab)
    for view in (fast.prefill, oneshot.masked_forward):  # a 1-D tensor once failed to unpack
        one, _ = view(MODEL, x[0], policies.tova, 4)
        assert one.shape == (12, 61)
        assert_close(one, full, atol=EXACT, msg=view.__name__)


@pytest.mark.parametrize("kwargs, message", [
    (dict(size=True), "size must be a positive integer or None, got True"),  # True once meant 1
    (dict(size=2.0), "size must be a positive integer or None, got 2.0"),
    (dict(size=0), "size must be a positive integer or None, got 0"),
    (dict(batch=0), "batch must be a positive integer, got 0"),
    (dict(size=4, prompt=True), "oneshot must be a prompt length >= 0"),
    (dict(prompt=4), "oneshot must be a prompt length >= 0 for a bounded state"),
])
def test_bad_state_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        oneshot.init_state(MODEL, **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=-1.0), "temperature must be a number >= 0"),  # once sampled from garbage
    (dict(temperature=float("nan")), "temperature must be a number >= 0"),
    (dict(temperature="1"), "temperature must be a number >= 0"),
    (dict(temperature=1.0, top_k=0), "top_k must be None or an integer from 1 to the vocabulary size 61, got 0"),
    (dict(temperature=1.0, top_k=62), "top_k must be None or an integer from 1 to the vocabulary size 61, got 62"),
    (dict(temperature=1.0, top_k=2.5), "top_k must be .* got 2.5"),
    (dict(max_new=-1), "max_new must be an integer >= 0, got -1"),
    (dict(seed="x"), r"seed must be an integer from -2\*\*63 to 2\*\*64 - 1, got 'x'"),
])
def test_bad_sampling_arguments_are_named(kwargs, message):
    args = {"max_new": 3, **kwargs}
    with pytest.raises(ValueError, match=message):
        next(msrnn.generate(MODEL, tokens(1, 4), **args))


def test_top_k_of_the_whole_vocabulary_is_plain_sampling():
    plain = torch.cat(list(msrnn.generate(MODEL, tokens(1, 4), 6, temperature=0.8, seed=3)))
    assert torch.equal(plain, torch.cat(list(msrnn.generate(MODEL, tokens(1, 4), 6, temperature=0.8, top_k=61, seed=3))))


def test_positions_past_the_trained_context_warn():
    model = random_model(tiny_config(max_positions=16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # within the context: no warning at all
        msrnn.run(model, tokens(1, 16), policies.tova, 4)
    for run in (lambda: llama.forward(model, tokens(1, 17)), lambda: msrnn.run(model, tokens(1, 17), policies.tova, 4),
                lambda: fast.prefill(model, tokens(1, 20)), lambda: list(msrnn.generate(model, tokens(1, 10), 8))):
        with pytest.warns(UserWarning, match=r"past the model's max_position_embeddings \(16\)"):
            run()


def test_a_huge_size_on_a_short_text_allocates_only_what_it_holds():
    """size 10**6 once allocated 44 GiB up front for 64 tokens: slots now come as rows arrive, and a
    bounded state stops growing at size + 1 slots."""
    x = tokens(1, 64)
    logits, state = fast.prefill(MODEL, x, policies.tova, 10 ** 6)
    assert state.layers[0].k.shape[2] == 65  # its 64 rows, and a slot for the next token
    assert_close(logits, llama.forward(MODEL, x), atol=EXACT)  # never full: the transformer itself
    small = msrnn.init_state(MODEL, 1, 20)
    msrnn.feed(MODEL, tokens(1, 50), small, policies.tova)
    assert all(ms.k.shape[2] == 21 for ms in small)  # 16, then capped at size + 1 rather than 32


def test_what_cannot_fit_in_memory_is_refused_before_allocating():
    with pytest.raises(MemoryError, match=r"a \(1000000, 1000000\) attention mask needs 931.3 GiB, but only .* GiB "
                                          "of memory is available"):
        llama.causal_mask(10 ** 6)
    # an unbounded state of 10**7 sequences that holds 16 rows (views of one number) must not double
    huge = lambda *shape, dtype=torch.float32: torch.zeros((), dtype=dtype).expand(10 ** 7, *shape)
    ms = msrnn.MultiState(k=huge(8, 16, 128), v=huge(8, 16, 128), pos=huge(8, 16, dtype=torch.long), score=huge(8, 16),
                          prev=huge(8, 16),
                          free=torch.zeros(1, 8, dtype=torch.long), n=16)
    with pytest.raises(MemoryError, match=r"a multi-state of 32 rows needs 2.*GiB, but only"):
        ms._grow()


# ---------------------------------------------------------------- caches and files

def fake_conversion(calls):
    """default_model's download and conversion, replaced by three small files (no network)."""
    def convert(gguf_path, out, log):
        calls.append(out)
        for name in default_model.FILES:
            (out / name).write_text(f"{name} {len(calls)}")
    return {"_fetch_gguf": lambda tmp, log: tmp / "model.gguf", "_convert": convert}


def test_a_corrupt_model_cache_is_converted_again(tmp_path, monkeypatch, capsys):
    calls = []
    for name, fn in fake_conversion(calls).items():
        monkeypatch.setattr(default_model, name, fn)
    monkeypatch.setenv("MSRNN_CACHE", str(tmp_path))
    monkeypatch.setattr(default_model, "_VERIFIED", set())
    folder = default_model.default_model_dir()
    assert len(calls) == 1 and json.loads((folder / "sha256.json").read_text()).keys() == set(default_model.FILES)
    assert default_model.default_model_dir() == folder and len(calls) == 1  # intact: used as it is
    weights = folder / "model.safetensors"
    weights.write_text(weights.read_text().replace("1", "9"))  # the same size, other bytes
    default_model._VERIFIED.clear()  # a new process
    default_model.default_model_dir()
    assert len(calls) == 2 and weights.read_text() == "model.safetensors 2"
    assert "model.safetensors changed since conversion (sha256): converting the model again" in capsys.readouterr().err


def test_an_unwritable_cache_names_the_folder_and_the_variable(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("MSRNN_CACHE", str(blocker / "cache"))  # a folder inside a file cannot be made
    monkeypatch.setattr(default_model, "_VERIFIED", set())
    with pytest.raises(default_model.CacheError, match=r"cannot write to the cache folder .*a-file/cache .*set MSRNN_CACHE"):
        default_model.default_model_dir()


def test_writes_are_atomic_and_a_damaged_cached_result_is_measured_again(tmp_path, capsys):
    target = tmp_path / "result.json"
    harness.write_cached(target, {"ppl": 1.0})
    written = target.read_text()
    with pytest.raises(KeyboardInterrupt):
        with harness.atomic(target) as tmp:
            tmp.write_text('{"ppl": 2')  # half written, then interrupted
            raise KeyboardInterrupt
    assert target.read_text() == written and list(tmp_path.iterdir()) == [target]  # no temporary left
    assert harness.read_cached(target) == {"ppl": 1.0} and harness.read_cached(tmp_path / "none.json") is None
    target.write_text('{"ppl": 2')  # damaged by an older version or by hand: measured again, not fatal
    assert harness.read_cached(target) is None
    assert f"ignoring the unreadable cached result {target}" in capsys.readouterr().err


def test_the_cli_shows_one_line_not_a_traceback(tmp_path):
    cmd = [sys.executable, "demo.py", "--model", str(tmp_path / "nowhere"), "ppl"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=harness.ROOT)
    assert out.returncode == 1 and out.stderr == f"error: {tmp_path / 'nowhere'}: no such checkpoint folder\n"
    debug = subprocess.run(cmd + ["--debug"], capture_output=True, text=True, cwd=harness.ROOT)
    assert "Traceback" in debug.stderr and "CheckpointError" in debug.stderr


def test_without_a_cxx_compiler_compile_runs_uncompiled_with_one_warning(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    with pytest.warns(UserWarning, match=r"needs a C\+\+ compiler") as caught:
        fn = fast.compiled.__wrapped__(llama.step)  # past the cache of the real answer
    assert fn is llama.step and len(caught) == 1


# ---------------------------------------------------------------- the last 4%: each class fails on the code before it

def writes_into(field):
    """A policy that scores like Window but also writes into one field of what it is shown."""
    def vandal(rows):
        getattr(rows, field).mul_(-1)
        return rows.pos[:, :1].double()
    return vandal


@pytest.mark.parametrize("field", ["pos", "score", "keys", "attn"])
@pytest.mark.parametrize("view", ["run", "prefill", "masked_forward"])
def test_a_policy_that_writes_into_rows_is_named(field, view):
    run = {"run": msrnn.run, "prefill": lambda *a: fast.prefill(*a)[0], "masked_forward": lambda *a: msrnn.masked_forward(*a)[0]}
    with pytest.raises(guards.PolicyError, match=rf"policy vandal wrote into rows\.{field}"):
        run[view](MODEL, tokens(1, 12), writes_into(field), 4)


def honest(rows):
    return rows.pos[:, :1].double()


def around_the_counters(how):
    """A policy that scores like `honest` but writes, where no version counter of this call sees it, into
    the keys and values: through .data, through .numpy(), through vars(rows), or into the tensors of an
    earlier call (another layer's: the state of layer 0 from layer 1)."""
    kept = {}
    def sneak(rows):
        if how == ".data":
            rows.keys.data.mul_(-1)
        elif how == ".numpy()":
            rows.values.numpy()[:] = 0
        elif how == "vars(rows)":
            for x in vars(rows).values():
                if isinstance(x, torch.Tensor) and x.is_floating_point():
                    x.data.mul_(-1)
        elif rows.layer == 0:
            kept["keys"], kept["values"] = rows.keys, rows.values
        else:
            kept["keys"].mul_(-1), kept["values"].zero_()
        return honest(rows)
    return sneak


@pytest.mark.parametrize("how", [".data", ".numpy()", "vars(rows)", "an earlier call's"])
@pytest.mark.parametrize("view", ["run", "prefill", "masked_forward"])
def test_a_write_around_the_version_counters_does_not_reach_the_state(view, how):
    """The policy is shown copies (guards.policy_call): the logits are the honest policy's, bit for bit."""
    run = {"run": msrnn.run, "prefill": lambda *a: fast.prefill(*a)[0], "masked_forward": lambda *a: msrnn.masked_forward(*a)[0]}
    x = tokens(1, 12)
    assert torch.equal(run[view](MODEL, x, around_the_counters(how), 4), run[view](MODEL, x, honest, 4))


def test_the_checker_fails_a_policy_that_writes_into_rows():
    from lab import checker
    out = checker.check(writes_into("pos"), log=lambda *_: None)
    assert out["contract"][0] == "fail" and "wrote into rows.pos" in out["contract"][1]


@pytest.mark.parametrize("spec, message", [
    ("sink:-1", r"'sink:-1': sinks must be an integer from 0 to ∞, got '-1'"),  # ran, labelled Window+-1
    ("sink:abc", "sinks must be an integer"),
    ("sink:1.5", "sinks must be an integer"),
    ("lookahead:-3", "horizon must be an integer from 0"),
])
def test_policy_parameters_out_of_range_are_named(spec, message):
    with pytest.raises(ValueError, match=message):
        specs.named(spec)


def test_a_policy_given_by_name_where_a_function_is_expected():
    for entry in (lambda: msrnn.run(MODEL, tokens(1, 8), "tova", 4), lambda: fast.prefill(MODEL, tokens(1, 8), "tova", 4),
                  lambda: next(msrnn.generate(MODEL, tokens(1, 8), 2, "tova", 4))):
        with pytest.raises(ValueError, match=r"policy must be a function rows -> scores .*specs.named\('tova'\).*got str"):
            entry()  # failed only once the state filled, with "'str' object is not callable"


def test_a_text_of_one_token_has_no_perplexity():
    from lab import experiments
    with pytest.raises(ValueError, match=r"the text has 1 token\(s\): perplexity needs a chunk of at least 2"):
        experiments.perplexity(MODEL, torch.tensor([5]), policies.tova, 4)


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_a_dtype_may_be_named(dtype):
    assert MODEL.to(dtype=dtype).dtype == getattr(torch, dtype)
    assert random_model(tiny_config(), dtype=dtype).dtype == getattr(torch, dtype)


@pytest.mark.parametrize("dtype", ["float8", torch.int64, 64])
def test_a_dtype_that_is_not_a_float_is_named(dtype):
    for make in (lambda: MODEL.to(dtype=dtype), lambda: random_model(tiny_config(), dtype=dtype)):
        with pytest.raises(ValueError, match="dtype must be a float torch.dtype such as torch.float64"):
            make()


def test_retention_refuses_a_size_that_drops_nothing(real_model, tokenizer, books):
    from lab import experiments
    with pytest.raises(ValueError, match="a multi-state of 64 rows never drops a row of a 64-token text"):
        experiments.retention(real_model, tokenizer, size=64, length=64)


# ---------------------------------------------------------------- round 3: states handed between runs, specs, T2R files

def _t2r_state():
    from t2r import linear
    return linear.init_state(MODEL, linear.FeatureMaps(MODEL.config, 4, dtype=MODEL.dtype))


@pytest.mark.parametrize("case,call,says", [
    ("a state of another size", lambda: msrnn.run(MODEL, tokens(1, 5), policies.tova, 4, state=msrnn.init_state(MODEL, 1, 8)),
     "made for size=8"),
    ("a T2R state in run", lambda: msrnn.run(MODEL, tokens(1, 5), state=_t2r_state()), "LinearState, not a multi-state"),
    ("a T2R state in feed", lambda: msrnn.feed(MODEL, tokens(1, 5), _t2r_state()), "LinearState, not a multi-state"),
    ("a parameter given twice", lambda: specs.named("tova_protected:4,sinks=8"), "sinks is given twice"),
], ids=["size", "t2r-run", "t2r-feed", "twice"])
def test_what_one_run_hands_another_is_checked(case, call, says):
    with pytest.raises(ValueError, match=says):
        call()


def test_a_spec_binds_what_it_says_or_names_why_not(tmp_path):
    """A flag is true or false (bool('False') would be True); a value after a key=value is not guessed at;
    a parameter without a default is asked for, by name, also where a label shows it."""
    mine = tmp_path / "mine.py"
    mine.write_text("from policies import label\n\ndef flag(rows, on=True):\n    return rows.pos[:, :1].double()\n\n"
                    "@label('Mine{a}')\ndef needs(rows, a):\n    return rows.pos[:, :1].double() * a\n\n"
                    "def maybe(rows, k=None):\n    return rows.pos[:, :1].double() * (1 if k is None else k)\n")
    assert specs.named(f"{mine}:flag:False").fn.keywords == {"on": False}
    assert specs.named(f"{mine}:maybe:k=None").key == specs.named(f"{mine}:maybe").key  # the default, not the text 'None'
    assert specs.named(f"{mine}:maybe:k=3").fn.keywords == {"k": 3}
    assert specs.named(f"{mine}:needs:2").label == "Mine2"
    for spec, says in [(f"{mine}:flag:banana", "on must be true or false"), ("tova_protected:sinks=8,4", "'4' comes after"),
                       (f"{mine}:needs", "a of needs has no default: give it as .*needs:a=")]:
        with pytest.raises(ValueError, match=says):
            specs.named(spec)


@pytest.mark.parametrize("how", ["a layer the model lacks", "other KV heads", "another dtype"])
@pytest.mark.parametrize("view", ["run", "forward"])
def test_maps_that_do_not_fit_the_model_are_named(view, how):
    """In both of T2R's views, as the tail's check does: not the plain transformer with nothing swapped
    (a layer past the last), and not an einsum's or a matmul's message."""
    from t2r import linear
    cfg = MODEL.config
    maps = {"a layer the model lacks": lambda: linear.FeatureMaps(tiny_config(n_layers=cfg.n_layers + 2), 4,
                                                                  layers=[cfg.n_layers + 1], dtype=MODEL.dtype),
            "other KV heads": lambda: linear.FeatureMaps(tiny_config(n_heads=2 * cfg.n_heads, n_kv_heads=2 * cfg.n_kv_heads),
                                                         4, dtype=MODEL.dtype),
            "another dtype": lambda: linear.FeatureMaps(cfg, 4, dtype=torch.float32)}[how]()
    with pytest.raises(ValueError, match="the maps swap layers|do not fit this model|this model needs"):
        getattr(linear, view)(MODEL, maps, tokens(1, 6))


def test_a_state_of_its_own_size_runs_on():
    """size=None takes the state's size: the guard refuses only a size that disagrees."""
    state = msrnn.init_state(MODEL, 1, 4)
    assert_close(msrnn.run(MODEL, tokens(1, 9), policies.tova, None, state=state),
                 msrnn.run(MODEL, tokens(1, 9), policies.tova, 4), atol=EXACT)


def _run_record(meta, seal=True, **changed):
    from t2r import train
    run = json.dumps(json.loads(meta["run"]) | changed)
    return {"run": run, "seal": train._seal(run)} if seal else {"run": run}  # sealed: the record's own check refuses it


# damage -> (the file's metadata, its tensors) -> (metadata, tensors), and what the refusal says
DAMAGE = {
    "nan": (lambda m, t: (m, {n: x * float("nan") if "exp_avg_sq" in n else x for n, x in t.items()}), "is damaged"),
    "negative": (lambda m, t: (m, {n: -x - 1 if "exp_avg_sq" in n else x for n, x in t.items()}), "is damaged"),
    "missing": (lambda m, t: (m, {n: x for n, x in t.items() if "exp_avg_sq" not in n}), "is missing"),
    "record": (lambda m, t: ({"run": '{"step": "x"}', "seal": __import__("t2r.train").train._seal('{"step": "x"}')}, t),
               "run record is damaged"),
    "edited by hand": (lambda m, t: (_run_record(m, seal=False, seconds=1.0), t), "not as the run wrote it"),
    "seconds": (lambda m, t: (_run_record(m, seconds=float("nan")), t), "run record is damaged"),
    "tokens": (lambda m, t: (_run_record(m, tokens=-5), t), "run record is damaged"),
    "losses": (lambda m, t: (_run_record(m, losses=["x"] * 4), t), "run record is damaged"),
    "step": (lambda m, t: (_run_record(m, step=6, losses=[0.0] * 6), t), "tokens in 6 steps"),
    "huge moments": (lambda m, t: (m, {n: x.fill_(torch.finfo(x.dtype).max) if ".exp_avg." in n else x for n, x in t.items()}),
                     "training diverged at step"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_training_checkpoint_is_refused(tmp_path, damage):
    """Whatever is damaged is named, and a file refused on load leaves the maps as they were."""
    import safetensors.torch
    from safetensors import safe_open
    from t2r import linear, train
    maps = lambda: linear.FeatureMaps(MODEL.config, 4, "relu", dtype=MODEL.dtype)
    path = tmp_path / "run.safetensors"
    train.transfer(MODEL, maps(), tokens(4, 16), epochs=1, checkpoint=path, log=None)
    with safe_open(str(path), "pt") as f:
        meta, tensors = f.metadata(), {n: f.get_tensor(n) for n in f.keys()}
    damaged, says = DAMAGE[damage]
    meta, tensors = damaged(meta, tensors)
    safetensors.torch.save_file(tensors, str(path), metadata=meta)
    fresh = maps()
    before = {n: p.detach().clone() for n, p in fresh.named_parameters()}
    with pytest.raises(ValueError, match=says):
        train.transfer(MODEL, fresh, tokens(4, 16), epochs=2, checkpoint=path, log=None)
    if damage != "huge moments":  # refused on load, before any tensor was copied in
        assert all(torch.equal(p, before[n]) for n, p in fresh.named_parameters())


@pytest.mark.parametrize("spec", ["relu:0", "relu:x", "bogus:4", "hedgehog:5"])
def test_feature_map_specs_are_refused_before_any_work(spec):
    import argparse
    from t2r import speed, train
    with pytest.raises(argparse.ArgumentTypeError, match="kind:r"):
        speed.map_spec(spec)
    if spec in ("relu:0", "relu:x"):
        with pytest.raises(ValueError, match="kind:r"):
            train.maps_from(MODEL, spec)


@pytest.mark.parametrize("argv,says", [(["--t2r", "elu:5"], "elu takes no r"),
                                       (["--lengths", "8", "--size", "256"], "every length must exceed 257")])
def test_a_speed_row_is_refused_where_it_would_not_be_what_its_label_says(argv, says, capsys):
    """elu:5 would hold 64 features; TOVA 256 after 8 tokens would be a state that cannot exist."""
    from t2r import speed
    with pytest.raises(SystemExit):
        speed.main(argv)
    assert says in capsys.readouterr().err


def test_a_budget_that_holds_no_sequence_is_refused():
    from lab import experiments
    with pytest.raises(ValueError, match="holds not one sequence"):
        experiments.memory(MODEL, context=16, sizes=(4,), budget_gib=1e-308)


def test_scores_that_cannot_be_ranked_and_attention_that_overflowed_are_named():
    """float8 scores are refused as a dtype; NaN scores from a non-finite attention (float16's overflow,
    an inf gain) name the overflow, not the policy that only passed it on."""
    model = random_model(tiny_config())
    float8 = lambda rows: policies.tova(rows).to(torch.float8_e4m3fn)
    with pytest.raises(guards.PolicyError, match="float8 and complex cannot be ranked"):
        msrnn.run(model, tokens(1, 12), float8, 4)
    B, H, n = 1, model.config.n_kv_heads, 5
    rows = msrnn.Rows(attn=torch.full((B, H, model.config.n_heads // H, n), float("inf")), pos=torch.zeros(B, H, n, dtype=torch.long),
                      score=torch.zeros(B, H, n), keys=None, values=None, query=torch.zeros(B, H, 1, 4), prev=None, t=9, size=4, layer=2)
    with pytest.raises(FloatingPointError, match="overflowed its dtype .*float16 ends at 65504"):
        guards.check_scores(policies.tova, rows, torch.full((B, 1, n), float("nan")))


@pytest.mark.parametrize("view", ["run", "prefill", "masked_forward", "generate"])
@pytest.mark.parametrize("policy", [None, policies.window], ids=["full", "window"])
def test_float16_that_overflows_is_named_where_no_policy_reads_the_attention(view, policy):
    """A float16 model whose activations pass 65504 in the step (the views that read whole blocks may stay
    finite: their sums run in another order): the full cache and Window read no attention, so it is the
    logits that say so. No view returns NaN logits, or tokens argmax picked from them."""
    m = random_model(tiny_config(), dtype=torch.float16)
    m = dataclasses.replace(m, layers=[dataclasses.replace(L, wq=L.wq * 200, wk=L.wk * 200, w_down=L.w_down * 3000)
                                       for L in m.layers])
    size = None if policy is None else 4
    run = {"run": msrnn.run, "prefill": fast.prefill, "masked_forward": msrnn.masked_forward,
           "generate": lambda m, x, p, s: list(msrnn.generate(m, x, 3, p, s))}[view]
    try:
        out = run(m, tokens(1, 24), policy, size)
    except FloatingPointError as e:
        assert re.search("logits are not finite .*float16 ends at 65504", str(e))
    else:
        assert view not in ("run", "generate"), "the step overflows here: this model no longer tests anything"
        assert torch.isfinite(out[0]).all()


def test_ctrl_c_is_the_parents_a_pool_worker_ignores_it(monkeypatch):
    """A sweep's workers start with SIGINT ignored, so Ctrl-C while one still imports torch prints no
    worker traceback (the parent's KeyboardInterrupt ends the pool); the parent's handler is put back."""
    import signal
    monkeypatch.setattr(harness.threads, "cores", lambda: 2)
    # as Python starts from a terminal: a shell's background job (`cmd &`) starts with SIGINT ignored
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        seen = [got for _, got in harness.pool_map(signal.getsignal, (), [(signal.SIGINT,)] * 2, 2)]
        assert seen == [signal.SIG_IGN] * 2
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)


def test_memory_check_reads_the_processs_own_limit():
    """Under `ulimit -v` the check refuses what the process may not map, though the machine has it free."""
    code = ("import resource; from engine import guards\n"
            "used = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
            "resource.setrlimit(resource.RLIMIT_AS, (used + 2 ** 30, resource.RLIM_INFINITY))\n"
            "guards.check_memory(2 ** 29, 'half a GiB')\n"
            "try:\n    guards.check_memory(3 * 2 ** 30, 'three GiB')\nexcept MemoryError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=harness.ROOT, timeout=120)
    assert "three GiB needs 3.0 GiB, but only 1.0 GiB" in out.stdout, out.stderr


@pytest.mark.parametrize("case,says", [("another model", "made for another model"), ("used", "has read 6 token"),
                                       ("another size", "made for size=8"), ("another batch", "the state was made for 2")])
def test_masked_forward_takes_only_a_fresh_state_of_its_own(case, says):
    model, x = random_model(tiny_config()), tokens(1, 10)
    state = {"another model": lambda: msrnn.init_state(random_model(tiny_config(n_layers=3)), 1, 4),
             "used": lambda: (msrnn.feed(model, tokens(1, 6), s := msrnn.init_state(model, 1, 4), policies.tova), s)[1],
             "another size": lambda: msrnn.init_state(model, 1, 8),
             "another batch": lambda: msrnn.init_state(model, 2, 4)}[case]()
    with pytest.raises(ValueError, match=says):
        msrnn.masked_forward(model, x, policies.tova, 4, state=state)
    logits, _ = msrnn.masked_forward(model, x, policies.tova, 4, state=msrnn.init_state(model, 1, 4))
    assert_close(logits, msrnn.run(model, x, policies.tova, 4), EXACT)


# ---------------------------------------------------------------- issue 51: the smaller ones, and the raw

def test_sigterm_during_an_atomic_write_leaves_no_temporary_file(tmp_path):
    """A SIGTERM while a teacher-cache chunk was written left its temporary file (189 MB on the default
    model), which nothing removed. A forked child writes (torch already loaded: no second start-up)."""
    import os
    import signal
    import time
    ready, said = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as a program starts (a handler an earlier test left is not ours:
        try:  # atomic leaves a program's own handler alone, and the child slept its 60 s through it)
            with harness.atomic(tmp_path / "chunk.safetensors") as tmp:
                tmp.write_bytes(b"half")
                os.write(said, b"x")
                time.sleep(60)
        except SystemExit as e:
            code = e.code
        finally:
            os._exit(code)
    os.read(ready, 1)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_stops_the_teacher_cache_not_the_training(tmp_path, monkeypatch, capsys):
    from t2r import linear, train
    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(train, "save_file", full)
    chunks, got = tokens(2, 6), []
    teacher = train.Teacher(MODEL, chunks, tmp_path / "teacher")
    for c in (0, 1):
        teacher.feed(c, lambda i, q, k, v, o: got.append(o))
    streamed = []
    for c in (0, 1):
        train.Teacher(MODEL, chunks).feed(c, lambda i, q, k, v, o: streamed.append(o))
    assert all(torch.equal(a, b) for a, b in zip(got, streamed)) and len(got) == 2 * MODEL.config.n_layers
    assert capsys.readouterr().err.count("stops at chunk 0") == 1


def test_hedgehog_of_two_features_is_refused():
    """r = 2 gave a softmax over one feature: every feature a constant 1, rows labelled T2R measuring a
    running mean."""
    from t2r import linear, speed
    with pytest.raises(ValueError, match="at least 4"):
        linear.FeatureMaps(MODEL.config, 2, "hedgehog")
    with pytest.raises(Exception, match="even and >= 4 for hedgehog"):
        speed.map_spec("hedgehog:2")


def test_a_spec_binds_a_word_as_a_word_and_no_infinite_number(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text("def how(rows, how='sum'):\n    return rows.pos[:, :1].double()\n\n"
                    "def top(rows, k=None):\n    return rows.pos[:, :1].double()\n")
    assert specs.named(f"{mine}:how:how=1e3").fn.keywords == {"how": "1e3"}  # was the number 1000.0
    assert specs.named(f"{mine}:top:k=3").fn.keywords == {"k": 3}
    for bad in ("-inf", "nan"):
        with pytest.raises(ValueError, match=f"k must be a finite number, got '{bad}'"):
            specs.named(f"{mine}:top:k={bad}")


def test_a_policy_sees_msrnn_rows_and_may_pickle_them():
    """type(rows) was engine.guards' copying subclass, and pickling it failed ("Can't pickle
    engine.guards.Rows")."""
    import pickle
    seen = []

    def keeps(rows):
        again = pickle.loads(pickle.dumps(rows))
        seen.append((type(rows) is msrnn.Rows, type(again) is msrnn.Rows, torch.equal(again.keys, rows.keys)))
        again.keys.mul_(-1)  # a copy's: the state is not touched
        return policies.tova(rows)
    assert_close(msrnn.run(MODEL, tokens(1, 10), keeps, 4), msrnn.run(MODEL, tokens(1, 10), policies.tova, 4), EXACT)
    assert seen and all(all(s) for s in seen)


def test_t2r_speed_says_its_threads_and_names_a_long_run_by_a_hash(tmp_path, monkeypatch, capsys):
    """It timed 1 thread whatever OMP_NUM_THREADS said, without a word, and after measuring every cell
    failed to save on "File name too long"."""
    from t2r import speed
    import load_weights
    monkeypatch.setattr(harness, "RESULTS", tmp_path)
    monkeypatch.setattr(load_weights, "load_model", lambda *a: MODEL)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    before = torch.get_num_threads()
    try:
        speed.main(["--size", "8", "--steps", "1", "--lengths", *map(str, range(66, 146))])
    finally:
        torch.set_num_threads(before)
    out = capsys.readouterr().out
    assert "timing 1 torch thread(s) (--threads); OMP_NUM_THREADS=2 is not read" in out
    saved = [p.name for p in (tmp_path / "runs").iterdir()]
    assert len(saved) >= 2 and all(len(name) < 100 for name in saved), saved


@pytest.mark.parametrize("module", ["t2r.length", "t2r.speed"])
def test_the_modules_name_an_error_in_one_line(module, tmp_path, monkeypatch):
    """`python -m t2r.length` and `t2r.speed` had no wrapper: a traceback (after an hour of training, for
    a results folder it could not write); --debug shows it."""
    import runpy
    (tmp_path / "results").write_text("a file where the folder would be")
    monkeypatch.setattr(harness, "RESULTS", tmp_path / "results" / "x")  # as MSRNN_RESULTS would make it
    monkeypatch.setattr(sys, "argv", [module])
    with pytest.raises(SystemExit, match=rf"^error: cannot write the results to {tmp_path / 'results' / 'x'}: Not a directory$"):
        runpy.run_module(module, run_name="__main__")
    monkeypatch.setattr(sys, "argv", [module, "--debug"])
    with pytest.raises(OSError):
        runpy.run_module(module, run_name="__main__")


# ---------------------------------------------------------------- hostile inputs, round 5

def test_generate_refuses_a_size_that_is_not_its_states():
    """msrnn.generate(state=a size-4 state, size=8) ran at size 4 without a word (msrnn.run refuses it)."""
    with pytest.raises(ValueError, match="size=8, but the state given was made for size=4"):
        next(msrnn.generate(MODEL, tokens(1, 6), 2, policies.tova, size=8, state=msrnn.init_state(MODEL, 1, 4)))
    state = msrnn.init_state(MODEL, 1, 4)  # its own size, or none: it carries on
    assert len(list(msrnn.generate(MODEL, tokens(1, 6), 2, policies.tova, size=4, state=state))) == 2


def test_a_spec_sets_only_parameters_and_fills_its_label_or_names_why_not(tmp_path):
    """'star:8' bound 8 to *extra as a keyword, which failed at the first drop; a @label naming no
    parameter raised a bare KeyError."""
    mine = tmp_path / "mine.py"
    mine.write_text("from policies import label\n\ndef star(rows, *extra, **more):\n    return rows.pos[:, :1].double()\n\n"
                    "@label('Mine {kk}')\ndef mislabelled(rows, k=2):\n    return rows.pos[:, :1].double()\n")
    with pytest.raises(ValueError, match=r"star takes 0 parameter\(s\) \(none\), got 1"):
        specs.named(f"{mine}:star:8")
    assert specs.named(f"{mine}:star").label == "star"
    with pytest.raises(ValueError, match=r"its label 'Mine \{kk\}' cannot be filled from its parameters \(k\): KeyError 'kk'"):
        specs.named(f"{mine}:mislabelled")


def test_memory_refuses_a_size_that_drops_nothing():
    """TOVA 64 after 16 tokens was counted as 65 rows, four times the full cache, with a smaller batch."""
    from lab import experiments
    with pytest.raises(ValueError, match="TOVA 64 drops nothing after 16 tokens"):
        experiments.memory(MODEL, context=16, sizes=(4, 64), budget_gib=1.0)


def test_more_threads_than_cores_are_refused_before_any_work(capsys):
    """demo.py t2r --threads 100000 ended in a segmentation fault (libgomp cannot create them)."""
    import demo
    from engine import threads
    from t2r import speed
    for main, argv in ((demo.main, ["t2r", "--threads", "100000"]), (speed.main, ["--threads", "100000"])):
        with pytest.raises(SystemExit):
            main(argv)
        assert f"must be at most {threads.cores()}, got 100000" in capsys.readouterr().err


def test_t2r_refuses_a_size_its_window_baseline_cannot_take_before_training():
    """--sizes 4 trained every map, then failed at the Window+4 rows: sink refuses 4 sinks at size 4."""
    from t2r import compare
    with pytest.raises(ValueError, match=r"sizes \[4, 8\]: Window\+4, a baseline at every size, needs a size above"):
        compare.experiment(MODEL, None, sizes=(4, 8))  # before the tokenizer is used: no training text read


@pytest.mark.parametrize("damage, says", [("layers", "names a layer twice: '0,0,1'"),
                                          ("dtype", "tensor 'bq' is torch.bool, not a float")])
def test_a_maps_file_with_a_layer_twice_or_tensors_that_are_not_floats_is_refused(tmp_path, damage, says):
    """Layers '0,0,1' loaded and counted layer 0's state twice; a bool or integer tensor was cast to floats."""
    from safetensors.torch import save_file
    from t2r import linear, train
    maps = linear.FeatureMaps(MODEL.config, 8, "relu", dtype=MODEL.dtype)
    train.save(maps, tmp_path / "maps.safetensors")
    tensors = {n: p.detach().contiguous() for n, p in maps.named_parameters()}
    meta = {"kind": "relu", "r": "8", "window": "0", "layers": "0,1"}
    if damage == "layers":
        meta["layers"] = "0,0,1"
    else:
        tensors["bq"] = torch.ones_like(tensors["bq"], dtype=torch.bool)
    save_file(tensors, str(tmp_path / "bad.safetensors"), metadata=meta)
    assert train.load(tmp_path / "maps.safetensors", MODEL).layers == [0, 1]
    with pytest.raises(ValueError, match=re.escape(says)):
        train.load(tmp_path / "bad.safetensors", MODEL)

"""Nothing stale, nothing half-done (issue 32): a cached number belongs to the code that made it, a
step that fails leaves the state as it was, and the last silent inputs get named."""
import json

import pytest
import torch

from lab import experiments
from lab import harness
from lab import specs
from conftest import random_model, tiny_config, tokens

MODEL = random_model(tiny_config())  # vocabulary 61


@pytest.fixture
def results_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "RESULTS", tmp_path / "results")
    # the sweep's chunks, without a tokenizer or the books: 2 chunks of 24 tokens of the tiny vocabulary
    monkeypatch.setattr(experiments, "book_chunks", lambda tok, n, length: tokens(n, length, seed=7))
    return tmp_path


POLICY_FILE = '''
import helper
LATEST = {latest}


def newest(rows):
    return rows.pos[:, :1].double() * helper.SIGN + LATEST * rows.keys[:, :1, :, 0]
'''


def test_editing_a_helper_of_a_policy_file_changes_the_number(results_in_tmp, monkeypatch):
    """The key once hashed only the function's own lines: a constant of its file or a helper it
    imports from its folder could change, and the sweep served the old number (215.68 for 161.59)."""
    folder = results_in_tmp
    monkeypatch.syspath_prepend(str(folder))  # where `import helper` finds it
    (folder / "mine.py").write_text(POLICY_FILE.format(latest=0.0))
    (folder / "helper.py").write_text("SIGN = 1.0\n")
    monkeypatch.delitem(__import__("sys").modules, "helper", raising=False)
    sweep = lambda: experiments.sweep(MODEL, None, sizes=(4,), names=(f"{folder}/mine.py:newest",), n_chunks=2,
                                      chunk=24)["ppl"]["newest"][4]["ppl"]
    first = sweep()
    assert sweep() == first  # nothing changed: served from the cache
    (folder / "helper.py").write_text("SIGN = -1.0\n")  # keep the oldest instead: another policy
    monkeypatch.delitem(__import__("sys").modules, "helper")
    second = sweep()
    plain = experiments.measure(MODEL, tokens(2, 24, seed=7), f"{folder}/mine.py:newest", 4, 4)["ppl"]
    assert second != first and second == pytest.approx(plain, rel=1e-12), (first, second, plain)
    (folder / "mine.py").write_text(POLICY_FILE.format(latest=100.0))  # a constant of the file, not the function
    assert sweep() != second


def test_the_measurement_code_is_in_the_key(monkeypatch):
    """The key covered llama.py, msrnn.py and fast.py only: experiments.next_token_nll could change
    under a cached number."""
    files = {f.relative_to(harness.ROOT).as_posix() for f in harness.sources(harness.ROOT / "lab" / "experiments.py")}
    assert {"lab/experiments.py", "llama.py", "msrnn.py", "engine/fast.py", "engine/guards.py", "engine/oneshot.py",
            "lab/specs.py", "policies.py", "lab/zoo.py", "lab/harness.py"} <= files
    ids = torch.zeros(1, 8, dtype=torch.long)
    key = experiments.cache_dir("sweep", MODEL, ids)
    real = harness.fingerprint
    monkeypatch.setattr(harness, "fingerprint", lambda *parts: real(*[
        p.read_bytes() + b"#" if isinstance(p, harness.pathlib.Path) and p.name == "experiments.py" else p for p in parts]))
    assert experiments.cache_dir("sweep", MODEL, ids) != key


@pytest.mark.parametrize("cell", ["[]", "{}", "0", '{"ppl": "abc", "per_chunk": [1.0], "seconds": 1}',
                                  '{"ppl": NaN, "per_chunk": [1.0], "seconds": 1}', '{"ppl": 2.0, "seconds": 1}'])
def test_a_cache_cell_of_the_wrong_shape_is_measured_again(results_in_tmp, cell, capsys):
    """Valid JSON of the wrong shape made every later run fail with a TypeError or KeyError: 'seconds'."""
    run = lambda: experiments.sweep(MODEL, None, sizes=(4,), names=("tova",), n_chunks=2, chunk=24)["ppl"]["TOVA"][4]
    good = run()
    file = next(results_in_tmp.glob("results/sweep/*/tova-*-4.json"))
    file.write_text(cell)
    again = run()
    assert again["ppl"] == pytest.approx(good["ppl"], rel=1e-12) and json.loads(file.read_text())["ppl"] == again["ppl"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"ignoring the cached result {file}" in err, err

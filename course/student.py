"""The course's adapter: a pytest plugin that points the project's own tests at a student's files.

    MSRNN_STUDENT=course/work MSRNN_MODULES=llama python -m pytest -p course.student test_equivalence.py

Loaded with -p, it runs before any conftest.py or test file is imported, and puts the student's
llama.py, msrnn.py, policies.py or t2r/linear.py into sys.modules under the repository's names, so
that every `import llama` (the tests', conftest's, the engine's) gets the student's module. Only the
modules named in MSRNN_MODULES are replaced; the rest stay the repository's. With MSRNN_REPORT=<file>
it writes what happened to each test (outcome, exception, message, where in the student's files it
was raised) as JSON lines, which course/grade.py turns into points and hints. After every test it
checks that the tests' comparison is still the one it found before the student's files were loaded,
and still tells a known mismatch from a match; a test after which it is not fails, by name.
"""
import importlib.util
import json
import os
import pathlib
import sys
import traceback

import pytest
import torch
import torch.testing
import torch.testing._comparison as comparison  # what assert_close is made of

FILES = {"llama": "llama.py", "msrnn": "msrnn.py", "policies": "policies.py", "t2r.linear": "t2r/linear.py"}
ORDER = list(FILES)  # each may import the ones before it
FOLDER = pathlib.Path(os.environ["MSRNN_STUDENT"]).resolve() if os.environ.get("MSRNN_STUDENT") else None
ROOT = pathlib.Path(__file__).resolve().parents[1]  # the repository
REPORT = os.environ.get("MSRNN_REPORT")


def record(**fields):
    if REPORT:
        with open(REPORT, "a") as f:
            f.write(json.dumps(fields) + "\n")


def substitute(folder: pathlib.Path, names):
    """Load folder's copy of each named module under the repository's name, in dependency order."""
    for name in sorted(names, key=ORDER.index):
        path = folder / FILES[name]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        if "." in name:  # t2r.linear: the real package t2r, with the student's linear in it
            package, _, leaf = name.rpartition(".")
            setattr(importlib.import_module(package), leaf, module)
        spec.loader.exec_module(module)


# ---------------------------------------------------------------- the tests' comparison, kept from the graded code

# the module assert_close is made of, and its classes (Pair, TensorLikePair, ...)
OWNERS = [comparison] + [c for c in vars(comparison).values() if isinstance(c, type) and c.__module__ == comparison.__name__]


def parts_of_the_comparison():
    """{(owner, name): what it held} for torch.testing.assert_close and everything in the module it is
    made of (its functions, and its classes' methods), with each function's code and defaults."""
    held = {(torch.testing, "assert_close"): torch.testing.assert_close}
    held |= {(owner, name): value for owner in OWNERS for name, value in list(vars(owner).items())}
    for value in list(held.values()):
        function = getattr(value, "__func__", value)  # a staticmethod's or classmethod's function
        if hasattr(function, "__code__"):
            held |= {(function, a): getattr(function, a) for a in ("__code__", "__defaults__", "__kwdefaults__")}
    return held


def compares() -> bool:
    """Whether torch.testing.assert_close still tells a mismatch from a match, by value: a guard that
    holds whatever was changed to make it fail silently (torch.isclose, a tensor method, ...)."""
    a = torch.linspace(-3, 3, 60, dtype=torch.float64).view(2, 30)
    b = a.clone()
    b[1, 7] += 0.5
    try:
        torch.testing.assert_close(a, a.clone(), rtol=0, atol=1e-10)
    except BaseException:  # noqa: BLE001  (whatever the changed comparison raises, it is not the comparison)
        return False
    try:
        torch.testing.assert_close(b, a, rtol=0, atol=1e-10)
    except AssertionError as e:
        return "Mismatched elements: 1 / 60" in str(e) and "at index (1, 7)" in str(e)
    except BaseException:  # noqa: BLE001
        return False
    return False


def changed_comparison():
    """What of the comparison the code run since the last call changed, each put back: a list of names,
    empty when nothing was."""
    def now(owner, name):
        return vars(owner).get(name, HELD) if owner in OWNERS else getattr(owner, name, HELD)
    changed = [(owner, name) for (owner, name), value in HELD.items() if now(owner, name) is not value]
    changed += [(owner, name) for owner in OWNERS for name in vars(owner).keys() - {n for o, n in HELD if o is owner}]
    for owner, name in changed:  # a name replaced or deleted is put back, a name added (an override) deleted
        if (owner, name) in HELD:
            setattr(owner, name, HELD[owner, name])
        else:
            delattr(owner, name)
    said = [f"{getattr(owner, '__name__', '?')}.{name}" for owner, name in changed]
    return said + ([] if compares() else ["its verdict on a known mismatch"])


HELD = parts_of_the_comparison()  # taken before any student file is loaded
if not compares():
    raise RuntimeError("torch.testing.assert_close does not tell a mismatch from a match before any graded code "
                       "ran: the grader cannot grade with this torch")


def where(tb, folder):
    """The innermost frame of the traceback that is in the student's folder: (file, line, function). A file
    linked into the folder is the student's by its path there; a clone of the repository kept inside the
    folder is the repository's."""
    def mine(path):  # path as the student's folder spells it, or None
        for p in (pathlib.Path(os.path.abspath(path)), pathlib.Path(path).resolve()):
            if p.is_relative_to(folder) and (folder.is_relative_to(ROOT) or not p.resolve().is_relative_to(ROOT)):
                return p.relative_to(folder)
        return None
    frames = [(f, rel) for f in traceback.extract_tb(tb) if folder and (rel := mine(f.filename)) is not None]
    return (str(frames[-1][1]), frames[-1][0].lineno, frames[-1][0].name) if frames else None


if FOLDER is not None:
    modules = [m for m in os.environ.get("MSRNN_MODULES", ",".join(FILES)).split(",") if m]
    for package in ("data", "engine", "lab", "t2r"):  # the repository's folders, namespace packages, which a module
        importlib.import_module(package)  # of their name anywhere on sys.path would win over: loaded first, they stay
    sys.path.append(str(FOLDER))  # a helper module written beside the four files imports as it does in the folder;
    # last on the path, so it never shadows the repository's modules or the standard library
    try:
        substitute(FOLDER, modules)
    except BaseException as e:  # a syntax error, an import error, an exception at import time: named, then re-raised
        record(load_error=f"{type(e).__name__}: {e}", where=where(e.__traceback__, FOLDER),
               module=getattr(e, "name", None) if isinstance(e, ImportError) else None,  # (e.name: a module's name)
               file=getattr(e, "filename", None), line=getattr(e, "lineno", None))
        raise


def innermost(e):
    """The exception at the bottom of e's chain: a policy's own error, which engine/guards.py re-raises
    as a PolicyError that names it, is the student's NotImplementedError."""
    while (inner := getattr(e, "original", None) or e.__cause__ or e.__context__) is not None:
        e = inner
    return e


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    raised = call.excinfo  # before pytest turns a unittest.SkipTest into its own skip, whose traceback is pytest's
    outcome = yield
    rep = outcome.get_result()
    changed = changed_comparison() if rep.when == "call" else []
    if changed:  # a test whose comparison was changed compared nothing: checked by value after every test
        rep.outcome, rep.longrepr = "failed", f"the tests' comparison was changed while the tests ran: {changed}"
        record(test=item.nodeid, when="call", outcome="failed", error="AssertionError", cause="AssertionError",
               message=f"your code changed the tests' comparison (torch.testing.assert_close, or what it calls: "
                       f"{', '.join(changed[:3])}): nothing it compared counts (leave it alone)", where=None, printed="")
        return
    spot = where(raised.tb, FOLDER) if rep.skipped and raised is not None else None
    graded = {FILES[m] for m in os.environ.get("MSRNN_MODULES", ",".join(FILES)).split(",") if m}
    if spot is not None and (spot[0] in graded or FOLDER != ROOT):  # pytest.skip or xfail in the graded file or any
        # file of the student's folder (a helper named like a repository file too): a placeholder, not a pass; under
        # --reference the folder is the repository, whose own skips (conftest's without the default model) are skips
        rep.outcome, rep.longrepr = "failed", "the student's code skipped the test"
        record(test=item.nodeid, when=rep.when, outcome="failed", error="Skipped", cause="Skipped", where=spot,
               message=f"your code skipped this test ({raised.value}): a skipped test is not passed; write "
                       f"{spot[2]} in {spot[0]}", printed="")
        return
    if rep.when == "call" or rep.outcome != "passed":
        e = call.excinfo.value if call.excinfo else None
        inner = innermost(e) if e is not None else None
        record(test=item.nodeid, when=rep.when, outcome=rep.outcome,
               error=type(e).__name__ if e is not None else None,
               cause=type(inner).__name__ if inner is not None else None,
               message=str(e)[:2000] if e is not None else None,
               where=(where(inner.__traceback__, FOLDER) or where(call.excinfo.tb, FOLDER)) if e is not None else None,
               printed=rep.capstdout.strip()[-500:] if rep.when == "call" else "")


def pytest_collectreport(report):
    if report.failed:  # a test file that does not import: say why, and whether the student's file is where it broke
        text = str(report.longrepr).strip().splitlines()
        mine = FOLDER is not None and any(str(FOLDER) in line for line in text)
        error = next((line[2:] for line in reversed(text) if line.startswith("E ")), text[-1] if text else "")
        # a name the repository's code reads from the student's module (MultiState renamed) breaks in the repository's lines
        ours = [m for m in os.environ.get("MSRNN_MODULES", ",".join(FILES)).split(",") if m]
        mine = mine or FOLDER is not None and any(f"module '{m}' has no attribute" in error or f"from '{m}'" in error
                                                  for m in ours)
        record(collect_error=report.nodeid, message=error.strip(), mine=mine)

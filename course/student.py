"""The course's adapter: a pytest plugin that points the project's own tests at a student's files.

    MSRNN_STUDENT=course/work MSRNN_MODULES=llama python -m pytest -p course.student test_equivalence.py

Loaded with -p, it runs before any conftest.py or test file is imported, and puts the student's
llama.py, msrnn.py, policies.py or t2r/linear.py into sys.modules under the repository's names, so
that every `import llama` (the tests', conftest's, the engine's) gets the student's module. Only the
modules named in MSRNN_MODULES are replaced; the rest stay the repository's. With MSRNN_REPORT=<file>
it writes what happened to each test (outcome, exception, message, where in the student's files it
was raised) as JSON lines, which course/grade.py turns into points and hints.
"""
import importlib.util
import json
import os
import pathlib
import sys
import traceback

import pytest
import torch.testing

COMPARE = torch.testing.assert_close  # the tests' comparison, taken before any student file is loaded

FILES = {"llama": "llama.py", "msrnn": "msrnn.py", "policies": "policies.py", "t2r.linear": "t2r/linear.py"}
ORDER = list(FILES)  # each may import the ones before it
FOLDER = pathlib.Path(os.environ["MSRNN_STUDENT"]).resolve() if os.environ.get("MSRNN_STUDENT") else None
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


def where(tb, folder):
    """The innermost frame of the traceback that is in the student's folder: (file, line, function)."""
    frames = [f for f in traceback.extract_tb(tb) if folder and pathlib.Path(f.filename).resolve().is_relative_to(folder)]
    return (str(pathlib.Path(frames[-1].filename).relative_to(folder)), frames[-1].lineno, frames[-1].name) if frames else None


if FOLDER is not None:
    modules = [m for m in os.environ.get("MSRNN_MODULES", ",".join(FILES)).split(",") if m]
    try:
        substitute(FOLDER, modules)
    except BaseException as e:  # a syntax error, an import error, an exception at import time: named, then re-raised
        record(load_error=f"{type(e).__name__}: {e}", where=where(e.__traceback__, FOLDER),
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
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and torch.testing.assert_close is not COMPARE:  # a test that compared nothing passed nothing
        rep.outcome, rep.longrepr = "failed", "torch.testing.assert_close was replaced while the tests ran"
        torch.testing.assert_close = COMPARE
        record(test=item.nodeid, when="call", outcome="failed", error="AssertionError", cause="AssertionError",
               message="your code replaced torch.testing.assert_close, the tests' comparison: nothing it "
                       "compared counts (put it back, or leave it alone)", where=None, printed="")
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
        record(collect_error=report.nodeid, message=error.strip(), mine=mine)

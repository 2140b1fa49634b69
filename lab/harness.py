"""The plumbing of the experiments, kept out of the files that teach: where results go and what they
record about the run that made them, a transcript of what a run printed, one way to time code, and
a pool of worker processes. Nothing here changes a number.
"""
import argparse
import ast
import concurrent.futures
import contextlib
import contextvars
import functools
import gc
import hashlib
import inspect
import io
import json
import math
import multiprocessing
import os
import pathlib
import pickle
import posixpath
import re
import shlex
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import torch

from engine import guards, threads
from engine.guards import digest, sealed  # noqa: F401  (a results file's seal: `save` writes it, readers check it)

ROOT = pathlib.Path(__file__).resolve().parent.parent  # the repository
# next to the code, wherever it is run from; MSRNN_RESULTS elsewhere (the course's runs go to course/work/)
try:
    RESULTS = pathlib.Path(os.environ.get("MSRNN_RESULTS", "").strip() or ROOT / "results").expanduser().resolve()
except (RuntimeError, OSError) as e:  # a link that leads back to itself: every command would end in a traceback
    raise SystemExit(f"error: MSRNN_RESULTS={os.environ.get('MSRNN_RESULTS')!r}: {e}; set it to a folder") from None

PROJECT = ("llama.py", "msrnn.py", "policies.py", "load_weights.py", "demo.py", "test_equivalence.py", "conftest.py",
           "engine", "lab", "t2r", "data", "course", "tests")  # the repository's own code: a policy file beside it is the user's
COURSE_OWN = ("grade.py", "student.py", "skeleton", "__init__.py")  # course/'s own; course/work/ is the student's


def ours(path: pathlib.Path) -> bool:
    """A resolved path of the repository's own code (PROJECT), not of the user's (course/work/ is a student's)."""
    parts = path.relative_to(ROOT).parts if path.is_relative_to(ROOT) else ()
    return parts[:1] != () and parts[0] in PROJECT and (parts[0] != "course" or parts[1:2] == () or parts[1] in COURSE_OWN)


@contextlib.contextmanager
def atomic(path: pathlib.Path):
    """Write a whole file or nothing: `with atomic(path) as tmp:` writes tmp, which becomes `path` only
    when the block ends without an error, so an interrupted run never leaves half a file to be read back.
    The temporary name is unique, so two processes writing the same file do not mix their bytes."""
    if os.path.islink(path) and os.path.isfile(path):  # a link to a file: its file is written, as open() would
        path = pathlib.Path(os.path.realpath(path))  # (replacing the link left the file it named as it was)
    was = os.stat(path) if os.path.isfile(path) else None
    _replaceable(path, was)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=f".tmp{path.suffix[:20]}", dir=path.parent)  # a
    # name of 255 bytes is the file system's longest: the temporary one's is cut (40 characters are 160 bytes at most)
    os.close(fd)
    try:
        with _terminate_as_exit():
            yield pathlib.Path(tmp)
            os.chmod(tmp, _new_mode() if was is None else stat.S_IMODE(was.st_mode) & 0o777)  # a new file's mode, or
            os.replace(tmp, path)  # the old one's (never its setuid bit), not mkstemp's owner-only (after the block:
            # a writer such as safetensors replaces the file, and its mode with it)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _new_mode() -> int:
    """The mode open() gives a new file: 0o666 less the umask (Linux says it; elsewhere it is read by setting it and
    setting it back, a moment in which another thread's new file would take 022)."""
    try:
        mask = int(re.search(r"^Umask:\s*([0-7]+)", pathlib.Path("/proc/self/status").read_text(), re.M).group(1), 8)
    except (OSError, AttributeError):
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def _replaceable(path, was):
    """Refuse what open() would refuse or what a new file in its place would leave wrong: a write-protected file, or
    one of several names (hard links: the others would keep the old bytes)."""
    if was and was.st_nlink > 1:
        raise ValueError(f"{path} has {was.st_nlink} names (hard links); writing it whole would leave the others as "
                         "they were: write another path")
    if was and not os.access(path, os.W_OK):
        raise ValueError(f"{path} is write-protected (mode {stat.S_IMODE(was.st_mode):o}): make it writable, or write "
                         "another path")


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _terminate_as_exit():
    """SIGTERM as SystemExit while a temporary file exists: its default action ends the process at once,
    and would leave the file (a teacher-cache chunk is 189 MB); as an exception, `atomic`'s finally
    removes it. Only where SIGTERM has its default action, and only in the main thread (where Python
    handles signals); a handler of the program's own is left alone."""
    main = threading.current_thread() is threading.main_thread()
    ours = main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    if ours:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        yield
    finally:
        if ours:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _there(path) -> bool:
    """Whether path names something, a dangling link included; a name the file system refuses (too long) raises."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def check_file_path(path, what: str) -> pathlib.Path:
    """A path `atomic` can write, checked before the work that ends in writing it: not blank, not a folder, a device or
    a FIFO, a name the file system takes, under a folder that takes files (a temporary file made and removed in the
    nearest one that exists: the folders `atomic` will make are not made here)."""
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(text, str) or not text.strip() or "\0" in text or os.path.isdir(text) \
            or text.endswith(("/", os.sep)) or os.path.basename(text) in (".", ".."):  # 'maps/' named a folder; pathlib drops the slash and wrote a file 'maps'
        raise ValueError(f"{what} is a file's path; got {path!r}" + (" (a folder)" if text and os.path.isdir(text) else ""))
    if os.path.exists(text) and not os.path.isfile(text):  # atomic would replace /dev/null or a FIFO with a file
        raise ValueError(f"{what} {text} is not a file (a device, a FIFO or a socket): name a file to write")
    if os.path.isfile(text):  # what atomic would refuse after the work
        try:
            _replaceable(text, os.stat(text))
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None
    if os.path.islink(text) and not os.path.exists(text):  # atomic would replace the link with a file
        raise ValueError(f"{what} {text} is a link to nothing ({os.readlink(text)}): name a file to write")
    path, folder = pathlib.Path(text), pathlib.Path(text).parent
    try:
        while not _there(folder) and folder != folder.parent:  # the folders atomic will make, not made here: a refused
            folder = folder.parent  # write leaves none (a dangling link is there, and is no folder)
        if not folder.is_dir():
            raise NotADirectoryError(f"{folder} is not a folder")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=f".tmp{path.suffix[:20]}", dir=folder)
        os.close(fd)
        os.unlink(tmp)
        if len(os.fsencode(path.name)) > 255:  # the temporary name is cut; the file's own must be one the system takes
            raise OSError(36, "File name too long")
    except OSError as e:
        raise ValueError(f"{what} {path} cannot be written there ({e.strerror or e})") from None
    return path


def atomic_write(path: pathlib.Path, text: str):
    with atomic(path) as tmp:
        tmp.write_text(text)


FRESH = contextvars.ContextVar("fresh", default=False)  # demo.py --fresh: every cached result is measured again
# (and written anew); one per thread, as a script's two commands in two threads each keep their own


def write_cached(path: pathlib.Path, value):
    """Cache a measured result at `path`, sealed with its place (read_cached serves it only there, as written)."""
    path = pathlib.Path(path)
    try:
        text = json.dumps(value, sort_keys=True)  # keys of two types (1 and "1") cannot be sorted: one would be lost
        value = json.loads(text)  # as it will read back (tuples as lists, keys as strings)
    except (TypeError, ValueError, RecursionError) as e:  # a tensor, a tuple as a key: a measure's code gives numbers
        raise TypeError(f"a cached result at {path} must be JSON (numbers, strings, lists, dicts with keys of one "
                        f"type): {type(e).__name__}: {e}") from None
    atomic_write(path, json.dumps({"value": value, "seal": _cell_seal(path, value)}))


def _cell_seal(path: pathlib.Path, value) -> str:
    # the folder (the model's fingerprint) and the file (the cell's key) too: a cell copied to another's place is not its
    return hashlib.sha256(json.dumps([path.parent.name, path.name, value], sort_keys=True).encode()).hexdigest()[:16]


def read_cached(path: pathlib.Path, shape=None, fresh=None):
    """A cached result as write_cached wrote it, or None when it is missing, unreadable, not sealed as written
    there, or not of `shape` (then it is measured again: a cell edited by hand, moved, or damaged by a crash or an
    older version is neither served nor blocks every later run), or when FRESH. shape: a type (float means any finite number), (type, low) for one of at
    least low (a perplexity below 1 is no run's), (type, low, high) for one from low to high, or a dict {key: type} of what it must hold
    ({"key?": type}: where it holds it). fresh=False
    reads what this run has just measured, even under --fresh."""
    if FRESH.get() if fresh is None else fresh:
        return None
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as e:
        print(f"[msrnn] ignoring the unreadable cached result {path} ({e}); measuring it again", file=sys.stderr)
        return None
    if not (isinstance(data, dict) and data.keys() == {"value", "seal"} and data["seal"] == _cell_seal(path, data["value"])):
        print(f"[msrnn] ignoring the cached result {path}: not as a run wrote it there (changed by hand, moved, or an "
              "older version's); measuring it again", file=sys.stderr)
        return None
    data = data["value"]
    wrong = _not_of_shape(data, shape)
    if wrong:
        print(f"[msrnn] ignoring the cached result {path}: {wrong}; measuring it again", file=sys.stderr)
        return None
    return data


def _not_of_shape(data, shape) -> str:
    """What is wrong with data as `shape` (see read_cached), or ''."""
    if shape is None:
        return ""
    if isinstance(shape, dict):
        if not isinstance(data, dict):
            return f"expected an object with {', '.join(shape)}, got {type(data).__name__}"
        missing = [k for k in shape if not k.endswith("?") and k not in data]  # "key?": checked where it is there
        if missing:
            return f"it has no {', '.join(map(repr, missing))}"
        return next((f"{k!r}: {w}" for k, t in shape.items() if k.rstrip("?") in data
                     and (w := _not_of_shape(data[k.rstrip("?")], t))), "")
    if isinstance(shape, tuple):  # (type, low) or (type, low, high)
        wrong = _not_of_shape(data, shape[0])
        high = shape[2] if len(shape) > 2 else math.inf
        return wrong or ("" if shape[1] <= data <= high else f"expected {shape[1]} to {high}, got {data!r:.40}")
    if shape is float:  # a number, not a bool, not NaN or infinite (json reads NaN)
        ok = isinstance(data, (int, float)) and not isinstance(data, bool) and math.isfinite(data)
    elif shape is int:
        ok = isinstance(data, int) and not isinstance(data, bool)
    elif isinstance(shape, re.Pattern):  # a string of this form
        ok = isinstance(data, str) and shape.fullmatch(data)
    elif isinstance(shape, list):  # [float]: a non-empty list of them
        ok = isinstance(data, list) and data and not any(_not_of_shape(x, shape[0]) for x in data)
    else:
        ok = isinstance(data, shape)
    want = shape.pattern if isinstance(shape, re.Pattern) else shape if isinstance(shape, list) else shape.__name__
    return "" if ok else f"expected {want}, got {data!r:.40}"


def code_version() -> str:
    """The git commit, with '+changes' when a tracked .py file differs from it; 'unknown' outside git."""
    try:
        git = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        commit = git("rev-parse", "--short", "HEAD")
        return commit + ("+changes" if git("status", "--porcelain", "--", "*.py") else "") if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def spelled(command: str) -> str:
    """A command as a user types it: `python -m t2r.speed ...` for the `python /path/to/t2r/speed.py ...`
    that sys.argv holds under -m (a results file must not name this machine's folders), `python demo.py`
    for `python ./demo.py`. The path may be another checkout's (a folder with a space in it too): its tail
    that names a file of this repository is what counts."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unbalanced quote: not a command this module wrote
        return command
    script = pathlib.Path(words[1]) if len(words) > 1 else None
    if script is not None and script.suffix == ".py":
        script = script if script.is_absolute() else pathlib.Path.cwd() / script
        tails = [pathlib.Path(*script.resolve().parts[i:]) for i in range(1, len(script.resolve().parts))]
        rel = next((t for t in tails if (ROOT / t).is_file()), None)
        rel = rel and rel.with_suffix("")
        said = None if rel is None else [str(rel) + ".py"] if len(rel.parts) == 1 else ["-m", ".".join(rel.parts)]
        if said is not None and said != words[1:2]:
            return shlex.join([words[0], *said, *words[2:]])
    return command  # as it was written


def run_name(name: str, changed: list) -> str:
    """`name` for the published settings (no option `changed` from its default); otherwise runs/ and a
    name that says what differs, (option, value) pairs, so a run with other settings never overwrites
    the results the pages show. A hash stands in for what is not plain or too long to be a file name, or names a
    file: it hashes a file by its absolute path (two folders' `pol.py:fn` or `--model tiny` are two runs, not one)."""
    if not changed:
        return name
    changed = [(k, in_order(v)) for k, v in changed]  # --sizes 16 8 and --sizes 8 16 measure the same
    exact = [(k, [_where(x) for x in v] if isinstance(v, list) else _where(v)) for k, v in changed]
    text = "-".join(f"{k}_{'_'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in changed)
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)
    plain = all(not isinstance(v, list) and re.fullmatch(r"[A-Za-z0-9.=]+", str(v)) for _, v in changed)
    if not plain or len(slug) > 60 or exact != changed:  # a hash of the exact values: "a b" and "a_b" are two runs
        slug = f"{slug[:50]}-{hashlib.sha1(repr(exact).encode()).hexdigest()[:8]}"
    return f"runs/{name}-{slug}"


def _where(value):
    """A value as a run's name hashes it: a policy file's spec ('pol.py:fn') by its file's absolute path, and so a
    file or folder named by a relative path ('--model tiny', '--text book.txt'): two folders' are two runs."""
    if not isinstance(value, (str, os.PathLike)):
        return value
    value = os.fspath(value)
    if ".py:" in value:
        path, _, rest = value.partition(".py:")
        return f"{os.path.abspath(os.path.expanduser(path + '.py'))}:{rest}"
    return os.path.abspath(os.path.expanduser(value)) if os.path.exists(os.path.expanduser(value)) else value


def own_name(given, settings: str, published) -> str:
    """A run's results name: --name (`given`), else `settings`, the name run_name gives its settings. A --name that
    is where the pages read other settings' run is refused (`t2r.mini --quick --name t2r_mini` was published as
    the full run)."""
    plain = given and posixpath.normpath(given.replace(os.sep, "/"))  # ./t2r_mini is t2r_mini
    if given is not None and plain != settings and plain in published:
        raise ValueError(f"--name {given}: the pages read results/{plain}.json as the run of its published settings, "
                         f"and this run's settings are {settings!r}'s; choose another --name")
    return settings if given is None else given


def repeated(args, ignore=()) -> str:
    """What a command line gives twice, said ("--sizes names a value twice: 8 8"), or "": a size or regime
    named twice would be measured twice and shown as two rows."""
    for option, values in vars(args).items():
        if isinstance(values, list) and option not in ignore and len(set(map(str, values))) < len(values):
            return f"--{option.replace('_', '-')} names a value twice: {' '.join(map(str, values))}"
    return ""


def cells(rows, key, what: str) -> dict:
    """{key(row): row}, refusing two rows of one key: the later would replace the earlier in a table, unsaid."""
    out = {}
    for r in rows:
        k = key(r)
        if k in out:
            raise ValueError(f"two rows of {what} {k}: a table shows one")
        out[k] = r
    return out


def parse(parser, argv=None):
    """parser.parse_args(argv), refusing an option given twice (given_twice)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if twice := given_twice(parser, argv):
        parser.error(twice)
    return args


def given_twice(parser, argv) -> str:
    """An option a command line gives twice, said ("--lengths is given twice: only its last value would count"),
    or "": argparse keeps the last silently (`--lengths 70 --lengths 90` measured 90 alone). Words after a
    subcommand's name are that subcommand's options; an abbreviation counts as its option."""
    subs = {name: p for a in parser._actions if isinstance(a, argparse._SubParsersAction) for name, p in a.choices.items()}
    current, seen = parser, set()
    for word in argv:
        if word == "--":
            break
        if current is parser and word in subs:
            current = subs[word]
            continue
        if not word.startswith("--"):
            continue
        name = word.split("=", 1)[0]
        table = current._option_string_actions
        found = table.get(name) or next(iter([a for o, a in table.items() if o.startswith(name)][:1]), None)
        if found is None or isinstance(found, (argparse._AppendAction, argparse._CountAction)):
            continue
        if (id(current), found.dest) in seen:
            return f"{found.option_strings[-1]} is given twice: only its last value would count; give it once"
        seen.add((id(current), found.dest))
    return ""


def changed_options(args, parser, ignore=()) -> list:
    """(option, value) for every option of `args` not at `parser`'s default, but those in `ignore`: a list
    that nargs="*" parsed from nothing is the default None, and numbers in another order (--sizes 512 128)
    are the same numbers (guards.whole_numbers sorts them)."""
    plain = lambda v: None if v in ([], ()) else list(in_order(v)) if isinstance(v, tuple) else in_order(v)
    return [(k, v) for k, v in vars(args).items() if k not in ignore and plain(v) != plain(parser.get_default(k))]


def in_order(v):
    """A list or tuple of numbers sorted (guards.whole_numbers sorts what a run measures); anything else as it is."""
    return sorted(v) if isinstance(v, (list, tuple)) and v and all(isinstance(x, (int, float)) for x in v) else v


def typed() -> str:
    """This process's command as a user types it (spelled), each word quoted as the shell needs: "my file.txt"
    pastes back as one word."""
    return spelled(shlex.join(["python", *sys.argv]))


def program(command: str) -> str:
    """The script or module a spelled command runs: 'demo.py', 't2r.mini'."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split(" ")
    return " ".join(words[1:3] if words[1:2] == ["-m"] else words[1:2])


def check_writable(name: str) -> pathlib.Path:
    """RESULTS/<name>.json's folder, made and written to once (a file made and removed), so that a long
    run that could not save its results says so before it starts, naming the folder. A name (a user's
    --name) stays inside RESULTS and never takes another program's results file (`t2r.mini --name sweep`
    replaced what `demo.py sweep` wrote, and the pages published it)."""
    if not name or pathlib.PurePath(name).is_absolute() or ".." in pathlib.PurePath(name).parts or \
            name.replace(os.sep, "/").split("/")[-1].strip() in ("", "."):  # "./", "x/", "x/.", " ": ".json", " .json"
        raise ValueError(f"a results name is a name inside {RESULTS}, not a folder or a path out of it: got {name!r}")
    if len(pathlib.PurePath(name).name.encode()) + len(".json") > 255:  # the file systems' limit on a name
        raise ValueError(f"a results name must be shorter than 250 bytes, got {len(name.encode())}")
    try:
        theirs = program(json.loads((RESULTS / f"{name}.json").read_text())["about"]["command"])
    except OSError:
        theirs = None  # no such file (or no folder to hold one: named below): nothing to keep apart
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ValueError(f"results/{name}.json is not the results of a run of this project (no about.command): "
                         "choose another --name, or move the file") from None
    ours = program(typed())
    if theirs is not None and theirs != ours:
        raise ValueError(f"results/{name}.json holds the results of `python {theirs}`, not of `python {ours}`: "
                         f"choose another --name, or move that file (demo.py names its runs by their settings: move it)")
    for kind, what in (("log", "a log"), ("png", "a plot")):  # results/tests.log, a log of its own; a user's plot
        if not (RESULTS / f"{name}.json").exists() and (RESULTS / f"{name}.{kind}").exists():
            raise ValueError(f"results/{name}.{kind} is {what} no run of this kind wrote (it has no {name}.json beside it): "
                             f"choose another --name, or move that file (demo.py names its runs by their settings: move it)")
    for kind in ("json", "log", "png"):  # each file a save replaces (a folder, a link to nothing, a file it would
        if os.path.lexists(RESULTS / f"{name}.{kind}"):  # refuse after the run) refused now
            check_file_path(RESULTS / f"{name}.{kind}", f"results/{name}.{kind}")
    folder = (RESULTS / f"{name}.json").parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test."):
            pass
    except OSError as e:
        raise OSError(f"cannot write the results to {folder}: {e.strerror or e}") from None
    return folder


def save(name: str, data: dict, about: dict, log: str = "", draw=None) -> pathlib.Path:
    """results/<name>.json: `data` with `about` (how it was made: command, code version as the run
    started, model, dtype, seconds) inside; results/<name>.log: what the run printed;
    results/<name>.png: draw(plt, data), if matplotlib is installed. Returns the JSON's path."""
    about = {"command": typed(), **about, "name": name}
    about["digest"] = digest(json.loads(json.dumps({"about": about, **data})))  # as it will read back (keys as strings)
    path = RESULTS / f"{name}.json"
    atomic_write(path, json.dumps({"about": about, **data}, indent=1))
    if log:
        atomic_write(RESULTS / f"{name}.log", f"$ {about['command']}\n{log}")
    if draw is not None:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:  # no plot: the previous run's is not left beside these numbers
            _unplotted(RESULTS / f"{name}.png", "matplotlib is not installed")
            return path
        try:
            plt.figure(figsize=(6.4, 4.2))
            draw(plt, data)
            plt.tight_layout()
            with atomic(RESULTS / f"{name}.png") as tmp:
                plt.savefig(tmp, dpi=120, format="png")
        except Exception as e:  # a label matplotlib cannot draw, a full disk: the numbers are saved, the old plot goes
            _unplotted(RESULTS / f"{name}.png", f"the plot failed ({type(e).__name__}: {(str(e).strip() or '?').splitlines()[0]})")
            raise ValueError(f"{path} and its log are saved, but the plot failed: {type(e).__name__}") from None
        finally:
            plt.close("all")
    return path


def _unplotted(png, why: str):
    """No plot this run: the previous run's is not left beside the new numbers."""
    old = png.exists()
    if old:
        png.unlink()
    print(f"[msrnn] {why}: no plot" + (f", and the previous run's {png} was removed" if old else ""), file=sys.stderr)


class _Tee(io.TextIOBase):
    """A stream that writes to `stream`, and copies to `copy` what one thread writes, and what its policy's threads and
    pool jobs write (`guards._serves`): sys.stdout is the process's, so a script's other threads print through it too
    (a policy they call too, and its threads), and their lines are not the command's."""

    def __init__(self, stream, copy, thread):
        self.stream, self.copy, self.thread, self.live = stream, copy, thread, True
        guards.TRANSCRIPTS.add(self)  # (a command's, not a policy's change of sys.stdout: its watch sees through it)

    def write(self, text):
        self.stream.write(text)
        if threading.get_ident() == self.thread or guards._serves(self.thread):
            self.copy.write(text)
        return len(text)

    def flush(self):
        self.stream.flush()


@contextlib.contextmanager
def transcript():
    """Print as usual, and keep a copy of what this thread prints: `with transcript() as out: ...; out.getvalue()`."""
    out = io.StringIO()
    tee = _Tee(sys.stdout, out, threading.get_ident())
    try:
        with contextlib.redirect_stdout(tee):
            yield out
    finally:
        tee.live = False  # (a policy call in another thread that spans its end did not take it off)


def _forked():  # a child forked while a thread ran a command: that thread is not in the child (a policy that forks is)
    global ONE
    if RUNNING[0] != threading.get_ident():
        ONE, RUNNING[0] = threading.Lock(), None


if "ONE" not in globals():  # (kept over importlib.reload: the command running holds it)
    ONE, RUNNING = threading.Lock(), [None]  # one command at a time in a process, and the thread running it
    # (demo.main): its transcript is sys.stdout, and Python's warning filters and torch's seed are the process's, so
    # two commands in two threads would write each other's logs. Here, not in demo.py: a policy file's `import demo`
    # under `python demo.py` loads a second demo module, with a lock of its own
    os.register_at_fork(after_in_child=_forked)


def sources(*files: pathlib.Path) -> list[pathlib.Path]:
    """files and every module they import from their own folder, the folder of the files given (on sys.path for
    them: a package's `from lib import consts`) or the repository, transitively, with the packages' __init__.py
    that Python runs on the way and the relative imports (`from . import SCALE`): the code a result depends on, for
    its cache key. Read from each file's import statements (never run); an import that names no such file (torch,
    math) is left out."""
    seen, todo = [], [pathlib.Path(f).resolve() for f in files]
    homes = [*dict.fromkeys(f.parent for f in todo), ROOT]
    while todo:
        f = todo.pop()
        if f in seen or not f.is_file():
            continue
        seen.append(f)
        for name in _code_of(f.read_bytes())[0]:  # (unparsable: no imports; its bytes are still hashed)
            dots = len(name) - len(name.lstrip("."))
            if dots:  # relative: from the file's package, one folder up for each dot after the first
                base = f.parents[dots - 1] if dots <= len(f.parents) else None
                found = [] if base is None else [base, *(base.joinpath(*name[dots:].split(".")[:i]) for i in
                                                         range(1, len(name[dots:].split(".")) + 1) if name[dots:])]
            else:
                parts = name.split(".")
                found = [home.joinpath(*parts[:i]) for home in (f.parent, *homes) for i in range(1, len(parts) + 1) if name]
            todo += [m for part in found for m in (part.with_suffix(".py"), part / "__init__.py")
                     if part.name and m.is_file()]
    return sorted(seen)


def data_files(*files: pathlib.Path) -> list[pathlib.Path]:
    """The files beside `files` that their code names in a string ("weights.pt", "data/w.pt", "settings.py"
    read by runpy): what a policy loads from its folder, for its cache key. A folder or a name built at
    run time is not followed (--fresh measures again)."""
    found = set()
    for f in files:
        try:
            text = f.read_bytes()
        except OSError:
            continue
        for name in _code_of(text)[1]:
            if 0 < len(name) < 256 and "\n" not in name and "\0" not in name and not os.path.isabs(name):
                near = f.parent / name
                try:
                    if near.is_file():
                        found.add(near.resolve())
                except OSError:  # a name too long for this file system
                    pass
    return sorted(found)


@functools.lru_cache(maxsize=1024)
def _code_of(text: bytes) -> tuple[tuple, tuple]:
    """(the modules a file's imports name, its string constants), parsed once per contents: a key reads the
    repository's files at every policy and every training run (2 s a student's key, parsed afresh)."""
    try:
        with warnings.catch_warnings():  # an invalid escape's warning is Python's to give at the import, with its line
            warnings.simplefilter("ignore")
            tree = ast.parse(text)  # as Python reads it: a coding line, a byte-order mark
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # (MemoryError: nested too deep for the parser)
        return (), ()
    names, strings = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):  # a relative one keeps its dots: from . import x is ".x"
            at = "." * node.level + (node.module or "")
            names += [at, *(f"{at}.{a.name}" if node.module else at + a.name for a in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.append(node.value)
    return tuple(names), tuple(strings)


def fingerprint(*parts) -> str:
    """A short hash of tensors, strings and files: a cache key that changes when any of them does."""
    h = hashlib.sha1()
    for p in parts:
        h.update(f"|{type(p).__name__}|".encode())  # each part apart: the parts (1, 23) and (12, 3) are two keys
        if isinstance(p, torch.Tensor):
            p = p.detach().to_dense() if p.layout != torch.strided else p.detach()  # a sparse tensor by its values,
            p = p.dequantize() if p.is_quantized else p.resolve_conj().resolve_neg()  # a quantized one's with its scale
            h.update(str((p.dtype, tuple(p.shape), p.device.type == "meta")).encode())  # a meta tensor has no values
            flat = torch.empty(p.numel(), dtype=p.dtype) if p.numel() and not p.is_meta else None  # its own strides of 1
            h.update(flat.copy_(p.cpu().reshape(-1)).view(torch.uint8).numpy().data if flat is not None else b"")  # a GPU's too
        elif isinstance(p, pathlib.Path):
            h.update(p.read_bytes())
        elif isinstance(p, bytes):
            h.update(p)
        else:
            h.update(str(p).encode())
    return h.hexdigest()[:12]


def median_time(fn, repeat: int, warmup: int = 1) -> float:
    """Seconds per call of fn(): the median of `repeat` calls after `warmup` untimed ones. The median,
    because this machine's speed drifts and a burst of other work should not decide the number.
    On a GPU, the time includes waiting for the work fn() queued."""
    if not (isinstance(repeat, int) and repeat >= 1):  # a median of no call failed in statistics
        raise ValueError(f"a time is the median of one or more calls; got repeat={repeat!r}")
    sync = torch.cuda.synchronize if torch.cuda.is_initialized() else (lambda: None)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ---------------------------------------------------------------- a headless browser

def chromium() -> str | None:
    """The path of a Chromium (Debian's `chromium` package), or None."""
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def browse(page: pathlib.Path, hash: str = "", screenshot: pathlib.Path | None = None, size=(1400, 1000)) -> str:
    """Open a local page in headless Chromium, `hash` after the # of its address: the DOM after its
    scripts ran, or with `screenshot`, a PNG of it (written whole or not at all)."""
    browser = chromium()
    if browser is None:
        raise RuntimeError("no Chromium found: `apt-get install chromium` (Debian) to take a screenshot")
    url = page.resolve().as_uri() + (f"#{hash}" if hash else "")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={size[0]},{size[1]}"]
    if screenshot is None:
        return subprocess.run([*cmd, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    with atomic(screenshot) as tmp:
        subprocess.run([*cmd, f"--screenshot={tmp}", url], capture_output=True, timeout=120, check=True)
    return ""


# ---------------------------------------------------------------- command lines

def command(main, interrupted="interrupted (results already saved are kept)"):
    """Run an entry point's main(): a user gets one line per problem. Our errors (ValueError, OSError,
    MemoryError, RuntimeError: they name the file, field or argument) are shown as they are, anything
    else with its type; --debug on the command line shows the traceback of either."""
    warnings.formatwarning = _one_line
    before = set(threading.enumerate())
    try:
        _named(main, interrupted)
    finally:
        stop = _unwaited(before)  # (a policy's thread may stop while it is joined; Ctrl-C there stops the wait)
        said = guards.stopped()  # a policy's thread's, after its last call: said here, not left to the next command
        if said and (sys.exc_info()[0] is not None or stop):
            print(f"[msrnn] also: {said}", file=sys.stderr)
    if stop:
        raise SystemExit(interrupted)
    if said:
        raise SystemExit(f"error: {said}")


def _unwaited(before: set) -> bool:
    """A thread that main() started and left running, no daemon (a policy's logger), would keep the process from
    ending for ever once all is said: named, and not waited for (the process ends as it would, its files flushed).
    Whether Ctrl-C stopped the wait."""
    left = [t for t in threading.enumerate() if not t.daemon and t not in before]
    if not left or threading.current_thread() is not threading.main_thread():
        return False
    pooled = getattr(sys.modules.get("concurrent.futures.thread"), "_threads_queues", {})  # a thread pool's threads
    # (torch's compiling, a policy's): Python's exit wakes the idle and waits for the busy for ever; not waited for
    end, stop = time.monotonic() + 2, False
    try:
        for t in left:
            if t not in pooled:
                t.join(max(end - time.monotonic(), 0))
    except KeyboardInterrupt:  # the user who sees the result and no end
        stop = True
    if not (left := [t for t in left if t.is_alive()]):
        return stop
    if named := [t for t in left if t not in pooled]:
        print(f"[msrnn] thread {named[0].name!r} is still running and is no daemon (a policy's? start it with "
              "daemon=True, and write what it must keep in the policy's call): not waiting for it", file=sys.stderr)
    for t in left:
        pooled.pop(t, None)
    if locks := hasattr(threading, "_shutdown_locks"):  # (Python 3.11 and 3.12's record of the threads its exit waits
        with threading._shutdown_locks_lock:  # for), first: Ctrl-C in the flush below leaves none of them waited for
            threading._shutdown_locks.difference_update(t._tstate_lock for t in left)
    try:
        for f in gc.get_objects():  # and a file the thread reaches (a policy's log) is never closed, so never flushed
            with contextlib.suppress(Exception):  # (no attribute of anything else read)
                if issubclass(type(f), io.IOBase) and not f.closed and f.writable():
                    f.flush()
    except KeyboardInterrupt:
        stop = True
    if not locks:
        sys.stdout.flush()
        sys.stderr.flush()
        guards._EXIT(1)
    return stop


def _named(main, interrupted):
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(interrupted)
    except Exception as e:
        if "--debug" in sys.argv:
            raise
        ours = isinstance(e, (ValueError, OSError, MemoryError, RuntimeError)) and str(e)  # (Python's parser's
        raise SystemExit(f"error: {e}" if ours else f"error: {type(e).__name__}: {e} (--debug shows where)")  # own
        # MemoryError, on a file nested too deep, says nothing: its type then)
    except BaseException as e:  # a Rust panic in the tokenizer (pyo3's PanicException) is no Exception
        if type(e).__name__ != "PanicException" or "--debug" in sys.argv:
            raise
        raise SystemExit(f"error: the tokenizer crashed (its Rust code panicked: {e}); is tokenizer.json this model's?")


def _one_line(message, category, filename, lineno, *_, **__):
    """A warning in one line: the project's name their cause; anyone else's (a policy file's, a library's) also say
    where they were raised, as Python's own format does."""
    try:
        project = ours(pathlib.Path(filename).resolve())
    except (OSError, ValueError, TypeError):
        project = False
    return f"warning: {message}\n" if project else f"warning: {filename}:{lineno}: {message}\n"


DEBUG_HELP = "on an error, show the full traceback rather than one line"


def at_least(low, most=None):
    """An argparse type: an integer >= low (and <= most, where given), or a one-line error naming the value.
    Torch threads are at most the cores (threads.cores()): more only take turns, and tens of thousands
    crash libgomp with a segmentation fault."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most}, got {value}")
        return value
    return parse


def path(text: str) -> pathlib.Path:
    """A command line's path, ~ expanded as a shell would (a shell leaves --folder=~/x as it is); an empty one
    (an unset variable: grade "$FOLDER") is not the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an empty path {text!r} (an unset variable?): name the folder or file")
    try:
        return pathlib.Path(text).expanduser()
    except RuntimeError as e:  # ~nosuchuser
        raise argparse.ArgumentTypeError(f"{text}: {e}") from None


def positive_at_most(most: float):
    """argparse type: a positive number no larger than `most` (1e308 GiB is no budget, only an overflow)."""
    def parse(text: str) -> float:
        value = positive(text)
        if value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most:g}, got {text}")
        return value
    return parse


def positive(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


# ---------------------------------------------------------------- worker processes

_SHARED = {}  # in a worker process: the function and the arguments every job shares


def _start(fn, shared, threads, said):
    ONE.acquire()  # a worker runs jobs, never a command: a policy's command in it is refused, as in the run's process
    RUNNING[0] = threading.get_ident()
    torch.set_num_threads(threads)
    _SHARED.update(fn=fn, shared=shared, said=said)
    sys.stdout = _PRINTED  # what a job, or a thread its policy started, prints: the run prints it in its own thread
    # (in its log, as with --jobs 1), with each job's result, and what is left at the worker's end (`_worker_end`)
    parent = getattr(multiprocessing.parent_process(), "pid", None) or os.getppid()  # the run, as spawn names it:
    # one killed while this worker still imported torch is gone already, and getppid() would name init
    threading.Thread(target=_orphaned, args=(parent,), daemon=True, name="msrnn-orphaned").start()  # a worker
    # outlives nothing that started it: a run killed (kill -9, out of memory), or one whose own worker ended it, ends
    # it too (its name: the lab's own, which a policy's watch does not suspect of changing a setting)
    threading._register_atexit(functools.partial(_worker_end, set(threading.enumerate())))  # nor waits at its end
    # for a thread a policy left (its import's heartbeat), as a command does not


class _Printed(io.TextIOBase):
    """A worker's stdout: what it is given, until taken."""

    def __init__(self):
        self.lock, self.text = threading.Lock(), []

    def write(self, text):
        with self.lock:
            self.text.append(str(text))
        return len(text)

    def take(self) -> str:
        with self.lock:
            text, self.text[:] = "".join(self.text), []
        return text


_PRINTED = _Printed()


def _worker_end(before: set):
    _unwaited(before)
    if left := _PRINTED.take():  # printed after the worker's last job (a policy's thread): the run prints it at its end
        with contextlib.suppress(OSError), open(_SHARED["said"], "a", encoding="utf-8", errors="replace") as f:
            f.write(left)
    if said := guards.stopped():  # after the worker's last job: its result is sent, the run gone on
        print(f"[msrnn] a worker: {said}", file=sys.stderr)


def _orphaned(parent: int):
    while os.getppid() == parent:
        time.sleep(0.5)
    guards._EXIT(1)  # Python's own, even while a policy runs


def _job(args):
    """A job's result, and what the worker printed since the last (a policy's lines), which the run prints in its own
    thread (`_PRINTED`); what it printed before it raised goes with its exception (`_crossing`)."""
    try:
        value = _SHARED["fn"](*_SHARED["shared"], *args)
    except BaseException as e:
        e = _crossing(e) if not isinstance(e, KeyboardInterrupt) else RuntimeError(
            "KeyboardInterrupt raised in a worker process, which Ctrl-C does not reach (the run's workers ignore it): "
            "the code the job ran raised it (a policy's?), not the user")
        with contextlib.suppress(AttributeError, TypeError):
            e.msrnn_printed = _PRINTED.take()
        raise e
    return args, value, _PRINTED.take()


def _crossing(e: BaseException, depth: int = 0) -> BaseException:
    """e, where the run can rebuild it as the pool sends it (`_rebuilds`); one it could not (an exception whose
    class's __init__ takes other arguments, anywhere in it: its args, an ExceptionGroup's list; a class of a policy's
    or a script's; the pool would break, as if the worker were killed) becomes its nearest builtin class (else a
    RuntimeError) of its words, and so each exception it holds as an attribute first (the watch's PolicyError holds the
    policy's own as `original`: the policy stays named)."""
    for key, held in list(vars(e).items()) if depth < 8 else ():
        if isinstance(held, BaseException) and held is not e:
            with contextlib.suppress(AttributeError, TypeError):
                setattr(e, key, _crossing(held, depth + 1))
    try:
        pickle.dumps(e)
        if _rebuilds(e):
            return e
    except Exception:
        pass
    base = next((c for c in type(e).__mro__ if c.__module__ == "builtins"), RuntimeError)  # a policy's ValueError
    words = f"{guards._typename(e)}: {guards._said(e)}"  # stays a ValueError (the checker's refusal)
    with contextlib.suppress(Exception):
        if base is not type(e) and base not in (BaseException, Exception) and _rebuilds(crossed := base(words)):
            return crossed
    return RuntimeError(words)


def _rebuilds(x, depth: int = 0) -> bool:
    """Whether the run could rebuild `x` as unpickling does, without unpickling anything: plain data (numbers, text,
    and lists, tuples, sets and dicts of them) and exceptions rebuilt from their class and args, whose class leaves
    pickling to Python's own way (a class of the policy's with its own __reduce__, __setstate__ or __setattr__ runs
    its own code there, which may fail), each thing inside them so; anything else (an object of the policy's, which
    may not load) is no such thing."""
    if depth > 8:
        return False
    if isinstance(x, BaseException):
        kind = type(x)
        own = kind.__module__ != "builtins" and any(getattr(kind, m) is not getattr(BaseException, m) for m in (
            "__reduce__", "__reduce_ex__", "__setstate__", "__setattr__"))  # (OSError's own __reduce__ is Python's)
        if own or not _ours(kind) or any(hasattr(getattr(kind, key, None), "__set__") for key in vars(x)):  # (a
            return False  # property's setter)
        kind(*x.args)
        return all(_rebuilds(y, depth + 1) for y in (*x.args, *vars(x).values()))
    if type(x) is dict:
        return all(_rebuilds(y, depth + 1) for y in (*x, *x.values()))
    if type(x) in (list, tuple, set, frozenset):
        return all(_rebuilds(y, depth + 1) for y in x)
    return type(x) in (type(None), bool, int, float, complex, str, bytes)


def _ours(kind) -> bool:
    """An exception class the run rebuilds without running a policy's or a script's code: Python's, an installed
    library's or the project's own; not a policy file's (lab.userfiles.*) nor a script's, whose __init__ runs again
    where the run reads the exception back (and may fail there, or wait, though it ran here)."""
    try:
        file = os.path.realpath(inspect.getfile(kind))
    except TypeError:  # built into Python
        return True
    except OSError:  # a class made where no file holds it (a notebook's, `python -c`)
        return False
    return file.startswith(guards.INSTALLED) or file.startswith(os.path.realpath(ROOT) + os.sep) and not \
        kind.__module__.startswith(("lab.userfiles", "__main__", "__mp_main__"))


def _flag(parent: int) -> str:
    """The file a pooled run's workers tell it through, named by the run's process (spawn's workers are its
    children): one that finds the run started again says so there. Not the environment, which a policy may read."""
    return os.path.join(tempfile.gettempdir(), f"msrnn-pool-{parent}")


def _started_again():
    """A worker importing the script (Python's spawn) reached a pooled run: the script starts it at its top level,
    outside `if __name__ == "__main__":`, in a thread or not. It tells the run that started it (which refuses, below)
    and ends without a traceback of its own."""
    if not os.path.exists(flag := _flag(os.getppid())):  # a pool that is not ours
        raise ValueError(_UNGUARDED)
    with open(flag, "a") as f:
        f.write(f"{os.getpid()}\n")
    raise SystemExit(1)


@contextlib.contextmanager
def _unimportable():
    """Start workers without the session's script where spawn cannot import it ('<stdin>': `python - < nb.py`, a
    heredoc): each would die looking for that file, and the pool start another for ever. As for a notebook."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    hide = isinstance(script, str) and not os.path.isfile(os.path.join(multiprocessing.process.ORIGINAL_DIR or "", script))
    if hide:
        del main.__file__
    try:
        yield
    finally:
        if hide:
            main.__file__ = script


_UNGUARDED = ("a pooled run (jobs > 1) was started by a script's top level: each worker process imports the script "
              "again, which starts it again; put the script's work under `if __name__ == \"__main__\":` (Python's "
              "rule for processes), or pass jobs=1")


def pool_map(fn, shared: tuple, jobs: list, processes: int):
    """Yield (args, fn(*shared, *args)) for each args in jobs, as each finishes, in `processes`
    processes that share `shared` (tensors go through shared memory, not copies). Most operations of
    a bounded step are too small to gain from a second thread, so on 2 cores two one-thread processes
    finish sooner than one process with two threads. Never more threads in all than the cores this
    process may use (threads.cores()): more processes than cores would only take turns. fn must be importable."""
    processes = min(processes, len(jobs), threads.cores())
    if processes > 1 and multiprocessing.current_process().daemon:  # a multiprocessing.Pool's worker may start no
        print("[msrnn] this process is daemonic (a multiprocessing pool's worker?), which may not start processes: "
              "the jobs run here, one at a time (as --jobs 1; the same numbers)", file=sys.stderr)  # process of its own
        processes = 1
    if processes <= 1:
        yield from ((args, fn(*shared, *args)) for args in jobs)
        return
    if getattr(multiprocessing.current_process(), "_inheriting", False):  # in a worker importing the script, as
        _started_again()  # multiprocessing itself tells it
    ctx = torch.multiprocessing.get_context("spawn")
    # Ctrl-C is the parent's to handle: it ends the workers below. A worker started with SIGINT ignored
    # keeps it ignored (exec keeps SIG_IGN, and Python then installs no handler), so one still importing
    # torch prints no traceback of its own. A worker that dies (killed, or failing to import the script)
    # breaks the pool, which says so, where multiprocessing.Pool started another and waited for ever.
    main = threading.current_thread() is threading.main_thread()
    flag, pool, ended = _flag(os.getpid()), None, False
    pathlib.Path(flag).write_bytes(b"")
    handle, said = tempfile.mkstemp(prefix="msrnn-printed-", suffix=".txt")  # what workers printed after their last job
    os.close(handle)
    before = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        try:
            with _unimportable():  # the workers start as the jobs are submitted
                pool = concurrent.futures.ProcessPoolExecutor(processes, mp_context=ctx, initializer=_start,
                                                              initargs=(fn, shared, threads.cores() // processes, said))
                futures = [pool.submit(_job, args) for args in jobs]
        finally:
            if main:
                signal.signal(signal.SIGINT, before)
        with _terminate_as_exit():  # a SIGTERM leaves too: the workers end with the parent
            for done in concurrent.futures.as_completed(futures):
                try:
                    args, value, printed = done.result()
                except concurrent.futures.process.BrokenProcessPool:
                    again = os.path.exists(flag) and os.path.getsize(flag)  # (a run beside it may have removed it)
                    raise ValueError(_UNGUARDED if again else _died(pool)) from None
                except BaseException as e:
                    print(getattr(e, "msrnn_printed", ""), end="")
                    raise
                print(printed, end="")
                yield args, value
        ended = True
    finally:
        if pool is not None:
            if not ended:  # Ctrl-C, an error, a consumer that stopped: the jobs still running end now
                for p in list((getattr(pool, "_processes", None) or {}).values()):  # (Python 3.14 has this as
                    p.kill()  # terminate_workers())
                with contextlib.suppress(AttributeError, OSError):  # one killed while it sent a long result (an
                    pool._result_queue._writer.close()  # error's 20 MB message) left half of it in the pipe, which the
                    # pool's own thread would wait for ever to read whole (and the run's exit with it): with this
                    # process's end of the pipe closed too, it reads the pipe's end instead
            pool.shutdown(wait=ended, cancel_futures=True)
        with contextlib.suppress(OSError):
            left = pathlib.Path(said).read_text(encoding="utf-8", errors="replace")
            os.unlink(said)
            print(left, end="")
        with contextlib.suppress(FileNotFoundError):  # a pooled run beside it in another thread shares it
            os.unlink(flag)


def _died(pool) -> str:
    """What a broken pool is told: how its workers ended (a signal: killed, out of memory?), and what to try."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    for _ in range(20):  # read once the pool's own thread has reaped them all (while it does, a code reads None)
        if all(p.exitcode is not None for p in workers):
            break
        time.sleep(0.1)
    codes = sorted({p.exitcode for p in workers if p.exitcode is not None})
    codes = [c for c in codes if c != -signal.SIGTERM] or codes  # the others, ended by the pool once it broke
    how = ", ".join(f"killed by signal {-c}" if c < 0 else f"exit code {c}" for c in codes) or "unknown"
    return (f"a worker process ended without its result ({how}): if it was killed (out of memory?), run with fewer "
            "jobs; if it ended importing the script, whose top level each worker runs again (input(), an exit, a run "
            "outside `if __name__ == \"__main__\":`), put that under the guard; jobs=1 runs in this process")

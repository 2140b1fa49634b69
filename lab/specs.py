"""Policies by name, as the command line gives them: 'tova', 'sink:8', 'lookahead:256',
'path/mine.py:fn' or 'full', each with the label every table, legend and result file shows."""
import ast
import asyncio
import collections
import concurrent.futures
import contextvars
from collections import abc
import dataclasses
import functools
import hashlib
import importlib.machinery
import importlib.util
import inspect
import math
import os
import pathlib
import re
import sys
import types
import threading
import time
import tokenize
import unicodedata
import weakref

import numpy as np
import torch

from engine import guards
from lab import harness
from lab import lookahead
from lab import userfiles
import policies
from lab import zoo
import msrnn


POLICIES = {**policies.POLICIES, "lookahead": lookahead.lookahead}  # the paper's, and the bound
ZOO = zoo.ZOO  # published rules beyond the paper's (zoo.py)


@dataclasses.dataclass(frozen=True)
class Named:
    """A policy as the commands know it: 'tova', 'sink:8', 'lookahead:256', 'path/mine.py:fn' or 'full'."""
    spec: str | None    # as given on the command line; None for a function passed in
    label: str          # the display name in every table, legend, log line and JSON
    fn: object = dataclasses.field(hash=False)  # policy(rows), parameters bound; None for the full cache; for a
    # lookahead, fn(model, tokens). Out of the hash (a dataclass instance as a policy is unhashable), not of ==
    reads_ahead: bool = False
    where: str | None = dataclasses.field(default=None, compare=False)  # a policy file's absolute path, as named
    # here: what a worker process reads (a script may have changed folder since, and its workers start there)

    def on(self, model, tokens):
        """The policy function for reading `tokens` (only a lookahead looks at them)."""
        return self.fn(model, tokens) if self.reads_ahead else self.fn

    @functools.cached_property
    def key(self) -> str:
        """A file name for this policy's results that changes when its parameters, its whole file or
        anything that file imports from its own folder or the repository does (harness.sources): a
        helper or a constant beside the function counts, not only the function's own lines; and so do
        the data files those sources name beside them (harness.data_files: weights it loads), and the
        values its code reads (_reads), and every public data global of the user's modules those files are
        (_world), and what it returns on a fixed probe (_behaviour). Not covered, where the probe's scores stay
        as they were: what it imports from anywhere else (an installed package, a folder on PYTHONPATH, a module
        its source does not import), the state only such code reaches, a private global (_NAME) its code does
        not name (or the repository's own: its state), a thread's or a pool's settings (keyed by its type), and a
        file it reads by a name its source does not spell: after changing those, run with --fresh (or delete the
        policy's cached results, results/sweep/, results/board/, results/check/)."""
        return self._keyed(probe=not self.reads_ahead)  # a lookahead reads (model, tokens): no rows to probe

    def _keyed(self, skip=(), probe=True) -> str:
        global _WALKED
        with _ONE:  # one key at a time in a process: the walk's record (_WALKED) is the process's
            _WALKED = {}  # the objects keyed so far (_seen): each once; those in `skip` by their place alone
            for x in skip:
                _seen(x)
            try:
                return self._key(probe)
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # an attribute of the policy's, or a global's __repr__, that raises (or exits) when read
                if isinstance(e, ValueError) and str(e).startswith("policy ") or getattr(e, "stop", False):
                    raise  # the key's own refusals, already named, and a policy's thread's os._exit
                raise ValueError(f"policy {self.label}: cannot be keyed, reading it or a value it holds raised "
                                 f"{guards._typename(e)}: {guards._said(e)}") from None
            finally:
                _WALKED = None

    def _key(self, probe) -> str:
        before = set(sys.modules)
        probed = harness.fingerprint(*_behaviour(self.fn)) if probe and self.fn is not None else ""  # first: what it
        # imports when called (`from . import core` in a helper's body) is then loaded when its reads and world are read,
        # at its first naming as at every later one and in a worker process
        _loaded(_helpers(before, None, ()))  # and watched from now on, as its file is now
        runs, held = _reads(self.fn)
        try:
            codes = [harness.sources(pathlib.Path(inspect.getsourcefile(f))) for f in runs]
            source = "".join(_source(f) + harness.fingerprint(*code, *harness.data_files(*code), *_compiled(f))
                             for f, code in zip(runs, codes))
        except (OSError, TypeError):
            source, codes = repr(self.fn), []
        held += _world({p for code in codes for p in code}, runs)
        bound = harness.fingerprint(*_value(dict(sorted(getattr(self.fn, "keywords", {}).items()))))  # the parameters, as
        # bound, by contents, in any order they were given
        bound += harness.fingerprint(*held) if held else ""  # what it reads besides: Scaled(1.0) is not Scaled(-1.0)
        bound += probed
        digest = hashlib.sha1((source + bound + self.label).encode()).hexdigest()[:8]
        slug = "".join(c if c.isalnum() else "_" for c in self.label).strip("_").lower()[:60]  # a file name's bound
        return f"{slug}-{digest}"


def key_of(fn, skip=()) -> str:
    """A function keyed as a policy is (its code and files, the values it reads), the objects in `skip` by their
    place alone: t2r/train.py records a student with it, its model and maps apart (their weights change as they
    train). Not by what it returns: a student is not a policy."""
    if not callable(fn):
        raise TypeError(f"key_of keys a function (a student, a policy); got {type(fn).__name__} {fn!r:.80}")
    return Named("function", "function", fn)._keyed(skip, probe=False)


def _behaviour(fn) -> list:
    """What a policy returns on a fixed probe (five steps' rows of random keys, values and attention), as key
    parts. The walk (_reads, _world) names the values it can see; a setting held where it cannot look (a class a
    factory made, a descriptor, a cache, a metaclass, a notebook's code) still changes the scores, and so the key.
    A policy that refuses the probe's shapes adds nothing here; one whose scores change from call to call (an
    unseeded generator) gets a new key in each process: a miss, never a stale hit. The last step is at t = 20,000,
    past every text the experiments read (16,384 tokens at most), and the rows have the default model's shapes: a
    rule that changes only past that t or at other shapes (head_dim, heads, batch, layer), held where the walk
    cannot see, is not in the key."""
    g, (B, H, G, hd), parts = torch.Generator().manual_seed(0), (1, 3, 3, 64), ["behaviour"]  # the default model's heads
    threads = torch.get_num_threads()  # one thread, as in every process: a sum split over threads rounds otherwise,
    torch.set_num_threads(1)  # and a worker of one thread would key the policy anew
    try:
        for layer, t, n in ((0, 8, 9), (1, 40, 17), (2, 100, 17), (15, 300, 33), (29, 20_000, 65)):
            pos = torch.cat([torch.randperm(t, generator=g)[:n - 1].sort().values, torch.tensor([t])])  # (n,) newest last
            attn = torch.randn(B, H, G, n, generator=g).softmax(-1)
            prev = torch.randn(B, H, n, generator=g)
            prev[..., -1] = math.nan  # the new row: never scored
            rows = msrnn.Rows(attn=attn, pos=pos.expand(B, H, n).clone(), score=attn.sum(2) * t / n, prev=prev,
                              keys=torch.randn(B, H, n, hd, generator=g), values=torch.randn(B, H, n, hd, generator=g),
                              query=torch.randn(B, H, G, hd, generator=g), t=t, size=n - 1, layer=layer)
            try:  # watched as every call is: a policy that changes torch's threads, dtype or seed is refused, and
                with torch.inference_mode(False), torch.no_grad(), guards.policy_call(fn, rows):  # that is put back (not
                    # changed here, unseen later); inside the caller's inference_mode too, so the key is the same there
                    got = fn(rows)
            except (Exception, SystemExit) as e:  # made for other shapes, refusing what it is shown, or quitting: the
                if getattr(e, "stop", False):  # run says so; but a policy's thread's os._exit, then or before, is said now
                    raise
                parts.append(f"refused at t={t}")
                continue
            parts.append(got.detach().clone() if isinstance(got, torch.Tensor) else repr(got))
    finally:
        torch.set_num_threads(threads)
    return parts


def _source(f) -> str:
    """f's lines, or where it starts where inspect cannot cut them out (a lambda on the line that closes a string
    raised tokenize.TokenError; a __wrapped__ that loops, ValueError): its file is hashed whole beside it, and its
    compiled code too."""
    try:
        return inspect.getsource(f)
    except (tokenize.TokenError, SyntaxError, IndentationError, ValueError):
        return f"{getattr(f, '__qualname__', f)} at line {getattr(getattr(f, '__code__', None), 'co_firstlineno', '?')}"


def _world(files: set, runs) -> list:
    """The data of every module of the user's that the policy's files are (its own file, what that imports beside
    it, a module made at run time): each public global by its contents, each class's settings. Read whole, not
    by the names the code spells: a name computed any way (attrgetter, getattr_static, a staticmethod's global, a
    helper held in a namespace) reads one of these. The repository's own modules and installed ones are not
    the user's; a private global (_NAME) is a module's cache."""
    called = {p.name for p in files}  # a cheap first look: resolving every loaded module's path slowed every key

    def mine(m):
        file = getattr(m, "__file__", None)
        if not isinstance(file, str):  # made at run time: the policy's own module only
            return any(getattr(f, "__module__", None) == m.__name__ for f in runs)
        if os.path.basename(file) not in called:
            return False
        path = pathlib.Path(file).resolve()
        return path in files and not file.startswith(INSTALLED) and not harness.ours(path)

    def settings(cls, seen=()):  # a class's settings, and those of the user's classes it holds (C.Cfg.SIGN, C.Cfg = make())
        return _fields(cls, data_only=True) + [p for k, v in sorted(vars(cls).items()) if inspect.isclass(v) and v not in seen
                                               and v.__module__ in names for p in (k, *settings(v, (*seen, cls)))]
    mods = sorted((m for m in list(sys.modules.values()) if inspect.ismodule(m) and mine(m)), key=lambda m: m.__name__)
    names = {m.__name__ for m in mods}
    # one module a file: a policy file another imports is loaded twice (as `b` by the other, and as its own
    # lab.userfiles.b_…); the one that holds the policy's functions, else the other's, whatever was named before
    ours = {getattr(f, "__module__", None) for f in runs}
    first = {}
    for m in sorted(mods, key=lambda m: (m.__name__ not in ours, m.__name__.startswith(f"{userfiles.__name__}."),
                                         m.__name__)):
        first.setdefault(pathlib.Path(m.__file__).resolve() if isinstance(getattr(m, "__file__", None), str) else m, m)
    mods = sorted(first.values(), key=lambda m: m.__name__)
    parts = []
    for m in mods:
        for n, x in sorted(vars(m).items()):
            if n.startswith("_"):
                continue
            if inspect.isclass(x) and x.__module__ == m.__name__:  # OBJ.SIGN where SIGN is the class's
                parts += [f"{m.__name__}.{n}", *settings(x)]
            elif inspect.isfunction(x):  # its attributes (score.SIGN), read by a computed name too
                parts += [f"{m.__name__}.{n}", *_value({k: v for k, v in vars(x).items() if k != "__wrapped__"})]
            elif _bound(x) is not None:  # SCORE = Scorer(1.0).score, torch.tensor([1.0]).mul: the object's fields
                parts += [f"{m.__name__}.{n}", *_value(x)]
            elif _data(x):
                parts += [f"{m.__name__}.{n}", *_value(x)]
            elif type(x).__module__ in names:  # an instance of a user's class that defines __get__ (not data)
                parts += [f"{m.__name__}.{n}", *_instance(x)]
    return parts


def _instance(x) -> list:
    """An object that is not plain data (its class defines __get__) by its contents: its fields, slots and items."""
    items = list(x) if isinstance(x, (abc.Sequence, abc.Set)) else dict(x) if isinstance(x, abc.Mapping) else None
    return [type(x).__qualname__, *_value(_fields_of(x)), *_value(items)]


def _fields_of(x) -> dict:
    """An instance's fields: its slots (a class's `__slots__`, a string or a list, its bases' too; a private one,
    __sign, under the name Python keeps it, _Cls__sign) and its __dict__."""
    slots = [f"_{c.__name__.lstrip('_')}{s}" if s.startswith("__") and not s.endswith("__") and c.__name__.strip("_") else s
             for c in type(x).__mro__
             for s in ((c.__dict__.get("__slots__", ()),) if isinstance(c.__dict__.get("__slots__", ()), str)
                       else c.__dict__.get("__slots__", ())) if s not in ("__dict__", "__weakref__")]
    return {**{s: getattr(x, s, None) for s in slots}, **getattr(x, "__dict__", {})}


PROJECT_MODULES = {p.removesuffix(".py") for p in harness.PROJECT}


def _compiled(f) -> list:
    """A function's compiled code as key parts (its bytecode, names and constants, nested code too): two lambdas on
    one line share their source lines, not their code."""
    todo, parts = [getattr(f, "__code__", None)], []
    while todo:
        c = todo.pop()
        if c is not None:
            parts += [c.co_code, repr(c.co_names), *(repr(sorted(map(repr, k))) if isinstance(k, frozenset) else repr(k)
                                                     for k in c.co_consts if not inspect.iscode(k))]  # {"a", "b"}: in order
            todo += [k for k in c.co_consts if inspect.iscode(k)]
    return parts


def _reads(fn) -> tuple[list, list]:
    """What a policy runs and reads, for its key, in one walk: its code (the function, unwrapped; a partial's;
    a method; a callable instance's class and its __call__; the functions it closes over, such as the one a
    decorator without functools.wraps wraps) and the values it reads besides its keyword parameters (a
    partial's positional arguments, a closure's values, default arguments, the module globals its code
    names, an instance's fields, its class's attributes: by their contents, `_value`)."""
    code, values, todo, seen = [], [], [fn], set()
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if hasattr(f, "__wrapped__"):  # functools.wraps: the wrapped function, and the wrapper's own closure too
            todo.append(f.__wrapped__)
            if not (inspect.isfunction(f) or isinstance(f, functools.partial)):  # functools.cache: the wrapped is the code
                continue
        if isinstance(f, functools.partial):
            values += [v for a in f.args for v in _value(a)]
            todo.append(f.func)
        elif inspect.ismethod(f):  # the object's fields, or its place where it is keyed apart (key_of's skip: the maps)
            placed = _seen(f.__self__)
            values += [placed] if placed is not None else _fields(f.__self__) + _fields(type(f.__self__), data_only=True)
            todo.append(f.__func__)
        elif inspect.isfunction(f):
            code.append(f)
            parts, helpers = _globals(f)
            values += parts + _value({k: v for k, v in vars(f).items() if k != "__wrapped__"})  # newest.sign = -1.0
            todo += helpers
        else:  # a class, or a callable instance: its class, its fields and its __call__
            cls = f if inspect.isclass(f) else type(f)
            code.append(cls)
            values += _fields(cls, data_only=True) + ([] if inspect.isclass(f) else _fields(f))
            todo += [v for v in getattr(f, "__dict__", {}).values() if inspect.isfunction(v)]  # a class-made decorator's function
            todo += [c for c in [getattr(cls, "__call__", None)] if inspect.isfunction(c) and _users(c)]  # a base's too
    return code, values


def _fields(obj, data_only=False, depth=0) -> list:
    """An object's fields (a class's attributes, its bases' too, with data_only: its settings, not its methods)
    as key parts."""
    if inspect.isclass(obj):
        fields = {k: v for c in reversed(obj.__mro__[:-1]) for k, v in vars(c).items()  # a base's, then its own; not
                  if not k.startswith("_abc_")}  # abc's registry, whose repr holds an address (a new key per process)
    else:
        fields = _fields_of(obj)
    return [x for k, v in sorted(fields.items())
            if not data_only or (_data(v) or isinstance(v, (property, functools.cached_property))) and not k.startswith("__")
            for x in (k, *_value(v, depth))]  # a property's getter may close over a setting (a class a factory made)


def _globals(f) -> tuple[list, list]:
    """What f's code reads by name, besides its parameters: the module globals it names, the values it closes
    over and its default arguments. Data by its contents (a private global _NAME too: a cache held there makes a
    miss, never a stale hit);
    of a module, the data attributes the code names (`helper.SIGN`); of a class, its settings, and its methods
    as helpers (`Scorer().score` reads a constant); of a bound method, the object's fields and the method.
    Functions f reaches this way are returned as helpers (of its own module or the user's, not installed
    ones: torch's, Python's), whose reads count too. Returns (key parts, those functions)."""
    names, todo = set(), [f.__code__]
    while todo:  # the code of f's comprehensions and inner functions names globals too, and so do its words:
        c = todo.pop()  # globals()["SIGN"], getattr(cfg, "SIGN"), vars(cfg)["SIGN"] read SIGN by a string
        names |= set(c.co_names) | {k for k in c.co_consts if isinstance(k, str) and k.isidentifier()}
        todo += [k for k in c.co_consts if inspect.iscode(k)]
    g, co = f.__globals__, f.__code__
    if names & {"globals", "vars", "getattr", "eval", "exec", "__globals__", "f_globals", "modules", "__dict__"}:  # a name
        # computed (globals()[KEY], f.__globals__[name.upper()], sys.modules[__name__]): any data global may be read
        names |= {n for n, v in g.items() if _data(v)}
    params = co.co_varnames[:co.co_argcount + co.co_kwonlyargcount]
    if harness.ours(pathlib.Path(co.co_filename).resolve()):  # the repository's code: its settings are in its source,
        names = {n for n in names if not n.startswith("_")}  # hashed; a private global is its state (engine.guards'
        # registry of signal handlers, which a checkpoint's save adds to): keyed, a rerun was another student
    scopes = [("", {n: g[n] for n in names & g.keys()}, False),  # def pol(rows): ... Cfg.SIGN, _SINKS
              ("cell ", {n: _contents(c) for n, c in zip(co.co_freevars, f.__closure__ or ())}, True),  # make(Cfg)
              ("default ", dict(zip(params[co.co_argcount - len(f.__defaults__ or ()):], f.__defaults__ or ()))
               | (f.__kwdefaults__ or {}), True)]  # def pol(rows, cfg=Cfg)
    parts, helpers = [], []
    for kind, scope, follow in scopes:  # follow: a function held in a cell or a default is always followed
        for n, x in sorted(scope.items()):
            if _data(x):
                parts += [kind + n, *_value(x)]
                helpers += [m for c in type(x).__mro__ for m in vars(c).values()  # S.score(rows): an instance's methods
                            if inspect.isfunction(m) and _users(m)]
                held = x.values() if isinstance(x, dict) else x if isinstance(x, (list, tuple, set, frozenset)) else ()
                helpers += [v for v in held if inspect.isfunction(v) and _users(v)]  # FNS = [helper.score]: its reads
            elif inspect.ismodule(x):
                for a in sorted(n for n in names if not (n.startswith("__") and n.endswith("__"))):  # rows.__dict__ in
                    # the code is no module's __dict__ to key (torch's holds its random generator's state)
                    try:
                        y = getattr(x, a)
                    except Exception:  # a module's own __getattr__ may raise anything
                        continue
                    if callable(getattr(type(y), "write", None)) and callable(getattr(type(y), "flush", None)):
                        parts += [f"{kind}{n}.{a}", "a stream"]  # sys.stdout: what it holds is no setting (and a
                        # pooled worker's is another, its own buffer)
                    elif _data(y):
                        parts += [f"{kind}{n}.{a}", *_value(y)]
                    elif inspect.isfunction(y) and _users(y):  # helper.score: its reads
                        helpers.append(y)
            elif inspect.isclass(x):  # Cfg.SIGN: a class's settings; its methods' reads
                parts += [kind + n, *_fields(x, data_only=True)]
                helpers += [m for c in x.__mro__ for v in vars(c).values() for m in [getattr(v, "__func__", v)]  # a
                            if inspect.isfunction(m) and _users(m)]  # staticmethod's function too: its closure's values
            elif inspect.ismethod(x):  # SCORE = obj.score: the object's fields, and the method
                parts += [kind + n, *_value(x.__self__)]
                helpers += [x.__func__] if inspect.isfunction(x.__func__) and (follow or _users(x.__func__)) else []
            elif inspect.isfunction(x) and (follow or x.__module__ == f.__module__ or _users(x) or x.__closure__):
                helpers.append(x)  # `from scoring import score` too; a function made at run time (_st = tail.student(...))
            elif kind and not inspect.isfunction(x):  # a builtin held in a cell or a default: by its name
                parts += [kind + n, *_value(x)]
    return parts, helpers


INSTALLED = guards.INSTALLED  # where Python's own modules and installed packages live


def _users(f) -> bool:
    """f is code of the user's (a file of theirs, or a module made at run time), not Python's or a package's."""
    file = f.__code__.co_filename
    made = f.__module__ in sys.modules and getattr(sys.modules[f.__module__], "__file__", None) is None
    return (os.path.isfile(file) and not file.startswith(INSTALLED)) or (made and not file.startswith("<frozen"))


def _data(x) -> bool:  # a value, not code: modules, functions, classes and descriptors (a property) are code
    return not (inspect.ismodule(x) or inspect.isroutine(x) or inspect.isclass(x) or hasattr(type(x), "__get__"))


TORCH_OWN = set(vars(torch.nn.Module()))  # an nn.Module's own bookkeeping (its weights are keyed apart); its hooks
# and the user's attributes, private ones too (self._sign), are what the module computes with
PLAIN = (str, bytes, int, float, complex, bool, type(None))  # values keyed by their repr
DEEP = 12  # how far into nested values a key looks (a list holding itself twice: 2^12 visits)
_WALKED = None  # while a key is computed, what _value has keyed (_seen), by id


def _plain_repr(x) -> str:
    """repr of a plain value, a subclass's (numpy's float64) by its built-in type's repr: numpy's own follows print
    options a policy may set (np.set_printoptions(legacy=...)), and the key would follow what ran before it."""
    if type(x) in PLAIN:
        return repr(x)
    return f"{type(x).__qualname__}({next(t for t in PLAIN if isinstance(x, t)).__repr__(x)})"


def _value(x, depth: int = 0) -> list:
    """A value as key parts, by its contents: a tensor or a numpy array by its bytes, a module by its
    weights, a list, tuple, set or dict item by item; a function, class or module by its name (its file is
    hashed with the code); anything else by its repr, which, holding an address, misses the cache rather
    than hit another's."""
    plain = isinstance(x, PLAIN)
    if not plain and (seen := _seen(x)) is not None:  # each object once: a registry its items hold was walked along
        return [type(x).__qualname__, seen]  # every path (and past the depth limit)
    if isinstance(x, torch.Tensor):  # a subclass's attributes too (W.sign), as a list's
        return [x, *_own(x, depth)] if not x.is_nested else ["nested", *(p for t in x.unbind() for p in _value(t, depth + 1))]
    if isinstance(x, np.ndarray):  # an object array item by item (its repr elides a long tensor's middle)
        return [*([str((x.dtype, x.shape)), x.tobytes()] if x.dtype != object else [str(x.shape), *_value(x.tolist(), depth + 1)]),
                *_own(x, depth)]
    if isinstance(x, torch.nn.Module):  # its weights, every buffer (persistent or not), its settings, its children
        own = [*x.named_parameters(recurse=False), *x.named_buffers(recurse=False)]
        return [type(x).__qualname__, *(p for k, v in own for p in (k, v)),
                *_value({k: list(v.values()) if "hook" in k and isinstance(v, dict) else v for k, v in vars(x).items()
                         if k not in TORCH_OWN or "hook" in k or k == "training"}, depth + 1),  # hooks by function, not id
                *(p for k, m in x.named_children() for p in (k, *_value(m, depth + 1)))]
    if isinstance(x, (weakref.ref, contextvars.ContextVar)):  # by what it points to, or holds in this context (its
        return [type(x).__name__, *_value(x() if isinstance(x, weakref.ref) else _var(x), depth + 1)]  # address: no)
    if isinstance(x, (weakref.WeakSet, weakref.WeakKeyDictionary, weakref.WeakValueDictionary)):  # a record of
        return [type(x).__qualname__]  # what lives now (guards.TRANSCRIPTS: the commands running), no setting a
        # score reads; by its contents, each run of a command would key its student anew
    if isinstance(x, functools.partial):  # a partial held as a global: its function and its arguments
        return ["partial", *_value(x.func), *_value(x.args, depth + 1), *_value(x.keywords, depth + 1)]
    if (owner := _bound(x)) is not None and depth < DEEP:  # Scorer(1.0).score in a list or a partial, a tensor's .mul
        return ["method", getattr(x, "__qualname__", ""), *(_fields(owner, data_only=True) if inspect.isclass(owner)
                                                           else _value(owner, depth + 1))]
    if depth >= DEEP and not plain:
        return [os.urandom(8).hex()]  # nested past what the key walks: a miss every time, never a stale hit
    x = x.__func__ if isinstance(x, (staticmethod, classmethod)) else x.fget if isinstance(x, property) else \
        x.func if isinstance(x, functools.cached_property) else x
    if isinstance(x, abc.Mapping):
        return ["dict", *(p for k, v in x.items() for p in (*_value(k, depth + 1), *_value(v, depth + 1))),  # in its order,
                *_own(x, depth)]  # its keys by contents too (a repr may hide a field or elide a tensor's middle)
    if isinstance(x, (abc.Set, set, frozenset)):  # each item by its contents, in an order that does not depend on the set's
        return [type(x).__name__, *sorted(harness.fingerprint(*_value(v, depth + 1)) for v in x), *_own(x, depth)]
    if isinstance(x, (abc.Sequence, collections.deque)) and not isinstance(x, (str, bytes, bytearray, range)):
        return [type(x).__name__, len(x), *(p for v in x for p in _value(v, depth + 1)), *_own(x, depth)]
    if inspect.isfunction(x) and _users(x) and depth < DEEP:  # a helper held in a value (OBJ.f = make(-1.0)): its
        # module, name and compiled code (two lambdas), and what its closure and defaults hold
        cells = [_contents(c) for c in x.__closure__ or ()]
        return ["function", x.__module__, x.__qualname__, *_compiled(x), *_value([c for c in cells if c is not x], depth + 1),
                *_value([x.__defaults__, x.__kwdefaults__, {k: v for k, v in vars(x).items() if k != "__wrapped__"}], depth + 1)]
    if isinstance(x, (torch._ops.OpOverloadPacket, torch._ops.OperatorBase)):  # torch.ops.aten.add: by its name (its
        return [type(x).__name__, str(x)]  # records' reprs hold addresses, another in every process)
    if inspect.ismodule(x) or inspect.isroutine(x) or inspect.isclass(x):
        try:
            return [f"{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', getattr(x, '__name__', ''))}"]
        except Exception:  # torch.classes answers any attribute by raising
            return [type(x).__qualname__]
    if plain:  # a subclass of float or str keeps its attributes beside its value (T.sign)
        return [hex(x) if isinstance(x, int) and x.bit_length() > 10_000 else _plain_repr(x), *_own(x, depth)]  # 10**5000
    if isinstance(x, (concurrent.futures.Executor, threading.Thread, asyncio.AbstractEventLoop)) and _installed(type(x)):
        return [type(x).__qualname__]  # a pool of threads or processes, a thread, an event loop: no setting a score
        # reads; its threads, queue and their addresses change as it works, and in every process (a new key in each)
    if _installed(type(x)):
        try:  # an installed library's object (random.Random, operator.methodcaller): its state as pickling would save
            reduced = x.__reduce_ex__(4)  # it (its arguments and state; nothing is unpickled)
        except Exception:
            reduced = None
        if isinstance(reduced, tuple) and len(reduced) > 1:
            return [type(x).__qualname__, *_value(list(reduced[1:3]), depth + 1)]
    try:  # a buffer (a ctypes array: its items are its bytes, not its empty __dict__)
        return [type(x).__qualname__, bytes(memoryview(x))]
    except (TypeError, ValueError, BufferError):
        pass
    fields = _fields_of(x)  # a dataclass (slots or not), a namespace: its fields, all of them, not its repr; and its
    # class's settings where the class is the user's (a property that closes over a setting, in a class a factory made)
    cls, settings = type(x), []
    if not _installed(cls) and _seen(cls, "settings") is None:  # once per key (C.DEFAULT = C() was walked to the
        # depth limit), whether or not the class itself was met before as a value (keyed then by its name)
        settings = _fields(cls, data_only=True, depth=depth + 1)
    if hasattr(x, "__dict__") or fields:
        return [type(x).__qualname__, *_value(fields, depth + 1), *settings]
    # what neither pickles nor has fields: its repr; a lock's, which holds nothing a score reads, less the address a
    # new process changes (a weakref's or a ContextVar's address stands for what it holds: a miss, never a stale hit)
    return [re.sub(r" at 0x[0-9a-fA-F]+", "", repr(x)) if cls in _LOCKS else repr(x)]


_LOCKS = (type(threading.Lock()), type(threading.RLock()))


def _var(x):
    try:
        return x.get()  # its value here, or its default
    except LookupError:
        return "<unset>"


def _seen(x, what="value"):
    """None the first time the key being made meets x (then it is keyed whole), else 'as #i', the order it was first
    met in: each function, class, object and container is keyed once (a registry of closures or objects that each
    hold it was walked along every path, or past the depth limit). x is held until the key is made, so that no
    object made meanwhile takes its id. Outside a key, None."""
    if _WALKED is None:
        return None
    if (what, id(x)) in _WALKED:
        return _WALKED[what, id(x)][1]
    _WALKED[what, id(x)] = (x, f"as #{len(_WALKED)}")
    return None


def _own(x, depth) -> list:
    """The attributes a subclass of dict, list, float or a tensor keeps beside its items (CFG.sign), slots too, as key parts."""
    fields = _fields_of(x)
    return ["attributes", *_value(fields, depth + 1)] if fields else []


def _bound(x):
    """The object a bound method is bound to (Scorer(1.0).score's, a tensor's .mul's, a classmethod's class), or None
    (a function, or a module's builtin: len, math.sqrt)."""
    owner = getattr(x, "__self__", None) if inspect.ismethod(x) or inspect.isbuiltin(x) or inspect.ismethodwrapper(x) else None
    if owner is None or inspect.ismodule(owner):  # (asked of a method only: an AttrDict answers __name__ by KeyError)
        return None
    home = sys.modules.get(getattr(x, "__module__", None) or "")  # random.shuffle: a method of random's own hidden
    if home is not None and getattr(home, x.__name__, None) is x and _installed(type(owner)):  # Random,
        return None  # seeded anew in every process: a library's function, keyed by its name
    return owner


def _installed(cls) -> bool:
    """cls is Python's or an installed package's (random.Random), not the user's."""
    try:
        return inspect.getfile(cls).startswith(INSTALLED)
    except TypeError:  # a class built into Python
        return True


_NOTED = set()  # (policy file, module) whose note was printed


def _own_helpers(path):
    """Refuse a policy file whose import of a module beside it found another folder's module of that name
    (two policy files each with a helper.py: Python loads the first, and the second's key would hash its own)."""
    folder = path.parent.resolve()
    names = {n.split(".")[0] for n in harness._code_of(path.read_bytes())[0] if n and n[0] != "."}  # the imports its key read
    for name in sorted(names):
        mine = folder / name / "__init__.py" if (folder / name / "__init__.py").is_file() else folder / f"{name}.py"  # as
        # Python looks: a package before a module of its name
        if mine.is_file() and name in sys.builtin_module_names:  # built into Python: no file, and never the one beside
            raise ValueError(f"{path} imports {name}, which is beside it, but Python's own {name} is built in: Python "
                             f"would use that one; give the module beside {path.name} another name")
        loaded = getattr(sys.modules.get(name), "__file__", None)
        if mine.is_file() and loaded and name in PROJECT_MODULES and pathlib.Path(loaded).resolve() == harness.ROOT / \
                f"{name}.py" != mine.resolve():  # course/work's copy of policies.py: every process imports ours
            if (path, name) not in _NOTED:  # once, not at every naming
                _NOTED.add((path, name))
                print(f"[msrnn] note: {path.name} imports {name}: the repository's {name}.py, not the copy beside it "
                      f"({mine})", file=sys.stderr)
        elif mine.is_file() and loaded and pathlib.Path(loaded).resolve() != mine.resolve():
            raise ValueError(f"{path} imports {name}, which is beside it, but {name} is already loaded from {loaded}: "
                             f"Python would use that one; give the module beside {path.name} another name")


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # a cell not yet filled
        return None


FULL = Named("full", "full cache", None)


# printable characters drawn as nothing (Unicode's default-ignorable ones that str.isprintable() lets through): the
# combining grapheme joiner, the Hangul fillers, Khmer's inherent vowels, the blank Braille pattern, Mongolian's and
# the variation selectors
UNSEEN = {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0, *range(0x180B, 0x1810), *range(0xFE00, 0xFE10),
          *range(0xE0100, 0xE01F0)}


class Sent(str):
    """A policy's spec as a job names it to a worker process, with the key it was keyed by here: `named` reads the
    spec afresh there and refuses it if it keys otherwise (a setting changed since its file was read here, or a file
    that changes what it reads when imported again), rather than measure another policy under this one's key. A
    policy file's is read at the absolute path it was named by (`where`), not split from the spec again (a folder
    may be called "v1.py:old")."""

    def __new__(cls, spec, key, where=None):
        sent = super().__new__(cls, spec)
        sent.key, sent.where = key, where
        return sent

    def __reduce__(self):
        return Sent, (str(self), self.key, self.where)

    def __eq__(self, other):  # one spec read at two times is two policies: their jobs are two
        return isinstance(other, str) and str(self) == str(other) and getattr(other, "key", None) == self.key

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((str(self), self.key))


def _import_helpers(path: pathlib.Path) -> bool:
    """In a worker: import the helpers a policy file's source names (by their place on sys.path) that are not loaded
    here; whether any was. A helper counts in the key where it is loaded: the parent's script may have imported it."""
    if path.suffix != ".py" or not path.is_file():
        return False
    loaded = {pathlib.Path(f).resolve() for m in list(sys.modules.values()) if isinstance(f := getattr(m, "__file__", None), str)}
    homes = [pathlib.Path(p).resolve() for p in sys.path if p]
    imported = False
    for f in harness.sources(path):
        home = max((h for h in homes if f.is_relative_to(h)), key=lambda h: len(h.parts), default=None)  # its package
        if f in loaded or f == path.resolve() or home is None:
            continue
        parts = f.relative_to(home).with_suffix("").parts
        try:
            importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
            imported = True
        except Exception:  # not importable by that name: the key stays as it is, and the run says so
            pass
    return imported


def sent(p, processes: int):
    """What a job names p by: in this process (processes 1), p itself, its file not read again here; for a worker,
    its spec with its key (Sent); p itself where it has no spec (a function made on the fly is measured here)."""
    if p is None or not p.spec or processes <= 1:
        return p
    return p.spec if p is FULL else Sent(p.spec, p.key, p.where)


def distinct(named: list, taken=()) -> list:
    """`named`, refused if two share a display name, or one takes a name in `taken` (the sweep's own rows):
    every table, results file and verdict is keyed by it, so the second would replace the first (a copy of
    policies.py's tova, edited, still labelled TOVA)."""
    once = {}
    for p in named:  # one policy named twice ('sink', 'sink:4', a file named twice: one key) is measured once
        once.setdefault(p.key, p)  # (the key holds its compiled code: two lambdas on one line are two keys)
    named = list(once.values())
    labels = [p.label for p in named] + list(taken)
    if twice := sorted({x for x in labels if labels.count(x) > 1}):
        raise ValueError(f"two policies share a display name ({', '.join(twice)}): the tables and results are keyed by it; "
                         f"give one another with policies.label(\"...\")")
    return named


def named(spec) -> Named:
    """Resolve 'full', a name in POLICIES, 'name:arg,key=arg', or 'file.py:function[:args]'; a
    function or a Named passes through. Errors name the policy, the file and the function."""
    if isinstance(spec, Named):
        return spec
    if isinstance(spec, Sent):  # in a worker: the policy the parent keyed, or a named refusal
        file = spec.where or (f"{str(spec).partition('.py:')[0]}.py" if ".py:" in spec else None)  # (a Sent made of
        # a spec alone: its spec's path)
        read = (lambda: _file_spec(str(spec), pathlib.Path(file))) if file else lambda: named(str(spec))
        got = read()
        if got.key != spec.key and file and _import_helpers(pathlib.Path(file).expanduser()):  # a helper its file
            got = read()  # names that the parent's script imported (a guarded self-test's `import helper`) and this
            # worker had not
        if got.key != spec.key:
            raise ValueError(f"policy {str(spec)!r}: read afresh in a worker process it keys as {got.key}, not as the "
                             f"{spec.key} it was keyed by (its file, or a helper beside it, was edited since "
                             "this run read it: run it again; or a setting changed since its file was read, its file "
                             "changes what it reads when imported again, or its calls do, a list it records into: run "
                             "it with --jobs 1)")
        return got
    if callable(spec):
        return _bind(spec, [], None)
    if not isinstance(spec, str):
        raise ValueError(f"a policy is a name ('tova', 'sink:8', 'path/mine.py:fn'), a function or 'full', "
                         f"got {type(spec).__name__} {spec!r}")
    if spec == "full":
        return FULL
    if spec.startswith("full:"):
        raise ValueError(f"policy {spec!r}: the full cache takes no parameters")
    if ".py:" in spec:
        return _file_spec(spec)
    else:
        name, _, args = spec.partition(":")
        if name.endswith(".py") and name not in POLICIES | ZOO:  # 'mine.py': the file, without its function
            if os.path.isfile(name):
                raise ValueError(f"policy {spec!r}: name the function in {name} that scores the rows, as "
                                 f"{name}:<function>{_defined(name)}")
            raise ValueError(f"policy {spec!r}: policy file {name} {_missing(name)} (a policy is named as "
                             "path/mine.py:fn)")
        if name not in POLICIES | ZOO and os.path.isfile(name):  # 'mine.txt:fn'
            raise ValueError(f"policy {spec!r}: {name} is a file, but a policy file is Python's: name it (or a link "
                             "to it) with .py")
        if name not in POLICIES | ZOO:
            raise ValueError(f"unknown policy {name!r}; choose from full, {', '.join(POLICIES | ZOO)}, "
                             f"or give your own as path/to/file.py:function")
        fn = (POLICIES | ZOO)[name]
    return _bind(fn, [a for a in args.split(",") if a], spec)


def _missing(path) -> str:
    """Why a policy file named is none: a folder, a pipe or a device of that name is there, or nothing is."""
    return "is not a regular file (a folder, a pipe or a device)" if os.path.exists(path) else "not found"


def _defined(path: str) -> str:
    """' (it defines: a, b)', the functions a Python file defines outside a function or class (a def, a name given a
    lambda; under an `if` too), read, never run; or that it defines none so, or cannot be parsed."""
    try:
        todo, found = ast.parse(pathlib.Path(path).read_bytes()).body, []
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:  # (nested too deep for the parser)
        return " (it does not parse: " + ("nested too deep for Python's parser)" if isinstance(e, (
            MemoryError, RecursionError)) else f"{guards._typename(e)}: {guards._said(e)})")
    except OSError as e:
        return f" (it cannot be read: {e.strerror or e})"
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in getattr(node, "targets", [getattr(node, "target", None)]):  # a name given a lambda or a
                pairs = zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple) and isinstance(  # partial
                    node.value, ast.Tuple) else [(target, node.value)]  # ("a, b = (lambda r: ...), (lambda r: ...)")
                found += [t.id for t, v in pairs if isinstance(t, ast.Name) and (isinstance(v, ast.Lambda) or isinstance(
                    v, ast.Call) and ast.unparse(v.func).split(".")[-1] == "partial")]
        elif isinstance(node, ast.If) and re.fullmatch(r"__name__ == '__main__'|'__main__' == __name__",
                                                       ast.unparse(node.test)):
            todo += node.orelse  # (not what runs only as a script: its import skips that)
        elif not isinstance(node, ast.ClassDef):
            todo += [n for n in ast.iter_child_nodes(node) if isinstance(n, (ast.stmt, ast.excepthandler, ast.match_case))]
    found.sort(key=lambda name: name.startswith("_"))  # a helper's name (_base) last
    return f" (it defines: {', '.join(found)})" if found else " (it defines no function outside a class or function)"


def _file_spec(spec: str, file: pathlib.Path | None = None) -> Named:
    """'path/mine.py:fn[:args]', its file at `file` where given (a worker's, as named in the parent)."""
    path, _, rest = spec.partition(".py:")
    fname, _, args = rest.partition(":")
    file = file or pathlib.Path(path + ".py").expanduser()  # '~/pols/mine.py:fn' from a script, as a shell reads it
    fn = _from_file(file, fname)
    bound = _bind(fn, [a for a in args.split(",") if a], spec, fname)
    return dataclasses.replace(bound, where=os.path.abspath(file))  # (a link keeps its name: one to a file of no .py)


def _bind(fn, args, spec, named_as=None) -> Named:
    """fn as a policy, `args` bound to its parameters in order; named_as: the name a file spec gave it ('part' of
    'p.py:part'), the display name of a partial of a private function (`part = partial(_scaled, s=1.0)`)."""
    fname = guards.policy_name(fn)
    try:  # a __wrapped__ that loops, or a callable of no signature
        first = next(iter(inspect.signature(fn.func).parameters), None) if functools.partial in type(fn).__mro__ else None
        params = list(_signature(fn).parameters.values())
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # a __signature__ or __getattr__ of its own that raises (or exits)
        raise ValueError(f"policy {fname}: its parameters cannot be read ({guards._typename(e)}: {guards._said(e)})") from None
    if first == "rows" and fn.args:  # partial(sink, 8): 8 is bound to rows, not to sinks
        raise ValueError(f"policy {fname}: functools.partial({fname}, {', '.join(map(repr, fn.args))}) binds its first "
                         f"parameter, {first}, the rows a policy is called with: give its parameters by keyword")
    reads_ahead = [p.name for p in params[:2]] == ["model", "tokens"]
    free = [p for p in (params[2:] if reads_ahead else params[1:])  # what a spec may set: not *args, **kwargs,
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]    # which a keyword cannot reach
    if len(args) > len(free):
        raise ValueError(f"policy {spec or fname!r}: {fname} takes {len(free)} parameter(s) "
                         f"({', '.join(p.name for p in free) or 'none'}), got {len(args)}")
    who = spec or fname
    chain = [fn]  # a partial, of a partial...: each level's ranges, the innermost function's first
    while functools.partial in type(chain[-1]).__mro__:  # its real type: a __class__ of its own says partial
        if len(chain) > 100:  # no policy is written so; its innermost range would go unread
            raise ValueError(f"policy {who!r}: partials nested more than 100 deep; give the function fewer layers")
        chain.append(functools.partial.func.__get__(chain[-1]))  # what partial calls, not a subclass's property
    ranges = {}
    for level in reversed(chain):  # each within the one it wraps
        for key, (lo, hi) in (_attribute(level, "ranges", None, who) or {}).items():
            was = ranges.get(key, (lo, hi))
            if max(lo, was[0]) > min(hi, was[1]):
                raise ValueError(f"policy {who!r}: its range for {key}, {lo} to {hi}, does not meet its function's, "
                                 f"{was[0]} to {was[1]}")
            ranges[key] = (max(lo, was[0]), min(hi, was[1]))
    read = {p.name: _default(p, who) for p in free}  # each default read once, as the plain value it stands for
    kw, keyed = {}, False
    for p, a in zip(free, args):  # 'sink:8' or 'sink:sinks=8'
        if "=" not in a and keyed:  # 'two:b=5,7': which parameter 7 is would be a guess
            raise ValueError(f"policy {spec or fname!r}: {a!r} comes after a key=value: name it too")
        keyed = keyed or "=" in a
        key, value = a.split("=", 1) if "=" in a else (p.name, a)
        if key not in [q.name for q in free]:
            raise ValueError(f"policy {spec or fname!r}: {fname} has no parameter {key!r}")
        if key in kw:  # 'tova_protected:4,sinks=8': the first argument is sinks already
            raise ValueError(f"policy {spec or fname!r}: {key} is given twice")
        default = read[key]
        if type(default) is bool:  # bool('False') is True: a flag is spelled out
            if value.lower() not in ("true", "false"):
                raise ValueError(f"policy {spec or fname!r}: {key} must be true or false, got {value!r}")
            kw[key] = value.lower() == "true"
            continue
        if isinstance(default, str):  # a word stays the word: 'how=1e3' is the text 1e3, not a thousand
            kw[key] = value
            continue
        if default is None and value.lower() == "none":  # 'k=None' gives back the default, not the text 'None'
            kw[key] = None
            continue
        kw[key] = _number(value)
        kw[key] = kw[key] + 0 if isinstance(kw[key], float) else kw[key]  # -0.0 is 0.0: one label and one cache key
        lo, hi = ranges.get(key, (-math.inf, math.inf))
        kind = None if (plain := _plain(default)) is None else type(plain)  # numpy's and a 0-d tensor's too
        if kind is None and isinstance(kw[key], float) and not math.isfinite(kw[key]):  # k=None: no number named
            raise ValueError(f"policy {spec or fname!r}: {key} must be a finite number, got {value!r}")
        number = isinstance(kw[key], (int, float)) and math.isfinite(kw[key])  # nan, inf: no parameter's value
        if kind is not None and not (number and kw[key] == kind(kw[key]) and lo <= kw[key] <= hi):
            want = f"{'an integer' if kind is int else 'a number'} from {lo} to {hi}".replace("inf", "∞")
            raise ValueError(f"policy {spec or fname!r}: {key} must be {want}, got {value!r}")
        if kind is not None:
            kw[key] = kind(kw[key])  # 'sink:4.0' is sink:4, 'h2o:recent=1' is recent=1.0: one label and one cache key
    missing = [p.name for p in free if p.default is inspect.Parameter.empty and p.name not in kw]
    if missing:
        raise ValueError(f"policy {spec or fname!r}: {', '.join(missing)} of {fname} has no default: "
                         f"give {'it' if len(missing) == 1 else 'them'} as {spec or fname}:" + ",".join(f"{m}=..." for m in missing))
    defaults = {k: d if type(d) is bool or _plain(d) is None else _plain(d) for k, d in read.items()}  # 'sink:4' is
    # 'sink': one label and one key for one policy (a default of np.int64(4) or np.bool_ too)
    kw = {k: v for k, v in kw.items() if not (type(v) is type(defaults[k]) and v == defaults[k])}
    bound = {k: kw.get(k, read[k]) for k in read}  # what runs, as read once
    if stray := sorted(set(ranges) - {p.name for p in free}):  # a range never checked
        raise ValueError(f"policy {who!r}: its ranges name {', '.join(stray)}, which {fname} takes as no parameter "
                         f"(it takes {', '.join(p.name for p in free) or 'none'})")
    for key, (lo, hi) in ranges.items():  # what runs: a default, or a value of a parameter whose default is None, as
        v = bound[key] if type(bound[key]) in (int, float) else _plain(bound[key])  # a plain number (a default of its
        # own class could say yes to any comparison; a setting of 300 digits is a setting)
        given = key in kw and kw[key] is not None
        if (v is not None and not lo <= v <= hi) or (given and v is None):  # a default of another kind (Fraction) stays
            raise ValueError(f"policy {who!r}: {key} is {bound[key]!r}" + ("" if key in kw else " (its default)") +
                             f", not a number from {lo} to {hi} (its range)".replace("inf", "∞"))
    text = next((t for level in chain if (t := _attribute(level, "label", None, who)) is not None),  # `is None`: a
                next((n for level in chain[:-1] if type(n := _partial_dict(level).get("__name__")) is str),  # label's own
                     guards.policy_name(chain[-1])))  # __bool__ never runs; the first label, or name, along the chain
    if named_as and len(chain) > 1 and text == guards.policy_name(chain[-1]) and text.startswith("_"):
        text = named_as  # (a legend leaves out a name that starts with '_')
    if str not in type(text).__mro__:  # its real type: a __class__ of its own says str to isinstance
        raise ValueError(f"policy {spec or fname!r}: its label is a string (policies.label(\"...\")), got "
                         f"{type(text).__name__}")
    text = str.__str__(text)  # a plain str: no method of a subclass of its own runs below
    try:
        shown = text.format(**bound)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # @label("Mine {kk}") of a function with no parameter kk, or a format of its own
        raise ValueError(f"policy {spec or fname!r}: its label {text!r} cannot be filled from its parameters "
                         f"({', '.join(bound) or 'none'}): {guards._typename(e)} {guards._said(e)}") from None
    extra = {k: v for k, v in kw.items() if "{" + k + "}" not in text}
    if extra:
        shown += " (" + ", ".join(f"{k} {v}" for k, v in extra.items()) + ")"
    shown = unicodedata.normalize("NFC", shown)  # 'Cafe\u0301' is 'Café': one name, as a table shows both
    if len(shown) > 1000:  # every table and legend shows it whole (a number of 300 digits is a setting)
        raise ValueError(f"policy {who!r}: its display name is {len(shown):,} characters; give a shorter one "
                         "(policies.label(\"...\"))")
    if shown.startswith("_"):  # matplotlib leaves such a line out of its legend: drawn, but not named
        raise ValueError(f"policy {spec or fname!r}: its display name {shown!r} starts with '_', which the plots' legends "
                         "leave out; give it another with policies.label(\"...\")")
    broken = not all(c.isprintable() for c in shown) or "|" in shown  # a new line or a '|' splits a table's row
    broken = broken or any(ord(c) in UNSEEN for c in shown)  # drawn as nothing: 'TOVA\ufe0f' reads as TOVA
    blank = not any(unicodedata.category(c)[0] in "LNPS" and ord(c) not in UNSEEN for c in shown)  # spaces, a lone accent
    if blank or "$" in shown or broken or shown != shown.strip():  # matplotlib reads $...$ as mathematics; 'shorter '
        raise ValueError(f"policy {spec or fname!r}: its display name {shown!r} is " +  # shows as the sweep's 'shorter'
                         ("blank" if blank else "not one line of printable text without '|' or characters drawn as "
                          "nothing (a table's row)" if broken
                          else "not drawn as written (a '$' starts matplotlib's mathematics)" if "$" in shown
                          else "padded with spaces (in a table it reads as the name without them)") +
                         "; give it another with policies.label(\"...\")")
    policy = guards.wraps(fn)(functools.partial(fn, **kw)) if kw else fn
    return Named(spec, shown, policy, reads_ahead)


def _signature(fn) -> inspect.Signature:
    """fn's own parameters; a functools.wraps wrapper's are its wrapped function's only where it passes its keywords
    on (**kwargs): one that fixes them (sink(rows, sinks=1)) was read as sink's, sinks=4, and labelled Window+4."""
    own = inspect.signature(fn, follow_wrapped=False)
    passes = any(p.kind is p.VAR_KEYWORD for p in own.parameters.values())
    return inspect.signature(fn) if passes else own


def _partial_dict(partial) -> dict:
    """A partial's own attributes, read through partial's slot (a subclass's __dict__ property never runs)."""
    got = functools.partial.__dict__["__dict__"].__get__(partial)
    return got if type(got) is dict else {}


def _number(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _attribute(fn, name: str, default, spec):
    """fn's label or ranges (policies.label, a parameter's range), or an error that names the policy: a property of
    a policy's class may raise; ranges must map a parameter to (low, high)."""
    try:
        value = getattr(fn, name, default)
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        raise ValueError(f"policy {spec!r}: reading its {name} raised {guards._typename(e)}: {guards._said(e)}") from None
    if name != "ranges" or value is None:
        return value
    pairs = {k: tuple(map(_plain, r)) for k, r in value.items() if type(k) is str and type(r) in (tuple, list) and
             len(r) == 2} if type(value) is dict else {}
    if type(value) is not dict or len(pairs) != len(value) or any(None in r or r[0] > r[1] for r in pairs.values()):
        try:
            shown = f"{value!r:.80}"
        except KeyboardInterrupt:
            raise
        except BaseException:  # an integer of more than 4,300 digits, or a repr of its own that raises
            shown = "that cannot be printed"
        raise ValueError(f"policy {spec!r}: its ranges map a parameter to (low, high), low <= high, numbers below 2**62 or "
                         f"±inf, as policies.label(\"...\", k=(1, 64)) does; got {type(value).__name__} {shown}")
    return pairs


def _default(p, who):
    """A parameter's default as the plain value it stands for: numpy's numbers and numpy's or torch's one-element
    arrays by their element, read once (their own classes only: a subclass's item() could say 5 and hold 500,
    or change between reads); anything else as it is."""
    x, mro = p.default, type(p.default).__mro__
    if np.generic in mro:  # numpy's own reading of a scalar: a subclass's item() or __float__ never runs
        try:
            return guards.numpy_value(x)
        except TypeError as e:
            raise ValueError(f"policy {who!r}: the default of {p.name}: {e}") from None
    own = type(x) in (torch.Tensor, np.ndarray)
    if not own and (torch.Tensor in mro or np.ndarray in mro):
        raise ValueError(f"policy {who!r}: the default of {p.name} is of a class of its own ({guards._typename(x)}), "
                         "made from numpy's or torch's: give a plain number or bool")
    if type(x) is np.ndarray and x.dtype.kind not in "biufcUS":  # an object array's item() is whatever it holds
        raise ValueError(f"policy {who!r}: the default of {p.name} is a numpy array of {x.dtype} values: give a plain "
                         "number or bool")
    if own and (x.numel() if type(x) is torch.Tensor else x.size) == 1:
        try:
            return x.item()  # np.array(False) is a flag, torch.tensor([5]) the number 5
        except Exception as e:  # a tensor on the meta device holds no value
            raise ValueError(f"policy {who!r}: the default of {p.name} cannot be read as a value "
                             f"({guards._typename(e)}: {guards._said(e)})") from None
    return x


def _plain(x):
    """A range's bound as a plain int or float (a subclass's own comparisons never run), or None: not a number,
    NaN, or an integer past 2**62 (10**5000 cannot even be printed); ±inf is no bound."""
    if np.generic in type(x).__mro__:
        try:
            x = guards.numpy_value(x)  # numpy's own reading: a subclass's never runs
        except TypeError:
            return None
    elif type(x) is torch.Tensor and x.dim() == 0:
        try:
            x = x.item()
        except Exception:  # a tensor on the meta device: no number
            return None
    kind = next((k for k in (bool, int, float) if k in type(x).__mro__), None)  # its real type, not its __class__
    if kind in (None, bool):
        return None
    x = int.__int__(x) if kind is int else float.__float__(x)
    return x if x == x and (kind is float or abs(x) < 2**62) else None


_PACKAGES = ("engine", "lab", "t2r", "data", "course")  # the project's folders of modules: namespace packages


_ONE = threading.RLock()  # keys and policy files' imports, one at a time (the same thread may nest them)
_LOADING = set()  # the policy files being imported now (by the thread that holds _ONE)
_IMPORTED = {}  # a policy file's resolved path -> (what its key reads from disk, its module, the modules it holds)


def _held(module) -> list:
    """(name, module) for the module and each module it holds, by the name each was loaded under (a held object
    that only claims to be a module, or an odd name, raises: the file is then imported again each time)."""
    held = [m for m in (module, *vars(module).values()) if types.ModuleType in type(m).__mro__]
    names = [types.ModuleType.__getattribute__(m, "__dict__").get("__name__") for m in held]
    if not all(type(n) is str for n in names):
        raise ValueError("a module of no name")
    return list(zip(names, held))


_LOADED = {}  # a user's module by its name -> (the module, the fingerprint of its file when a policy file's import loaded it)
_SCOPE = set()  # the files of the policy files' helpers named in this process (resolved): what their keys read
# (harness.sources) and the modules their imports loaded, hold or name (_helpers). The only modules of the user's that
# _fresh looks at and forgets (a notebook's own, a library on PYTHONPATH, the user's script are none of its business)


def _users_name(name) -> bool:
    """A module name a policy's helper may have: none of the project's (the grader's students load their llama.py as
    llama: never forgotten, or two llamas would meet), nor a policy file's own module (its functions pickle by it),
    nor the program's (__main__, and multiprocessing's name for it). A helper named like a module of Python's (the
    student's trace.py) is the user's: its file tells (`_users_file`)."""
    return type(name) is str and name not in ("__main__", "__mp_main__") and name.split(".")[0] not in PROJECT_MODULES


def _module_dict(m) -> dict:
    try:  # sys.modules may hold anything; a module's own attributes are not trusted
        return types.ModuleType.__getattribute__(m, "__dict__")
    except Exception:
        return {}


def _users_file(name, m) -> str | None:
    """The file of a loaded module that is a policy file's helper: by a user's name (`_users_name`), from a file of
    `_SCOPE` that is neither installed nor the repository's own code."""
    file = _module_dict(m).get("__file__")
    if not _users_name(name) or type(file) is not str or file.startswith(INSTALLED):
        return None
    try:
        resolved = pathlib.Path(file).resolve()
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL
        return None
    return file if resolved in _SCOPE and not harness.ours(resolved) else None


def _started() -> float:
    """When this process started (Linux's /proc), or 0 where it cannot be told: a module first seen whose file changed
    after it may have been imported before the change."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/stat") as boot:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks after boot
            return next(int(line.split()[1]) for line in boot if line.startswith("btime")) + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return 0.0


_STARTED = _started()


_SEEN = (0.0, frozenset())  # when the last refresh ended, and the modules loaded then


def _as_imported(name: str, file: str) -> bool:
    """Whether a module first seen (a notebook imported it, or a policy's call) is its file as it is now: a file
    unchanged since this process started, or since the last refresh where the module was loaded after it (a policy's
    call imported it), or one Python wrote bytecode for after its last change (the .pyc's header names the source's
    second and size, and the .pyc is not older than it). Else it may be older than its file."""
    try:
        source = os.stat(file)
        changed = max(source.st_mtime_ns, source.st_ctime_ns)  # a copy kept its old date (cp -p, unzip): not its ctime
        whole = 1 if changed % 10**9 == 0 else 0  # a file system that keeps whole seconds (HFS+) dates a later write earlier
        if changed / 1e9 < _STARTED or name not in _SEEN[1] and changed / 1e9 < _SEEN[0] - whole:
            return True
        pyc = importlib.util.cache_from_source(file)
        with open(pyc, "rb") as f:
            head = f.read(16)
        written = os.stat(pyc).st_mtime
    except (OSError, ValueError, NotImplementedError):  # no bytecode (PYTHONDONTWRITEBYTECODE): it may be older
        return False
    return len(head) == 16 and head[4:8] == bytes(4) and written >= source.st_mtime and \
        head[8:16] == (int(source.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (source.st_size & 0xFFFFFFFF).to_bytes(4, "little")


def _print(file: str):
    """The fingerprint of a module's file as an import would read it now: None where it went, or where a package of
    its name now stands beside it (Python imports that one)."""
    path = pathlib.Path(file)
    if path.name != "__init__.py" and (path.parent / path.name.split(".")[0] / "__init__.py").is_file():
        return None
    try:
        return harness.fingerprint(path)
    except OSError:  # gone
        return None


def _namespace(name, m) -> bool:
    """A namespace package of a policy's helpers (a folder of modules without __init__.py, one a key reads): it holds
    its modules as attributes, so `from ns import h` reads an edited h's old module until the package is forgotten too."""
    d = _module_dict(m)
    try:
        folders = list(d.get("__path__", None) or ()) if d.get("__file__") is None else []
        if not (_users_name(name) and folders and all(type(p) is str and not p.startswith(INSTALLED) for p in folders)):
            return False
        return bool({pathlib.Path(p).resolve() for p in folders} & {f.parent for f in _SCOPE})
    except Exception:  # a __path__ of the user's own that raises; a folder that cannot be resolved
        return False


def _fresh():
    """Make the user's modules a policy file imports what their files hold now. Where one of the policies' loaded
    helpers (the modules of `_SCOPE`'s files) changed, went, or became a package's since it was first seen,
    every one of them is forgotten, and their namespace packages with them, so that the next import reads them all afresh:
    a helper that imports an edited helper, a package that holds an edited module as an attribute, a link whose
    target changed, a helper in the repository's root or in course/work. All at once: which of them read which
    cannot be told from outside."""
    mine = {n: (m, f) for n, m in list(sys.modules.items()) if (f := _users_file(n, m))}  # every policy's: a helper
    # loaded at another policy's call and edited is first seen here, not at that policy's next naming
    now = {n: _print(f) for n, (m, f) in mine.items()}  # each file read once
    unsure = []
    for n, (m, f) in mine.items():  # one first seen (the user's script, or a policy's call, imported it): as it is now,
        if n not in _LOADED:  # unless it may be older than its file
            _LOADED[n] = m, now[n] if _as_imported(n, f) else None
            unsure += [] if _LOADED[n][1] or now[n] is None else [f"{n} ({f})"]  # (one gone: nothing to say)
    if any(_LOADED[n][0] is not m or _LOADED[n][1] != now[n] for n, (m, _) in mine.items()) \
            or any(n not in mine for n in _LOADED):
        if unsure:  # a notebook's module, written since the kernel started, where Python wrote no bytecode to compare
            print(f"[msrnn] warning: imported again for the policy, as its file is now: {', '.join(unsure)}, which "
                  "changed after this process started (no bytecode tells whether the loaded module is its file): "
                  "what this session set on the loaded one, the policy does not read", file=sys.stderr)
        if held := sorted(n for n, (m, _) in mine.items() if _LOADED[n][1] == now[n] and _in_session(m)):
            print(f"[msrnn] warning: a helper changed, and the policy's helpers are imported again with it, as their files "
                  f"are: {', '.join(held)} too, which this session holds: what it set on them (a value, a patch), the "
                  "policy does not read", file=sys.stderr)
        for n in {*mine, *_LOADED, *(n for n, m in list(sys.modules.items()) if _namespace(n, m))}:
            sys.modules.pop(n, None)
        for m, f in mine.values():  # and their bytecode: edited to the same size within a second, Python reads the old
            try:
                os.remove(importlib.util.cache_from_source(f))
            except (OSError, ValueError, NotImplementedError):
                pass
        _LOADED.clear()
    global _SEEN
    _SEEN = time.time(), frozenset(sys.modules)  # a module loaded after this from a file older than it is that file


def _in_session(m) -> bool:
    """Whether the notebook's or the script's names hold a module, or what it defines that a setting can change (a
    dict, a list, a class, a function: `from cfg import CONFIG; CONFIG["alpha"] = -1`), or a package that holds it."""
    own = [v for k, v in _module_dict(m).items() if not k.startswith("__") and not isinstance(v, (int, float, complex,
                                                                                                str, bytes, tuple, type(None)))]
    for v in list(_module_dict(sys.modules.get("__main__")).values()):
        if v is m or any(v is x for x in own) or \
                types.ModuleType in type(v).__mro__ and any(x is m for x in _module_dict(v).values()):  # cfgpkg.knobs
            return True
    return False


def _file(m) -> pathlib.Path:
    """A helper module's file, resolved as `_SCOPE` holds it."""
    return pathlib.Path(_module_dict(m)["__file__"]).resolve()


def _loaded(modules: dict):
    """Record modules of the user's that a policy's import or call (the key's probe: a helper's lazy import) loaded just
    now: watched, as their files are now (no bytecode needed to vouch for them, where Python writes none)."""
    for n, m in modules.items():
        _SCOPE.add(_file(m))
        _LOADED[n] = m, _print(_module_dict(m)["__file__"])


def _widen():
    """Add to `_SCOPE` the loaded modules of the user's that its files import or name (a helper's helper imported in a
    function's body, whoever loaded it first: the notebook, a call, the key's probe, the checker), and theirs in turn."""
    todo = list(_SCOPE)
    while todo:
        for m in _helpers(set(sys.modules), None, [todo.pop()]).values():
            if (file := _file(m)) not in _SCOPE:
                _SCOPE.add(file)
                todo.append(file)


def _helpers(before: set, module, code) -> dict:
    """{name: module} of the user's modules a policy file's import brought in or names: what it loaded (importlib, a
    folder on sys.path), what it holds (a helper module, the module of a function or class it imported) and what its
    sources' import statements name (a helper a notebook imported first). Python's source files only, never a package
    with compiled code (numpy on PYTHONPATH: its C code cannot load twice), Python's own, an installed one or ours."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    compiled = {n.split(".")[0] for n, m in list(sys.modules.items())
                if isinstance(f := _module_dict(m).get("__file__"), str) and f.endswith(suffixes)}
    held = [] if module is None else [x for x in _module_dict(module).values() if inspect.isfunction(x) or inspect.isclass(x)
                                      or types.ModuleType in type(x).__mro__]
    named = [_module_dict(x).get("__name__") if types.ModuleType in type(x).__mro__ else x.__module__ if
             inspect.isfunction(x) else inspect.getattr_static(x, "__module__", None) for x in held]  # a forged
    # __name__ or __module__ (a list, a property) names nothing
    parsed = [(f, *harness._code_of(f.read_bytes())) for f in code if f.is_file()]  # (one gone since: nothing to name)
    imported = [n for f, imports, _ in parsed for n in _absolute(f, imports)]
    names = (set(sys.modules) - before) | {n for n in named if type(n) is str} \
        | {".".join(n.split(".")[:i]) for n in imported for i in range(1, n.count(".") + 2)} \
        | {s for _, _, strings in parsed for s in strings if s in sys.modules}  # importlib's 'hlp7'
    found = {}
    for n in names:
        f = _module_dict(m := sys.modules.get(n)).get("__file__") if n in sys.modules else None
        if _users_name(n) and isinstance(f, str) and f.endswith(".py") and not f.startswith(INSTALLED):
            try:
                if not harness.ours(pathlib.Path(f).resolve()):
                    found[n] = m
            except (OSError, RuntimeError, ValueError):
                pass
    if kept := sorted({n.split(".")[0] for n in found if n.split(".")[0] in compiled} - _COMPILED):
        _COMPILED.update(kept)  # said once: an edit of its Python files is read by a new process only
        print(f"[msrnn] note: {', '.join(kept)} (a policy's helper) has compiled parts, which cannot load twice: this "
              "process keeps it as first imported, so an edit of its files is read by a new process", file=sys.stderr)
    return {n: m for n, m in found.items() if n.split(".")[0] not in compiled}


_COMPILED = set()  # the user's packages with compiled parts a policy uses that were named as never refreshed


def _absolute(file: pathlib.Path, imports) -> list[str]:
    """The modules a file's import statements name, a relative one (`from .core import W`) by its full name, read
    against the package of the loaded module that file is (a helper package's own modules, wherever it is on sys.path)."""
    relative = [n for n in imports if n.startswith(".")]
    package = next((n if file.name == "__init__.py" else n.rpartition(".")[0] for n, m in list(sys.modules.items())
                    if relative and _is_file(_module_dict(m).get("__file__"), file)), None)
    found = [n for n in imports if n and n[0] != "."]
    for n in relative if package else ():  # a top-level module's relative import fails in Python too
        try:
            found.append(importlib.util.resolve_name(n, package))
        except (ImportError, ValueError):  # beyond the top-level package
            pass
    return found


def _is_file(name, file: pathlib.Path) -> bool:
    try:
        return type(name) is str and os.path.basename(name) == file.name and pathlib.Path(name).resolve() == file
    except (OSError, RuntimeError, ValueError):
        return False


def _from_file(path, fname):
    with _ONE:  # one import at a time: another thread naming the file waits for it, then finds it imported
        return _imported_from(path, fname)


def _imported_from(path, fname):
    if not path.is_file():
        raise ValueError(f"policy file {path} {_missing(path)}")
    path = path.resolve()  # one file, one module (a link's helpers are its file's); two files of one name, two
    module_spec = userfiles.spec(path)
    code = harness.sources(path)  # what its key reads from disk: its code, its helpers', the data files they name
    if shadows := [p for n in _PACKAGES for x in importlib.machinery.all_suffixes()  # .py, .pyc, .so too
                   for p in (f"{n}{x}", f"{n}/__init__{x}") if (path.parent / p).is_file()] + \
            [f"{n}/" for n in _PACKAGES if path.parent != harness.ROOT and (path.parent / n).is_dir()  # a folder joins it
             and not any((path.parent / n / f"__init__{x}").is_file() for x in importlib.machinery.all_suffixes())
             and any(f.is_relative_to((path.parent / n).resolve()) for f in code)]:  # and the policy imports from it
        # (data.myh57: a helper under a project name is never forgotten); a data/ of texts, or the course's copy of
        # t2r/ beside its work, is no business of the policy's
        raise ValueError(f"policy file {path}: its folder holds {', '.join(shadows)}, which a worker process would import "  # a
                         "in place of the project's folder of that name (the pooled run never ended): rename it")  # namespace
        # package loses to a module of its name anywhere on sys.path, and the policy's folder joins it
    if str(path.parent) not in sys.path:  # its own helpers import from beside it, as the key counts them;
        sys.path.append(str(path.parent))  # last, so that a copy of policies.py there shadows nothing
    # named again ('mine.py:fn', then 'mine.py:fn:k=3'), what its key reads from disk and the modules it holds
    # unchanged: the same module (importing it again keyed the first policy anew, and a pooled sweep refused it)
    disk, held = harness.fingerprint(*code, *harness.data_files(*code)), _IMPORTED.get(str(path))
    _SCOPE.update(f.resolve() for f in code)
    _widen()  # and what they import, named or in a function's body, loaded since
    _fresh()  # its helpers as their files are now
    before = set(sys.modules)
    if held and held[0] == disk and all(sys.modules.get(n) is m for n, m in held[2]):
        module = held[1]
    else:
        if path in _LOADING:  # its top level names its own policy (an unguarded self-test): it would load for ever
            raise ValueError(f"{path.name} names its own policy while it is imported (a self-test at its top level?): "
                             "put that under `if __name__ == \"__main__\":`")
        module = importlib.util.module_from_spec(module_spec)
        module.__package__ = ""  # no package of its own: "from .. import zoo" would read lab/ (userfiles._Loader)
        sys.modules[module_spec.name] = module  # so that its functions pickle, for worker processes
        writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ file for its helpers: one
        try:  # edited to the same size within a second, Python reads the old file; and its own, the bytes its key hashed
            body = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
            _LOADING.add(path)
            with guards.imported(path):  # what its import changes is put back, and named
                exec(body, module.__dict__)
        except BaseException as e:
            sys.modules.pop(module_spec.name, None)  # no half-run module left for a worker to find, and no helper
            for name in _helpers(before, None, ()):  # whose import failed or changed a setting left to pass the next time
                sys.modules.pop(name, None)
            if isinstance(e, (KeyboardInterrupt, guards.ImportChanged)) or guards.from_handler(e):  # the
                raise  # user's Ctrl-C (or the file's own: the two cannot be told apart); a setting it changed, named; a
                # signal's handler's (the script's sys.exit, its TimeoutError)
            # sys.exit() or a BaseException of its own at import: the file's failure, not the command's end
            top = (getattr(e, "name", None) or "").split(".")[0] if isinstance(e, ImportError) else ""  # "No module
            # named 'test.scoring'", or "cannot import name 'W' from 'test'"
            if top and ((path.parent / top).is_dir() or (path.parent / f"{top}.py").is_file()) and \
                    (other := getattr(sys.modules.get(top), "__file__", None) or getattr(sys.modules.get(top), "__path__", None)):
                raise ValueError(f"{path} imports {e.name}, and {top} is beside it, but Python found its own {top} "  # e.g. a
                                 f"({other}) first: give the one beside {path.name} another name") from None  # test/
            alone = "; a policy file is read alone, as a script is: import its helpers by their names (`from " \
                "helpers import W`, its folder is on the path)" if "relative import" in str(e) else ""  # (`from . import`)
            said = guards._said(e) or ("its code nested too deep for Python's parser?" if isinstance(e, MemoryError)
                                       else "(no message)")
            raise ValueError(f"could not import {path}: {guards._typename(e)}: {said}{alone}") from None
        finally:
            sys.dont_write_bytecode = writes
            _LOADING.discard(path)
        helpers = _helpers(before, module, code)  # beyond what its key read: importlib's, a folder on sys.path
        _SCOPE.update(map(_file, helpers.values()))
        _loaded({n: m for n, m in helpers.items() if n not in before})
        try:  # imported again when one of its helpers is forgotten
            _IMPORTED[str(path)] = disk, module, _held(module) + sorted(helpers.items())
        except Exception:  # what it holds cannot be read back safely: imported again when named again
            _IMPORTED.pop(str(path), None)
    _own_helpers(path)
    try:
        fn = getattr(module, fname, None)
    except BaseException as e:  # a module __getattr__ of the file's own that raises, or exits
        if isinstance(e, KeyboardInterrupt) or guards.from_handler(e):
            raise
        raise ValueError(f"{path}: reading {fname!r} raised {guards._typename(e)}: {guards._said(e)}") from None
    if not callable(fn):
        found = [n for n, f in vars(module).items() if inspect.isfunction(f) and f.__module__ == module.__name__]
        raise ValueError(f"{path} has no function {fname!r} (it defines: {', '.join(found) or 'none'})")
    return fn

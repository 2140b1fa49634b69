"""Checks at the boundary: every entry point (llama.forward; msrnn.run, feed, generate, masked_forward;
fast.prefill, fast.generate) checks its inputs here, once, so that the step itself stays the equation
and a bad input gets a message that names it rather than a wrong answer (a negative token id would
silently index the last rows of the embedding). Nothing here changes a result: test_inputs.py."""
import collections
from concurrent import futures
import contextlib
from collections import abc
import dataclasses
import functools
import gc
import hashlib
import inspect
import io
import itertools
import json
import math
import operator
import os
import re
import signal
import _signal as signal_c  # what signal.signal and getsignal call: a script's `from signal import signal` too
import site
import sys
import sysconfig
import _thread
import threading
import traceback
import types
import warnings
import weakref

import numpy as np
import torch
import torch.utils._device  # torch's default device (put_back)
import torch.utils.deterministic


def check_tokens(model, tokens, dims=(1, 2)) -> torch.Tensor:
    """tokens as (B, T) on the model's device: an integer tensor (T,) or (B, T), on any device, T >= 1,
    of ids 0 <= id < vocab_size."""
    if not isinstance(tokens, torch.Tensor) or tokens.dtype.is_floating_point or tokens.dtype.is_complex \
            or tokens.dtype == torch.bool:
        got = tokens.dtype if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(f"tokens must be an integer tensor of token ids, got {got}")
    if tokens.dim() not in dims or tokens.shape[-1] == 0 or tokens.numel() == 0:
        want = " or ".join({1: "(T,)", 2: "(B, T)"}[d] for d in dims)
        raise ValueError(f"tokens must have shape {want} with at least one token, got {tuple(tokens.shape)}")
    if tokens.device.type == "meta" and model.device.type != "meta":
        raise ValueError(f"tokens are on the meta device, which holds no values; the model is on {model.device}")
    if tokens.dtype not in (torch.int32, torch.int64):  # uint8 would index as a mask, int8 not at all, and aminmax
        tokens = tokens.to(torch.long)                    # has no uint16-64: as int64 (uint64 past 2**63: negative)
    if tokens.device.type != "meta":  # meta tensors (test_devices.py) have shapes but no values
        lo, hi = tokens.aminmax()
        if lo < 0 or hi >= model.config.vocab_size:
            bad = lo.item() if lo < 0 else hi.item()
            raise ValueError(f"token id {bad} is outside the vocabulary (0 <= id < {model.config.vocab_size})")
    return (tokens.view(1, -1) if tokens.dim() == 1 else tokens).to(model.device)


def check_forward(model, tokens, last) -> torch.Tensor:
    """llama.forward's arguments: tokens as check_tokens gives them, a length the model's RoPE was trained
    for (check_positions warns past it), `last` True or False."""
    check_flags(last=last)
    ids = check_tokens(model, tokens)
    check_positions(model, ids.shape[1])
    return ids


def check_logits(logits: torch.Tensor) -> torch.Tensor:
    """logits, checked finite: float16 overflows without a word (65504 is its largest number), and a
    policy's NaN check sees only the rows it is shown, which the full cache and Window never read."""
    if logits.device.type != "meta" and not torch.compiler.is_compiling() and \
            not torch.isfinite(logits.sum(dtype=torch.float64)) and \
            not torch.isfinite(logits).all():  # one number first, no copy the size of the logits; a sum of finite
        # float64 logits near 1e308 overflows, so its verdict is confirmed
        why = "overflowed its dtype (float16 ends at 65504: run in float32 or bfloat16), divided 0 by 0" \
            if logits.dtype == torch.float16 else "divided 0 by 0 or overflowed"
        raise FloatingPointError(f"the logits are not finite ({logits.dtype}): the computation {why} (a denominator "
                                 "not floored: a linear attention's is floored at EPS), or a weight is inf or NaN")
    return logits


def step_logits(step, t: int, logits, model, state, batch: int) -> torch.Tensor:
    """What a step of the caller's returned (msrnn.generate's `step`, which no guard may wrap) from position t:
    float logits (batch, vocab) on the model's device, checked finite, and the state one position on, or an error
    that names the step."""
    vocab, moved = model.config.vocab_size, state.t - t
    if not (isinstance(logits, torch.Tensor) and logits.dtype in SCORE_DTYPES and logits.layout == torch.strided
            and torch.promote_types(logits.dtype, model.dtype) == logits.dtype  # no digits lost below the model's
            and tuple(logits.shape) == (batch, vocab) and logits.device == model.device):
        got = f"{logits.dtype} {tuple(logits.shape)} on {logits.device} ({logits.layout})" \
            if isinstance(logits, torch.Tensor) else _typename(logits)
        raise ValueError(f"step {policy_name(step)} returned {got}; a step returns float logits ({batch}, {vocab}) in "
                         f"{model.dtype} or wider on {model.device}, as llama.step does")
    if moved != 1:
        raise ValueError(f"step {policy_name(step)} moved the state {moved} positions; a step reads one token and moves "
                         "it one on, as llama.step does")
    return logits if _checked(step) else check_logits(logits)  # llama.step's guard did


def _checked(step) -> bool:
    """Whether all_or_nothing made step (by identity: no flag a wrapper's functools.wraps could copy)."""
    try:
        mark = _CHECKED.get(step)
    except KeyboardInterrupt:
        raise
    except BaseException:  # unhashable, no weak reference to it, or a __hash__ of its own that raises: not one
        return False  # all_or_nothing made, so its logits are checked
    return mark is not None and mark() is step


def check_holds(maps):
    """Refuse T2R maps of no feature and no exact row read alone (t2r/linear.py's views) or trained (t2r/train.py):
    each swapped layer would attend to nothing (zero outputs, zero bytes, no weight to learn). r = 0 is a tail's
    test, read under a policy's rows by t2r/tail.py."""
    if maps.kind != "elu" and maps.r == 0 and not (maps.window or maps.sinks):
        raise ValueError("maps of r=0 with no window and no sinks hold nothing: each swapped layer would attend to "
                         "nothing; give r >= 1 (r = 0 is for a tail, read under TOVA's rows by t2r/tail.py)")


def check_maps(model, maps):
    """T2R's feature maps (t2r/linear.py) against the model: the layers they swap exist, and φ of this
    model's queries and keys (a zero probe each) gives features of the shape and dtype the state holds."""
    c = model.config
    if not all(integer(i) and 0 <= i < c.n_layers for i in maps.layers) or len(set(maps.layers)) != len(maps.layers):
        raise ValueError(f"the maps swap layers {maps.layers}; the model has {c.n_layers}, each swapped once")
    if other := [p.shape[0] for p in maps.parameters() if p.shape[0] != c.n_layers]:  # they would run, but a file of
        raise ValueError(f"the maps were made for a model of {other[0]} layers; this one has "  # them loads for no model
                         f"{c.n_layers}: build them from this model's config")
    for which, g in (("q", c.n_heads // c.n_kv_heads), ("k", 1)) if maps.layers else ():
        x = torch.zeros(1, c.n_kv_heads, g, 1, c.head_dim, dtype=model.dtype, device=model.device)
        try:
            f = maps.phi(maps.layers[0], x, which, [0])
        except RuntimeError as e:
            raise ValueError(f"the feature maps do not fit this model ({model.dtype}, {c.n_kv_heads} KV heads of "
                             f"{c.head_dim}): {e}") from None
        if tuple(f.shape) != (1, c.n_kv_heads, g, 1, maps.r) or f.dtype != model.dtype:
            raise ValueError(f"the feature maps give {which} features {f.dtype} {tuple(f.shape)}; this model needs "
                             f"{model.dtype} {(1, c.n_kv_heads, g, 1, maps.r)}")
    half = maps.decay and torch.finfo(maps.log_h.dtype).bits < 32  # γ = 1 there is an accident: maps moved to bfloat16
    gammas = [maps.gamma(i) for i in maps.layers] if maps.decay else []
    if any(g.isnan().any() or half and (g >= 1).any() for g in gammas):
        raise ValueError(f"the maps' decay is NaN, or 1 in {maps.log_h.dtype} (a horizon past what that float tells from 1), "
                         "at some layer: it would not decay as trained; keep decayed maps in float32, or shorter horizons")
    if not maps.rotated and not torch.equal(maps.inv_freq, model.inv_freq.to(maps.inv_freq)):
        # maps that turn q and k back before RoPE must turn them by this model's angles, not another config's
        raise ValueError("the feature maps turn q and k back by another RoPE (rope_theta or rope_scaling) than "
                         "this model's: build them from this model's config")


def check_training(epochs, minutes, **positive):
    """A training run's budget and rates: epochs a whole number >= 1, minutes None (no limit) or a number
    > 0 (0 was no limit, -1 trained nothing), and each of `positive` (rates, scale, LoRA's rank and alpha)
    a finite number > 0 (a negative rate climbs the loss), before any step; and gradients on."""
    if not torch.is_grad_enabled() or torch.is_inference_mode_enabled():  # else torch's words, far from the cause
        raise ValueError("training needs gradients: it was called under torch.no_grad() or torch.inference_mode()")
    if not integer(epochs) or epochs < 1:
        raise ValueError(f"epochs must be a whole number >= 1, got {epochs!r}")
    if minutes is not None and not (number(minutes) and minutes > 0):
        raise ValueError(f"minutes is a time budget > 0, or None for no limit; got {minutes!r}")
    for name, x in positive.items():
        if not (number(x) and x > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {x!r}")


def check_span(window, sinks, block=1, gamma=None, features=()):
    """The linear attentions' arguments, called directly (FeatureMaps checks its own): a negative window made every
    weight NaN, a block of 0 divided by zero, a decay above 1 or below 0 blew the state up, negative or integer
    features gave outputs of 1e7 or zeros."""
    if not (integer(sinks) and sinks >= 0 and integer(window) and window >= 0 and integer(block) and block >= 1):
        raise ValueError(f"window and sinks are numbers of rows, integers >= 0, and block an integer >= 1; got "
                         f"window={window!r}, sinks={sinks!r}, block={block!r}")
    if gamma is not None and not (isinstance(gamma, torch.Tensor) and gamma.is_floating_point()
                                  and bool(((gamma >= 0) & (gamma <= 1)).all())):  # 0: a horizon so short it underflows
        raise ValueError(f"a decay gamma is a float tensor of values in [0, 1], one per KV head; got {gamma!r:.80}")
    for f in features:
        if not (isinstance(f, torch.Tensor) and f.is_floating_point()) or bool((f < 0).any()):
            raise ValueError("features φ(q), φ(k) are float tensors >= 0 (a feature map's output: ReLU, softmax, ELU+1); "
                             f"got {f.dtype if isinstance(f, torch.Tensor) else type(f).__name__}"
                             + (" with negative values" if isinstance(f, torch.Tensor) and f.is_floating_point() else ""))


def index(x) -> int | None:
    """x as Python's int where it is an integer (numpy's and torch's too; not True or a mask's, no layer), else None."""
    if isinstance(x, bool) or isinstance(x, torch.Tensor) and x.dtype == torch.bool:  # a mask's True is no layer 1
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def check_layer(maps, i) -> int:
    """One of the layers the maps swap, as an int (numpy's and torch's integers too): Python's negative index read
    another layer's maps, and a layer the maps do not swap its untrained ones."""
    at = index(i)
    if at is None:
        raise ValueError(f"a layer is an integer, got {type(i).__name__} {i!r}")
    if at not in maps.layers:
        raise ValueError(f"layer {at}: the maps swap layers {maps.layers}")
    return at


def check_feature_maps(cfg, r, kind, kinds, window, sinks, layers, dtype, horizon, decay=False, rotated=True, seed=0):
    """t2r.linear.FeatureMaps' arguments, checked before anything is allocated: (the layers swapped, sorted;
    the dtype; the decay's starting horizon as a float64 tensor (n_layers, Hkv))."""
    n_layers, H, G, d = cfg.n_layers, cfg.n_kv_heads, cfg.n_heads // cfg.n_kv_heads, cfg.head_dim
    if kind not in kinds:
        raise ValueError(f"feature map kind must be 't2r' (Kasai et al.'s tied ReLU), 'relu' (ReLU, untied), "
                         f"'hedgehog' or 'elu' (ELU+1), got {kind!r}")
    if kind != "elu" and not (integer(r) and r >= 0):  # r = 0: no features, the exact rows alone (a tail's test)
        raise ValueError(f"r is a number of features, an integer >= 0; got {r!r}")
    if kind == "hedgehog" and (r % 2 or r < 4):  # r = 2: a softmax over one feature is 1, whatever x is
        raise ValueError(f"Hedgehog's map has r/2 features of Wx and r/2 of -Wx, each a softmax: r must be even "
                         f"and at least 4 (r = 2 makes every feature a constant 1), got {r}")
    check_flags(decay=decay, rotated=rotated)
    if not (integer(seed) and 0 <= seed < 2**63):
        raise ValueError(f"seed must be an integer from 0 to 2**63 - 1, got {seed!r}")
    if not (integer(sinks) and sinks >= 0 and integer(window) and window >= 0):  # True is no window of 1
        raise ValueError(f"window and sinks are numbers of rows, integers >= 0; got window={window!r}, sinks={sinks!r}")
    dtype = check_dtype(dtype)
    size = torch.finfo(dtype).bits // 8
    check_memory(n_layers * H * 2 * (window + sinks) * d * size, f"the exact rows of a window of {window} and {sinks} "
                 "sinks, per sequence")  # a state that could never be allocated
    check_memory(n_layers * H * (G + 1) * ((r if kind != "elu" else d) + 1) * (d + 1) * size,
                 f"feature maps of r={r} for {n_layers} layers")  # an absurd r
    try:  # a list, numpy's array or torch's tensor of them (np.argsort(...)[:k])
        given = list(range(n_layers)) if layers is None else list(layers)
    except TypeError:  # a bare 3: sorted() said "'int' object is not iterable"
        raise ValueError(f"layers is a list of layer numbers, got {layers!r}") from None
    layers = [index(i) for i in given]
    if not all(i is not None and 0 <= i < n_layers for i in layers):  # True is 1 to Python; -1 is no layer here
        raise ValueError(f"layers must be layer numbers from 0 to {n_layers - 1}, got {given}")
    layers = sorted(layers)
    if len(set(layers)) != len(layers):  # a layer twice would count its state twice
        raise ValueError(f"layers names a layer twice: {layers}")
    if horizon is not None and not decay:  # it was ignored without a word
        raise ValueError("a horizon sets where the decay starts: give decay=True with it (an undecayed state has none)")
    try:  # one horizon for all, or one per layer and KV head (t2r/length.py starts them from the teacher's attention)
        horizon = torch.as_tensor(4096.0 if horizon is None else horizon, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError, OverflowError):  # 10**400: past float64's range
        horizon = None
    if horizon is None or horizon.dim() and horizon.shape != (n_layers, H):  # (n_layers,) could pass for (Hkv,)
        raise ValueError(f"the decay's starting horizon is a number of tokens, or one per layer and KV head "
                         f"({n_layers}, {H}); got {horizon if horizon is None else tuple(horizon.shape)}")
    bad = ~(horizon > 1) | (~horizon.isfinite() if decay else False)  # inf decayed: γ = 1, a decay that never decays
    if bad.any():
        raise ValueError(f"the decay's starting horizon must be a finite number of tokens above 1, got "
                         f"{horizon[bad].flatten()[0].item()!r}")
    full, swapped = horizon.expand(n_layers, H), torch.zeros(n_layers, 1, dtype=torch.bool)
    swapped[layers] = True  # γ as FeatureMaps.gamma computes it, in its dtype, in the layers the maps swap
    flat = decay and ((-(-full.log().to(dtype)).exp()).exp() >= 1) & swapped
    if decay and flat.any():  # 1e17 in float64, 1e8 in float32, 4,096 in bfloat16: a decay that never decays
        raise ValueError(f"a decay from a horizon of {full[flat].flatten()[0].item():g} tokens is γ = exp(-1/h) = 1 in "
                         f"{dtype} (it rounds to 1 past about {2 / torch.finfo(dtype).eps:.3g} tokens): it would never "
                         "decay; give a shorter horizon" + (", or maps in float32" if torch.finfo(dtype).bits < 32 else ""))
    return layers, dtype, horizon.expand(n_layers, H)


def check_positions(model, end: int):
    """A warning, not an error, when a run reaches past max_position_embeddings: a bounded multi-state
    still gives each token its absolute position, so RoPE angles the model never saw in training can
    come up, and quality may drop; studying that is legitimate, doing it unawares is not."""
    n = model.config.max_positions
    if n is not None and end > n:
        warnings.warn(f"positions up to {end - 1} are past the model's max_position_embeddings ({n}); "
                      "it was not trained on them and quality may drop", stacklevel=3)


def check_memory(nbytes: int, what: str):
    """Refuse, before allocating, something larger than the memory available now (Linux's MemAvailable,
    or the cgroup's limit, or this process's own address-space limit, `ulimit -v`, where lower): a clear
    error rather than the kernel killing the process or a MemoryError deep in torch."""
    if nbytes < 2 ** 28:  # small things are not worth the look
        return
    room = []
    try:
        with open("/proc/meminfo") as f:
            room.append(next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")))
    except (OSError, StopIteration, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f, open("/sys/fs/cgroup/memory.current") as g:
            limit = f.read().strip()
            if limit != "max":
                room.append(int(limit) - int(g.read()))
    except (OSError, ValueError):
        pass
    try:
        import resource
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit != resource.RLIM_INFINITY:
            with open("/proc/self/statm") as f:  # the address space in use, in pages
                room.append(limit - int(f.read().split()[0]) * resource.getpagesize())
    except (ImportError, OSError, ValueError):
        pass
    available = min(room) if room else None
    if available is not None and nbytes > available:
        raise MemoryError(f"{what} needs {_gib(nbytes)}, but only {_gib(available)} of memory is available")


def _gib(n) -> str:
    try:
        return f"{n / 2 ** 30:.1f} GiB"
    except OverflowError:  # a whole number past float's range (r = 10**400): 2**30 < 10**10
        return f"more than 10^{len(str(int(n))) - 11} GiB"


FLOATS = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def check_to(device, dtype) -> tuple:
    """Model.to's (device, dtype), given in either order as torch's .to takes them (to(torch.float64) too): a device
    dropped, or a second dtype, was a copy elsewhere than asked without a word."""
    if isinstance(device, torch.dtype):
        if isinstance(dtype, torch.dtype):
            raise ValueError(f"to takes a device and a dtype, got two dtypes: {device}, {dtype}")
        device, dtype = dtype, device
    if device is not None and (not isinstance(device, (str, torch.device, int)) or isinstance(device, bool)):
        raise ValueError(f"to takes a device (cpu, cuda, mps, meta) and a float dtype, got {type(device).__name__}")
    return device, None if dtype is None else check_dtype(dtype)  # "" is no dtype named, not none


def check_dtype(dtype) -> torch.dtype:
    """A float dtype, given as torch.bfloat16 or as its name 'bfloat16': the torch.dtype."""
    if isinstance(dtype, str) and dtype in FLOATS:
        return FLOATS[dtype]
    if not any(dtype is d for d in FLOATS.values()):
        raise ValueError(f"dtype must be a float torch.dtype such as torch.float64 (or its name: {', '.join(FLOATS)}), "
                         f"got {type(dtype).__name__} {dtype!r}")
    return dtype


def integer(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)  # True is an int to Python, not a size


def number(x) -> bool:
    try:  # not True, NaN or inf, nor an int past float's range (10**400: math.isfinite raised OverflowError)
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    except OverflowError:
        return False


def check_flags(**flags):
    """Each flag True or False: the string "False" (or "no") is true to Python."""
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be True or False, got {flag!r}")


def listed(values, said: str) -> list:
    """values (a list, tuple, set or generator; not a string or bytes, read letter by letter or byte by byte, nor a
    dict, read as its keys) as a list, or `said`: a generator given where a list was meant was used up by the
    first check, and the run went on with none."""
    if isinstance(values, (str, bytes, bytearray, memoryview, abc.Mapping, collections.UserString)) or \
            not hasattr(values, "__iter__") or getattr(values, "ndim", 1) == 0:  # tensor(8) has __iter__, and fails in it
        raise ValueError(f"{said}, got {values!r}")
    return list(values)


def whole_numbers(values, what: str, low: int = 1) -> list:
    """values (see `listed`) as a sorted list of distinct whole numbers >= low, or one error naming `what`: the
    tables' columns and the plots' lines run in increasing order (16 8 32 drew a zigzag)."""
    values = listed(values, f"{what} are a list of whole numbers >= {low}")
    if not values or not all(integer(v) and v >= low for v in values) or len(set(values)) < len(values):  # [8, 8]:
        raise ValueError(f"{what} are one or more distinct whole numbers >= {low}, got {values}")  # measured once, shown twice
    return sorted(values)


def check_state_args(batch, size, oneshot=0, model=None):
    if size is not None and (not integer(size) or size < 1):
        raise ValueError(f"multi-state size must be a positive integer or None, got {size!r}")
    if not integer(batch) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    if not integer(oneshot) or oneshot < 0 or (oneshot and size is None):
        raise ValueError(f"oneshot must be a prompt length >= 0 for a bounded state, got {oneshot!r} (size {size})")
    if model is not None:  # msrnn.init_state's first slots (16 at most): keys and values, pos, score, prev
        c, cap = model.config, 16 if size is None else min(size + 1, 16)
        slot = 2 * c.head_dim * model.embed.element_size() + 24
        check_memory(c.n_layers * batch * c.n_kv_heads * cap * slot, f"a state of {batch:,} sequences")


def check_policy(policy, size):
    if policy is not None and not callable(policy):  # a name fails here, not once the state fills
        raise ValueError(f"policy must be a function rows -> scores (for a name, specs.named({policy!r}).fn), "
                         f"got {type(policy).__name__} {policy!r}")
    if (policy is None) != (size is None):
        raise ValueError("give both a policy and a size (a bounded MSRNN) or neither (the unbounded one); "
                         f"got policy={getattr(policy, '__name__', policy)}, size={size}")


def check_multistate(state, size="any"):
    """A state handed to msrnn.run or feed: a multi-state in every layer, of `size` if one is asked for
    (check_state, at the step, checks that it fits the model)."""
    if not isinstance(getattr(state, "layers", None), (list, tuple)):
        raise ValueError(f"state must be an msrnn.State (msrnn.init_state), got {type(state).__name__}")
    odd = next((ms for ms in state.layers if not (hasattr(ms, "free") and hasattr(ms, "size"))), None)
    if odd is not None:
        raise ValueError(f"the state holds a {type(odd).__name__}, not a multi-state: a T2R state is read by "
                         f"t2r.linear.run (or llama.step), not by msrnn.run, feed or the compiled step")
    one_size(state.layers)
    if size != "any" and state.layers[0].size != size:
        raise ValueError(f"size={size!r}, but the state given was made for size={state.layers[0].size!r}: pass the "
                         f"same size, or size=None to take the state's")


def one_size(layers) -> set:
    """The size the multi-states among `layers` share, as a set of it (empty: no multi-state). A state of
    layers of other sizes is refused: a policy and a size are given for the whole state, and the layer
    another size silently kept more rows or none of them (a hand-made state: init_state makes one size)."""
    sizes = {ms.size for ms in layers if hasattr(ms, "free") and hasattr(ms, "size")}  # a tail's layers too
    if len(sizes) > 1:
        raise ValueError(f"the state's layers are multi-states of sizes {', '.join(map(str, sorted(sizes, key=str)))}: "
                         "one state has one size (msrnn.init_state makes one)")
    return sizes


def check_fresh_state(model, state, size, tokens):
    """A state handed to msrnn.masked_forward: made for this model, this size and batch, and fresh, since
    the masked view reads the tokens from position 0 (a used state would hold rows of another text)."""
    check_multistate(state, size)
    check_state(model, state)
    check_batch(tokens, state)
    if state.t != 0 or any(ms.n for ms in state.layers):
        raise ValueError(f"masked_forward reads the tokens from position 0, but the state given has read {state.t} "
                         "token(s): pass a fresh state (msrnn.init_state) or none")


def check_step_tokens(model, tokens, state) -> torch.Tensor:
    """llama.step's tokens: one id per sequence of the state, (B,), in the vocabulary (a negative id indexed
    the embedding from its end: token -1 gave the last token's logits, no word)."""
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1:
        got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(f"llama.step takes one token id per sequence, an integer tensor (B,), got {got}")
    ids = check_tokens(model, tokens, dims=(1,))[0]
    if hasattr(state.layers[0], "free"):  # a multi-state knows its batch
        check_batch(ids, state)
    elif isinstance(getattr(state.layers[0], "S", None), torch.Tensor) and ids.shape[0] != state.layers[0].S.shape[0]:
        raise ValueError(f"tokens have batch {ids.shape[0]}, the state was made for {state.layers[0].S.shape[0]}")
    return ids


def check_batch(tokens, state):
    if tokens.shape[0] != state.layers[0].free.shape[0]:
        raise ValueError(f"tokens have batch {tokens.shape[0]}, the state was made for {state.layers[0].free.shape[0]}")


def check_sampling(model, max_new, temperature, top_k, seed, regime, state, size=None, step=callable):
    if not callable(step):  # found only after the prompt was fed
        raise ValueError(f"step must be llama.step or a function of its signature (fast.compiled_step()), got {step!r}")
    if not integer(max_new) or max_new < 0:
        raise ValueError(f"max_new must be an integer >= 0, got {max_new!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature < math.inf:
        raise ValueError(f"temperature must be a number >= 0 (0 is greedy), got {temperature!r}")
    if 0 < temperature < 1e-6:  # logits / 5e-324 are infinite, and softmax of them NaN
        raise ValueError(f"temperature {temperature!r} is too small to sample with (at least 1e-06); 0 is greedy")
    if top_k is not None and (not integer(top_k) or not 1 <= top_k <= model.config.vocab_size):
        raise ValueError(f"top_k must be None or an integer from 1 to the vocabulary size "
                         f"{model.config.vocab_size}, got {top_k!r}")
    if not integer(seed) or not -2 ** 63 <= seed < 2 ** 64:  # what torch.Generator.manual_seed takes
        raise ValueError(f"seed must be an integer from -2**63 to 2**64 - 1, got {seed!r}")
    if regime not in ("step", "full"):
        raise ValueError(f"regime must be 'step' or 'full', got {regime!r}")
    if state is not None and regime != "step":
        raise ValueError("regime is for a new state; a state passed in carries its own (init_state's oneshot)")
    if state is not None and size is not None:  # the state's size carries on: another one would be ignored
        check_multistate(state, size)


# ---------------------------------------------------------------- a step is all or nothing

# the tensors of a msrnn.MultiState; a layer that holds others, or a list (t2r's states, test_equivalence.py's
# lists), keeps what this module does not know how to restore. Plain values (n, size, OneShot's prompt and cut) are copied.
TENSORS = ("k", "v", "pos", "score", "prev", "free")


def _multistate(ms) -> bool:
    return "k" in vars(ms) and all(name in TENSORS if isinstance(x, torch.Tensor) else isinstance(x, (int, float, str, type(None)))
                                   for name, x in vars(ms).items())


def check_state(model, state):
    """A state made for this model: one multi-state per layer, each of its KV heads, head_dim, dtype
    and device (a state of another model was zipped to the shorter list of layers, or failed deep in torch)."""
    c = model.config
    if not (integer(state.t) and 0 <= state.t < 2 ** 62):  # a position of 6.5 or -3 ran RoPE there
        raise ValueError(f"the state's position t is a whole number from 0 to 2**62, got {state.t!r}")
    if len(state.layers) != c.n_layers:
        raise ValueError(f"the state has {len(state.layers)} layer(s), the model {c.n_layers}: it was made for another model")
    for i, ms in enumerate(state.layers):
        if not _multistate(ms):
            continue  # another kind of layer state checks itself
        got = (ms.k.shape[1], ms.k.shape[3], ms.k.dtype, ms.k.device)
        want = (c.n_kv_heads, c.head_dim, model.dtype, model.device)
        for what, g, w in zip(("KV heads", "head_dim", "dtype", "device"), got, want):
            if g != w:
                raise ValueError(f"the state's layer {i} has {what} {g}, the model {w}: it was made for another model "
                                 "(msrnn.init_state(model, ...) makes one for this one)")


def all_or_nothing(step):
    """llama.step, all or nothing: if anything in the step raises (a policy in layer 3, a torch error,
    Ctrl-C), every layer's multi-state and the position are put back as they were before it, and the
    error says so; feeding the token again then gives the clean run's logits (tests/test_stale.py).

    Only what a step writes is kept: each layer's buffers and row count by reference (a state that
    grows gets new buffers; the old ones are untouched), and for a bounded state copies of the
    small per-row fields the step rewrites in place (pos, score, prev, free; O(size), never the keys
    and values, whose only slot written is the one the policy had freed). bench.py: within noise."""
    @functools.wraps(step)
    def atomic(model, tokens, state, policy=None):
        check_state(model, state)
        sizes = one_size(state.layers)
        for size in sizes:  # an unbounded state ignored a policy; a bounded one blamed the missing one
            check_policy(policy, size)
        if policy is not None and not sizes and not any(hasattr(ms, "size") for ms in state.layers):  # every layer a
            # T2R state: no row is ever dropped, the policy never read (a layer state of another kind with a size takes one)
            raise ValueError(f"this state holds no multi-state (every layer is {type(state.layers[0]).__name__}): it drops "
                             f"no row, so it takes no policy; got {getattr(policy, '__name__', policy)!r}")
        tokens = check_step_tokens(model, tokens, state)
        t, saved = state.t, [_save(ms) for ms in state.layers]
        try:  # logits checked inside: a step whose logits overflowed leaves the state as it was
            return check_logits(step(model, tokens, state, policy))
        except BaseException as e:
            kept = all(s is not None for s in saved)
            for ms, s in zip(state.layers, saved):
                if s is not None:
                    _restore(ms, s)
            state.t = t
            note = (f"the state is as it was before this step (position {t}); it can be fed again" if kept else
                    f"the step at position {t} failed halfway in a state whose layers msrnn cannot restore: rebuild it")
            if isinstance(e, Exception) and len(e.args) == 1 and isinstance(e.args[0], str):
                e.args = (f"{e.args[0]} [{note}]",)
            else:
                e.add_note(note)
            raise
    _CHECKED[atomic] = weakref.ref(atomic)  # generate's step_logits need not check them again, once a token
    return atomic


_CHECKED = weakref.WeakKeyDictionary()  # the steps all_or_nothing made, which check their own logits (freed with
# them; looked up, never iterated, while another thread adds one; `is`, so that no __eq__ passes for one; not by id,
# which would key a policy that reaches this map differently in every process)


def _save(ms):
    if not _multistate(ms):
        return None
    fields = dict(vars(ms))
    if ms.size is not None:  # the fields a bounded step rewrites in place
        fields.update(pos=ms.pos.clone(), score=ms.score.clone(), prev=ms.prev.clone(), free=ms.free.clone())
    return fields


def _restore(ms, fields):
    n, pos = fields["n"], fields["pos"]
    if ms.size is None and n < pos.shape[2]:  # an unbounded step writes only slot n, past the rows held
        pos[:, :, n] = -1
    vars(ms).update(fields)


# ---------------------------------------------------------------- what a policy returns

class PolicyError(ValueError):
    """A policy raised, or returned something other than a score per row."""


ROWS_FIELDS = ("attn", "pos", "score", "keys", "values", "query", "prev")


def policy_call(policy, rows):
    """`with policy_call(policy, rows): scores = policy(rows)`: the call, watched. An exception inside
    the policy is reported at its own file and line, not in this module.

    Rows' tensors are views of the multi-state's own buffers; a policy that wrote into one would change
    which rows the state believes it holds. So the call is shown copies: from here on each field of
    `rows` is copied the first time it is read (TOVA reads attn only, so it pays for one small copy, not
    for every layer's keys and values), and no write, by any route (in place, through .data, .numpy() or
    vars(rows), into a tensor kept from an earlier call, in this layer or another), reaches a state. The
    state's own views are kept in _HELD, out of rows.__dict__; only a policy that goes looking for this
    module's globals could find them, and the contract forbids what it would do there. A write that
    PyTorch counts (a copy's version counter) still stops the run, naming the policy and the field:
    a policy must change nothing it is shown. (Inside torch.compile nothing is copied or counted: the
    eager run checks.)"""
    return contextlib.nullcontext() if torch.compiler.is_compiling() else _Watched(policy, rows)


_SHOWN = set()  # the Rows classes whose tensor fields can read as copies (`_copying`)
# id(rows) -> what a shown rows holds: its fields (the state's own views) and the copies made of them.
# Kept here, not in rows.__dict__, so that vars(rows) reaches copies too; an entry goes with its rows.
_HELD = {}


def _held(rows) -> dict:
    """rows' entry in _HELD, made at its first call: an id is unique while its object lives, and the
    weak reference's callback drops the entry when rows goes."""
    key = id(rows)
    if key not in _HELD:
        _HELD[key] = {"ref": weakref.ref(rows, lambda _, key=key: _HELD.pop(key, None)), "fields": {}, "copies": {}, "made": {}}
    return _HELD[key]


def _copying(cls):
    """cls (msrnn.Rows) with tensor fields that read as copies, each made at its first read, once a call
    has shown it (an entry in _HELD); until then, and for every Rows never shown, a field is the plain
    attribute it was. The class itself, not a subclass: type(rows) is msrnn.Rows, and rows pickle as one."""
    if cls in _SHOWN:
        return cls
    def field(name):
        def get(self):
            held = _HELD.get(id(self))
            if held is None or name not in held["fields"]:
                try:
                    return self.__dict__[name]
                except KeyError:
                    raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}") from None
            if name not in held["copies"]:
                copy = held["fields"][name].clone()
                if copy.is_inference():  # under torch.inference_mode: a copy that counts its writes (version) all the same,
                    with torch.inference_mode(False):  # from 1 (the copy's own write)
                        copy = held["fields"][name].clone()
                held["copies"][name], held["made"][name] = copy, copy._version
            return held["copies"][name]

        def put(self, x):  # dataclasses.replace(rows, ...) builds a new one through __init__
            held = _HELD.get(id(self))
            if held is None:
                self.__dict__[name] = x
            else:
                held["fields"][name] = x
                held["copies"].pop(name, None)
        return property(get, put)
    for f in ROWS_FIELDS:
        setattr(cls, f, field(f))
    # copy.copy, deepcopy and pickle go by __dict__, which a shown rows' tensors have left: by its fields
    cls.__copy__ = lambda self: dataclasses.replace(self)
    cls.__deepcopy__ = lambda self, memo: dataclasses.replace(self, **{f: getattr(self, f).clone() for f in ROWS_FIELDS})
    cls.__reduce__ = lambda self: (type(self), tuple(getattr(self, f.name) for f in dataclasses.fields(self)))
    _SHOWN.add(cls)
    return cls


class _Same(tuple):  # compared by identity: a policy's object's own __eq__ may say yes to anything, or raise
    __eq__ = lambda self, other: type(other) is type(self) and len(self) == len(other) and (
        all(map(operator.is_, self, other)) or all(a is b or type(a) is int is type(b) and a == b  # a count past 256
                                                  for a, b in zip(self, other)))
    __ne__ = lambda self, other: not self == other  # tuple's own != would compare by ==
    __hash__ = tuple.__hash__


TRANSCRIPTS = weakref.WeakSet()  # a command's copies of what it prints (lab.harness._Tee, `live` while its command
# runs), each over the stream it writes through: sys.stdout is the process's, so a command another thread starts or
# ends during a script's own policy call changes it, and that is no change of the policy's (`_Streams`)
_MADE = itertools.count()


class _Streams(_Same):  # sys's streams, each seen through other threads' commands' transcripts over it: equal where
    # the same stream is under them, and a transcript still live then is there now (one the call took off is a change)
    def __eq__(self, other):
        if type(other) is not type(self) or len(other) != len(self):
            return False
        if all(map(operator.is_, self, other)):  # (every call but one that spans a change: no walk)
            return True
        was, now = sorted((self, other), key=lambda s: s.made)
        return all(_through(a)[0] is _through(b)[0] and all(not t.live or any(t is u for u in _through(b)[1])
                                                            for t in _through(a)[1]) for a, b in zip(was, now))
    __ne__ = lambda self, other: not self == other
    __hash__ = tuple.__hash__


def _streams():
    (streams := _Streams(getattr(sys, n, None) for n in _STREAMS)).made = next(_MADE)
    return streams


def _through(stream):
    """The stream under other threads' commands' transcripts, and those (this thread's command's own is no other's:
    a policy that takes it off sys.stdout drops its log's copy)."""
    passed = []
    while any(stream is t and t.thread != threading.get_ident() for t in TRANSCRIPTS):
        passed.append(stream)
        stream = stream.stream
    return stream, passed


_PLAIN = (str, int, type(None), re.Pattern)  # compared by ==, which is C's own for these exact types


def _same_entry(a, b) -> bool:
    """One warning filter and another: the same object, or two tuples of plain parts that are equal (simplefilter
    puts an equal new tuple in the old one's place), never by a policy's own ==."""
    return a is b or type(a) is tuple is type(b) and len(a) == len(b) and all(
        x is y or type(x) is type(y) and type(x) in _PLAIN and x == y for x, y in zip(a, b))


class _Filters(tuple):
    """The warning filters, each entry as `_same_entry` compares it, and the list object that holds them (a policy
    may bind another, even a tuple, which compares equal and breaks every later warnings.warn), shown by their count."""

    def __new__(cls, filters):
        made = super().__new__(cls, list.copy(filters) if list in type(filters).__mro__ else ())  # list's own copy:
        made.list = filters  # no method of a subclass runs (an __iter__ that raises left everything unput back)
        return made

    __eq__ = lambda self, other: type(other) is _Filters and self.list is other.list and len(self) == len(other) and (
        all(map(operator.is_, self, other)) or all(map(_same_entry, self, other)))  # the same objects: at C's speed
    __ne__ = lambda self, other: not self == other
    __hash__ = tuple.__hash__
    __repr__ = __str__ = lambda self: f"{len(self)} filters" if list in type(self.list).__mro__ else \
        f"a {_typename(self.list)}, not a list"


INSTALLED = tuple(sorted({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")} |
                         {*site.getsitepackages(), site.getusersitepackages(), os.path.dirname(os.__file__),
                          os.path.dirname(os.path.dirname(torch.__file__))}))  # where Python's own modules and
# installed packages live, as configured and where they were found (not the whole prefix: Debian's Python has /usr,
# and a project in /usr/src is the user's)


def _library(x) -> bool:
    """x (a finder, a hook) is Python's or an installed package's: it runs by code (a function's, a partial's, a
    method's; an object's or its class's find_spec, find_module or __call__, a property's getter), all of it in
    Python's frozen import system or an installed file. A library imported for the first time may add its own (six
    adds a finder); a namespace of the user's lambdas, a class that names another module as its own, code made by
    exec, or an object whose code cannot be found statically is the user's."""
    try:
        codes, todo, seen = [], [x], 0
        while todo and seen < 16:
            f, seen = todo.pop(), seen + 1
            while type(f) is functools.partial:
                f = f.func
            if isinstance(f, (types.MethodType, staticmethod, classmethod)):
                f = f.__func__
            if isinstance(f, property):
                f = f.fget
            if isinstance(f, types.FunctionType):
                codes.append(f.__code__)
            elif isinstance(f, (types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType)):
                continue  # C's own: no Python code of anyone's
            else:
                found = [g for n in ("find_spec", "find_module", "__call__")
                         for g in (inspect.getattr_static(f, n, None),) if g is not None and g is not f]
                if not found and not isinstance(f, type):
                    return False
                todo += found
        return bool(codes) and all(c.co_filename.startswith(("<frozen ", *INSTALLED)) for c in codes)
    except Exception:
        return False


class _Cached(_Same):
    """sys.path_importer_cache by identity (the dict, then each folder and its finder), where the finders Python's
    import or a library fills in leave it the same: on a difference, only the user's finders are compared."""
    def __eq__(self, other):
        if _Same.__eq__(self, other):
            return True
        if type(other) is not _Cached or other[0] is not self[0]:
            return False
        a, b = ({k: v for k, v in zip(r[1::2], r[2::2]) if v is not None and not _library(v)} for r in (self, other))
        return a.keys() == b.keys() and all(a[k] is b[k] for k in a)

    __ne__ = lambda self, other: not self == other
    __hash__ = tuple.__hash__


def _cached():
    x = sys.path_importer_cache
    return _Cached((x, *(y for pair in (dict.items(x) if dict in type(x).__mro__ else ()) for y in pair)))


def _put_cached(was):  # the dict and its entries as they were, and what Python or a library filled in since
    now = sys.path_importer_cache
    old = dict(zip(was[1::2], was[2::2]))
    added = {k: v for k, v in (dict.items(now) if dict in type(now).__mro__ else ()) if k not in old and (v is None or _library(v))}
    sys.path_importer_cache = was[0]
    if dict in type(was[0]).__mro__:
        dict.clear(was[0])
        dict.update(was[0], {**old, **added})


_INSTALLED_REAL = tuple(os.path.realpath(p) for p in INSTALLED)


def _installed(folder) -> bool:
    """A folder inside an installed package's (setuptools' _vendor), as the file system resolves it ('..', links)."""
    try:
        real = os.path.realpath(folder)
        return type(folder) is str and any(os.path.commonpath([real, root]) == root for root in _INSTALLED_REAL)
    except (TypeError, ValueError, OSError):
        return False


class _Grown(_Same):
    """A list a module holds (sys.path, sys.meta_path, sys.path_hooks, gc.callbacks) by identity: the list, then its
    entries. It reads the same where the entries that were there are there, in their order, and only entries a
    library adds of its own came in between (`allowed`: setuptools' _vendor folder, six's finder), none before the
    first where `pinned` (sys.path's first folder, the program's own: one before it shadows the project)."""
    allowed, pinned = staticmethod(lambda e: False), False

    def __eq__(self, other):
        if _Same.__eq__(self, other):
            return True
        if type(other) is not type(self) or other[0] is not self[0]:
            return False
        was, now = sorted((self, other), key=len)  # either way round: list's != asks the newer reading
        i = 1
        for e in now[1:]:
            if i < len(was) and e is was[i]:
                i += 1
            elif self.pinned and i == 1 < len(was) or not self.allowed(e):
                return False
        return i == len(was)

    __ne__ = lambda self, other: not self == other
    __hash__ = tuple.__hash__


def _grown(owner, name, allowed=None, pinned=False):
    """(read, put back, in words) of a list `owner` holds, as _Grown compares it: put back is the list and its entries
    as they were, and after them what a library added since."""
    kind = type(f"_Grown_{name}", (_Grown,), {"pinned": pinned} | ({"allowed": staticmethod(allowed)} if allowed else {}))

    def read():
        x = getattr(owner, name, None)
        return kind((x, *(list.copy(x) if list in type(x).__mro__ else ())))

    def put(was):
        now = getattr(owner, name, None)
        added = [e for e in (list.copy(now) if list in type(now).__mro__ else ())
                 if not any(e is w for w in was[1:]) and kind.allowed(e)]
        setattr(owner, name, was[0])
        if list in type(was[0]).__mro__:
            list.__setitem__(was[0], slice(None), list(was[1:]) + added)
    return read, put, lambda was: f"{len(was) - 1} entries"


def _umask() -> int:
    mask = os.umask(0o022)  # read only by setting it
    os.umask(mask)
    return mask


_STREAMS = ("stdin", "stdout", "stderr")
_SYS_HOOKS = ("excepthook", "displayhook", "unraisablehook", "breakpointhook")  # sys's; and threading.excepthook
_HOOKED = ("showwarning", "formatwarning", "_showwarnmsg", "_showwarnmsg_impl", "defaultaction", "onceregistry")  # each
# silences or reroutes every later warning


_STREAM_SETTINGS = ("encoding", "errors", "line_buffering", "write_through")


def _encodings():
    """How sys.__stdout__ and sys.__stderr__ write, which every later print ends in (None where absent)."""
    o, e = sys.__stdout__, sys.__stderr__
    try:  # read straight: every policy call reads it twice
        return o.encoding, o.errors, o.line_buffering, o.write_through, e.encoding, e.errors, e.line_buffering, e.write_through
    except AttributeError:  # no stream (pythonw), or not a text one
        return tuple(getattr(s, a, None) for s in (o, e) for a in _STREAM_SETTINGS)


def _sys_hooks():
    try:  # read straight, as _encodings
        return _Same((sys.excepthook, sys.displayhook, sys.unraisablehook, sys.breakpointhook, threading.excepthook))
    except AttributeError:  # one deleted
        return _Same((*(getattr(sys, n, None) for n in _SYS_HOOKS), getattr(threading, "excepthook", None)))


def _put_sys_hooks(was):
    for n, f in zip(_SYS_HOOKS, was):
        setattr(sys, n, f)
    threading.excepthook = was[-1]


def _put_encodings(was):
    n = len(_STREAM_SETTINGS)
    for s, values in ((sys.__stdout__, was[:n]), (sys.__stderr__, was[n:])):
        if isinstance(s, io.TextIOWrapper) and tuple(getattr(s, a) for a in _STREAM_SETTINGS) != values:
            s.reconfigure(**dict(zip(_STREAM_SETTINGS, values)))


def _cwd():
    try:
        return os.getcwd()
    except OSError:  # the folder was removed: nothing to put back
        return None


def _put_filters(filters):
    warnings.filters = filters.list
    filters.list[:] = filters
    warnings._filters_mutated()  # the filters' caches, as warnings.simplefilter clears them


_TINY = 1e-310  # a float64 subnormal: read as 0 once torch.set_flush_denormal(True) has changed the CPU's flags


def _matmul_precision():
    try:  # cheap; but it raises once torch's newer API (backends' fp32_precision) has been used
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return torch.backends.mkldnn.matmul.fp32_precision, torch.backends.cuda.matmul.fp32_precision


def _put_matmul_precision(was):
    if isinstance(was, str):
        torch.set_float32_matmul_precision(was)  # sets the newer API's too
    else:
        torch.backends.mkldnn.matmul.fp32_precision, torch.backends.cuda.matmul.fp32_precision = was


_both = lambda second: lambda was: f"{was[0]}" + (f" ({second})" if was[1] else "")  # two flags, in words


def _saved_hooks():
    top = torch._C._autograd._top_saved_tensors_default_hooks(False)  # the top pair of the stack, or None
    return None if top is None else _Same(top)


def _put_saved_hooks(was):
    """Pop what a policy pushed (saved_tensors_hooks entered, never left); push back a pair it popped."""
    while (top := _saved_hooks()) is not None and top != was:
        torch._C._autograd._pop_saved_tensors_default_hooks()
    if top != was:
        torch._C._autograd._push_saved_tensors_default_hooks(*was)


_MODULE = torch.nn.modules.module  # register_module_forward_hook and its kin keep module-wide dicts (and a flag)
_HOOK_NAMES = tuple(n for n in vars(_MODULE) if n.startswith("_global_"))


def _items(x):
    """A hook dict's (key, value) pairs by its own kind's C methods (an OrderedDict's order is its own), never a
    subclass's."""
    return collections.OrderedDict.items(x) if collections.OrderedDict in type(x).__mro__ else dict.items(x)


def _module_hooks():
    """Each of them, flat and by identity: the object, then for a dict twice its size (None for no dict) and its keys
    and values (no method of a subclass's, no hook's ==, runs)."""
    out = []
    for x in map(vars(_MODULE).get, _HOOK_NAMES):
        if dict not in type(x).__mro__:
            out += (x, None)
        elif dict.__len__(x):
            out += (x, 2 * dict.__len__(x), *(y for pair in _items(x) for y in pair))
        else:
            out += (x, 0)
    return _Same(out)


def _read_hooks(was):
    """(name, object, [key, value, ...] or None) for each hook of a _module_hooks reading."""
    at = 0
    for name in _HOOK_NAMES:
        n = was[at + 1]
        yield name, was[at], None if n is None else was[at + 2:at + 2 + n]
        at += 2 + (n or 0)


def _put_module_hooks(was):
    for name, x, items in _read_hooks(was):  # the object that was there (torch's, or a caller's own), its contents
        if items is not None:  # by its own kind's methods (dict's left an OrderedDict's order broken: every later
            kind = collections.OrderedDict if collections.OrderedDict in type(x).__mro__ else dict  # Module call failed)
            kind.clear(x)
            kind.update(x, zip(items[::2], items[1::2]))
        setattr(_MODULE, name, x)


def _put_dual_level(was):
    """Leave the forward-mode levels a policy entered (only the newest can be left, so from the top)."""
    while torch.autograd.forward_ad._current_level > was:
        torch.autograd.forward_ad.exit_dual_level()


# What a policy must leave as it was: (what, read, put back, in words). Read before and after every call, so
# each read is cheap (plain values, worded only for the message).
SETTINGS = [("torch's default dtype", torch.get_default_dtype, torch.set_default_dtype, str),
            ("torch's thread count", torch.get_num_threads, torch.set_num_threads, str),
            ("torch's float32 precision (fp32_precision, every backend's default)", lambda: torch.backends.fp32_precision,
             lambda was: setattr(torch.backends, "fp32_precision", was), str),
            ("torch's float32 matmul precision", _matmul_precision, _put_matmul_precision,
             lambda was: was if isinstance(was, str) else f"{was[0]} on the CPU, {was[1]} on CUDA (fp32_precision)"),
            ("torch's deterministic algorithms setting",
             lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
             lambda was: torch.use_deterministic_algorithms(was[0], warn_only=was[1]), _both("warn_only")),
            ("torch's anomaly detection", lambda: (torch.is_anomaly_enabled(), not torch.is_anomaly_check_nan_enabled()),
             lambda was: torch.set_anomaly_enabled(was[0], not was[1]), _both("no NaN check")),
            ("torch's flush of subnormal floats to zero", lambda: _TINY * 1.0 == 0.0, torch.set_flush_denormal, str),
            *((f"torch's autocast on {device}", lambda device=device: (torch.is_autocast_enabled(device),
                                                                        torch.get_autocast_dtype(device)),
               lambda was, device=device: (torch.set_autocast_enabled(device, was[0]), torch.set_autocast_dtype(device, was[1])),
               lambda was: f"{was[0]} ({was[1]})" if was[0] else "False")
              for device in ("cpu", "cuda") if device == "cpu" or torch.cuda.is_available()),  # CUDA's: where it runs
            ("torch's attention backends (flash, memory-efficient, math, cuDNN)",
             lambda: (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled(),
                      torch.backends.cuda.math_sdp_enabled(), torch.backends.cuda.cudnn_sdp_enabled()),
             lambda was: [f(on) for f, on in zip((torch.backends.cuda.enable_flash_sdp, torch.backends.cuda.enable_mem_efficient_sdp,
                                                   torch.backends.cuda.enable_math_sdp, torch.backends.cuda.enable_cudnn_sdp), was)],
             str),
            ("torch's fp16/bf16 reduction in math attention", torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed,
             torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp, str),
            ("torch's oneDNN (mkldnn) setting", torch._C._get_mkldnn_enabled,  # torch.backends.mkldnn.enabled, read fast
             lambda was: setattr(torch.backends.mkldnn, "enabled", was), str),
            ("torch's fill of uninitialized memory", lambda: torch.utils.deterministic.fill_uninitialized_memory,
             lambda was: setattr(torch.utils.deterministic, "fill_uninitialized_memory", was), str),
            ("torch's grad mode", torch.is_grad_enabled, torch.set_grad_enabled, str),
            ("torch's inference mode", torch.is_inference_mode_enabled, lambda was: None, str),  # cannot be put back
            ("torch's default hooks on saved tensors", _saved_hooks, _put_saved_hooks,
             lambda was: "none" if was is None else "a pack/unpack pair"),
            ("torch's global nn.Module hooks", _module_hooks, _put_module_hooks,  # every later Module's forward (T2R's)
             lambda was: f"{sum(len(items) // 2 for _, _, items in _read_hooks(was) if items)} hooks"),
            ("torch's saved-tensor hooks switch", lambda: (torch._C._autograd._saved_tensors_hooks_is_enabled(),
                                                           torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()),
             lambda was: torch._C._autograd._saved_tensors_hooks_enable() if was[0] else
             torch._C._autograd._saved_tensors_hooks_disable(was[1]), lambda was: "on" if was[0] else f"off ({was[1]})"),
            ("torch's forward-mode dual level", lambda: torch.autograd.forward_ad._current_level, _put_dual_level, str),
            ("torch's warn-always setting", torch.is_warn_always_enabled, torch.set_warn_always, str),
            ("torch's autograd multithreading", torch._C._is_multithreading_enabled, torch._C._set_multithreading_enabled,
             str),
            ("torch's forward-mode autograd", torch._C._is_fwd_grad_enabled, torch._C._set_fwd_grad_enabled, str),
            ("Python's recursion limit", sys.getrecursionlimit, sys.setrecursionlimit, str),
            ("torch's global random seed", torch.initial_seed, None, str),  # a policy draws from a Generator of its own:
            # put back by the generator's whole state (re-seeding would rewind the caller's stream), saved at each call
            ("Python's warning filters", lambda: _Filters(getattr(warnings, "filters", None)), _put_filters, str),  # a
            # warning silenced, or the list deleted
            ("the working folder", _cwd, lambda was: was and os.path.isdir(was) and os.chdir(was), str),  # every
            # relative path after it (a folder the policy removed cannot be gone back to)
            ("Python's limit on an integer's digits", sys.get_int_max_str_digits, sys.set_int_max_str_digits, str),  # 0:
            # none, and a config's 5,000-digit number is read
            ("sys.stdin, sys.stdout and sys.stderr", _streams,
             lambda was: [setattr(sys, n, s) for n, s in zip(_STREAMS, was)],
             lambda was: _each(was, "name")),
            ("sys.excepthook, displayhook, unraisablehook and breakpointhook, and threading.excepthook",
             _sys_hooks, _put_sys_hooks, lambda was: _each(was, "__name__")),
            ("Python's trace and profile functions (sys's and threading's)",  # each runs at every later call
             lambda: _Same((sys.gettrace(), sys.getprofile(), threading._trace_hook, threading._profile_hook)),
             lambda was: [put(f) for put, f in zip((sys.settrace, sys.setprofile, threading.settrace, threading.setprofile), was)],
             lambda was: _each(["none" if f is None else f for f in was], "__name__")),
            ("how Python's own stdout and stderr write (encoding, errors, buffering)", _encodings, _put_encodings, str),
            ("numpy's floating-point error handling", np.geterr, lambda was: np.seterr(**was), str),
            ("Python's garbage collector (on, thresholds, debug flags) and thread switch interval",
             lambda: (gc.isenabled(), gc.get_threshold(), gc.get_debug(), sys.getswitchinterval()),
             lambda was: (gc.enable() if was[0] else gc.disable(), gc.set_threshold(*was[1]), gc.set_debug(was[2]),
                          sys.setswitchinterval(was[3])), str),
            ("torch's autocast cache and view replay", lambda: (torch.is_autocast_cache_enabled(),
                                                                 torch._C._is_view_replay_enabled()),
             lambda was: (torch.set_autocast_cache_enabled(was[0]), torch._C._set_view_replay_enabled(was[1])), str),
            ("sys.path (where Python imports from)", *_grown(sys, "path", _installed, pinned=True)),  # a folder put
            # first: a worker process imported its llama.py
            ("the file mode mask (umask)", _umask, os.umask, oct),  # every folder and file written after it
            *((f"sys.{n} (how Python finds modules)", *_grown(sys, n, _library)) for n in ("meta_path", "path_hooks")),
            ("gc.callbacks (run at every collection)", *_grown(gc, "callbacks")),
            ("Python's warnings.showwarning, formatwarning, their hooks and the default action",
             lambda: _Same(getattr(warnings, n, None) for n in _HOOKED),
             lambda was: [setattr(warnings, n, f) for n, f in zip(_HOOKED, was)],
             lambda was: _each(was, "__name__"))]


_GETS = tuple(get for _, get, _, _ in SETTINGS)


def _modes() -> tuple:
    """torch's two stacks of modes, of functions and of dispatch: torch.set_default_device pushes one (a
    DeviceContext), and so can any code; a mode left on changes every later call in the process."""
    return ([torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())],
            [torch._C._get_dispatch_stack_at(i) for i in range(torch._C._len_torch_dispatch_stack())])


def _device(functions) -> str:
    """The default device a stack of function modes sets, as torch.get_default_device reads it (the newest
    DeviceContext's), without a torch call."""
    return next((str(m.device) for m in reversed(functions) if isinstance(m, torch.utils._device.DeviceContext)), "cpu")


def _put_modes(modes):
    functions, dispatch = modes
    while torch._C._len_torch_function_stack():
        torch._C._pop_torch_function_stack()
    while torch._C._len_torch_dispatch_stack():
        torch._C._pop_torch_dispatch_stack(None)
    for m in functions:
        torch._C._push_on_torch_function_stack(m)
    for m in dispatch:
        torch._C._push_on_torch_dispatch_stack(m)


class _Kept:
    """The process-wide settings as they were (torch's modes and default device, SETTINGS, the random state), and
    put_back, which restores them."""

    WATCHED, _GETS = SETTINGS, _GETS  # what it reads and puts back, and how each is read

    def _read(self) -> list:
        return list(map(operator.call, self._GETS))  # about 2 µs: read twice a call

    def snap(self):
        # torch.set_default_device enters a mode: the count of modes is cheap to read, the device itself is not
        self.modes = _modes() if torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack() else ([], [])
        self.device = (getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None), torch.utils._device.CURRENT_DEVICE) \
            if self.modes[0] else (None, None)  # no mode: no default device set
        self.settings = self._read()  # the other process-wide settings
        self.random = torch.get_rng_state()  # under a microsecond
        self.threads = _thread._count()  # the threads then: one that ends meanwhile may have changed a setting
        return self

    def put_back(self, quiet=()) -> str:
        """Every process-wide setting the call changed, put back (all of them, not the first), said in words (but for
        the settings named in `quiet`, put back without a word)."""
        changed, modes = [], self.modes
        if torch._C._len_torch_function_stack() != len(modes[0]) or torch._C._len_torch_dispatch_stack() != len(modes[1]) \
                or (modes[0] or modes[1]) and any(a is not b for now, then in zip(_modes(), modes) for a, b in zip(now, then)):
            left = _modes()  # the devices read off the stacks: a torch call could run under a mode that raises
            now, home = _device(left[0]), _device(modes[0])
            added = [type(m).__name__ for m in sum(left, []) if not any(m is b for b in sum(modes, []))]
            _put_modes(modes)
            torch._GLOBAL_DEVICE_CONTEXT.device_context, torch.utils._device.CURRENT_DEVICE = self.device
            if now != home:
                changed.append(f"torch's default device from {home} to {now}")
            if added := [a for a in added if a != "DeviceContext"]:
                changed.append(f"torch's modes (it left {', '.join(added)} on)")
            elif now == home:
                changed.append("torch's stack of modes")
        if self._read() != self.settings:  # one comparison on every call; each setting apart only when one changed
            put_back = []
            for (what, get, put, say), was in zip(self.WATCHED, self.settings):
                if (now := get()) != was:
                    try:  # each apart: one that fails (a module's function deleted) leaves the others to be put back
                        torch.set_rng_state(self.random) if put is None else put(was)
                        left = "" if get() == was else " (left so: only what entered it can leave it)"  # inference mode
                    except Exception as e:
                        left = f" (it could not be put back: {_typename(e)})"
                    put_back.append((what, say, was, now, left))
            for what, say, was, now, left in put_back:  # worded once all are put back: a word may run a policy's code
                if what in quiet:
                    continue
                before, after = _worded(say, was), _worded(say, now)
                changed.append(f"{what} from {before} to {after}" + (" (changed inside)" if before == after else "") + left)
        return ", ".join(changed)


def _each(objects, attribute) -> str:
    """Each object by its name (a stream's, a function's; a text as itself), or by its type's where it has none or
    reading it raises."""
    named = lambda x: x if type(x) is str else n if type(n := getattr(x, attribute, None)) is str else _a(x)
    return ", ".join(_worded(named, x) for x in objects)


def _a(x) -> str:
    """'a Name' of x's type ('an object of an unnamed class' where its name cannot be read)."""
    return name if (name := _typename(x)).startswith("an object") else f"a {name}"


def _worded(say, x) -> str:
    """A setting in words, or its type's name where the words raise (a stream's name that is a property of its own,
    raising even SystemExit: not the user's Ctrl-C)."""
    try:
        return str.__str__(str(say(x)))
    except KeyboardInterrupt:
        raise
    except BaseException:
        return _a(x)


@contextlib.contextmanager
def kept():
    """Whatever the block changes of the settings a policy may not change, put back after it (where it can be:
    inference mode cannot be): t2r.mini runs a student's linear.py, whose import may change any of them."""
    was = _Kept().snap()
    try:
        yield
    finally:
        was.put_back()


class ImportChanged(ValueError):
    """A policy file whose import changed a process-wide setting (put back)."""


_LIBRARIES_DO = ("Python's warning filters", "torch's global random seed")  # at import, libraries add filters and
# files seed their own draws: put back, not refused


# What a policy file's import must leave as it was too, read only around imports (they cost more than a call may)
IMPORT_SETTINGS = [
    ("sys.path_importer_cache (the finder of each folder)", _cached, _put_cached,  # a hundred entries: not read at
     lambda was: f"{(len(was) - 1) // 2} folders"),  # every call
    *((("the cores this process may run on", lambda: os.sched_getaffinity(0), lambda was: os.sched_setaffinity(0, was),
        lambda was: "cores " + ", ".join(map(str, sorted(was)))),) if hasattr(os, "sched_getaffinity") else ()),  # every later pool and timing
    ("torch's inter-op thread count", torch.get_num_interop_threads, torch.set_num_interop_threads, str)]


class _ImportKept(_Kept):
    WATCHED = SETTINGS + IMPORT_SETTINGS
    _GETS = tuple(get for _, get, _, _ in WATCHED)


@contextlib.contextmanager
def imported(path):
    """A policy file's import, watched as its calls are: what it changes of the settings is put back, and named
    (a profiler, a default dtype, a thread count left by an import changed every later number and cost)."""
    was, held = _ImportKept().snap(), True
    try:
        held = _hold(_IMPORTING, f"file {path}", sys._getframe(2))  # a logger its import starts is the policy's
        yield
    finally:
        _unhold(_IMPORTING, held)
        said = was.put_back(quiet=_LIBRARIES_DO)
    if said:
        raise ImportChanged(f"importing {path} changed {said} (put back): a policy file must not change global settings")


_EXIT = getattr(os._exit, "python", os._exit)  # Python's own (this module imported again finds its own in place)
_CALLING, _IMPORTING = {}, {}  # the threads in a watched policy call, and importing a policy's file: whose, and
# in how many signal handlers it began
_POLICYS = weakref.WeakKeyDictionary()  # the threads a policy started (in its call, its import, or a thread of its
_STOPPED = []  # own), and whose; (code, thread, whose) of each os._exit such a thread called
_CALLERS = weakref.WeakKeyDictionary()  # those threads: the thread whose policy call or import started them
_OWNER = threading.local()  # whose job a thread pool's thread runs (`whose` where a policy submitted it)
_HANDLING = [0]  # the signal handlers running in the main thread, one in another
_GIVEN = weakref.WeakValueDictionary()  # the handlers signal.signal and getsignal gave back, by id
os.register_at_fork(after_in_child=lambda: (_CALLING.clear(), _IMPORTING.clear(), _POLICYS.clear(), _STOPPED.clear(),
                                            _CALLERS.clear(), setattr(_OWNER, "whose", None),
                                            _HANDLING.__setitem__(0, 0)))  # a
# child forked in a policy's thread or handler is a process of its own: its os._exit ends it


def _depth() -> int:
    """How many signal handlers this thread is in (Python runs them in the main thread, between two steps of whatever
    it does: a policy's call too): those set through signal.signal, counted, and those set before this module was
    imported, found on the stack (none, mostly: Ctrl-C's is Python's own)."""
    if threading.current_thread() is not threading.main_thread():
        return 0
    depth, frame = _HANDLING[0], sys._getframe(1) if _EARLY else None
    while frame is not None:
        depth += frame.f_code in _EARLY
        frame = frame.f_back
    return depth


def _hold(held: dict, whose, frame):
    """Note that this thread runs `whose` (a policy's call, a policy file's import, in `frame`) from now, where it does
    not already at this handler depth (a policy calling another); a signal's handler's call inside another's is its
    own. What was noted before, to put back."""
    if _PENDING and threading.current_thread() is threading.main_thread():
        _early()
    me, depth = threading.get_ident(), _depth()
    was = _noted(held)
    if was is not None and was[1] == depth:
        return True
    held[me] = (whose, depth, frame)
    return was


def _noted(held: dict):
    """This thread's note, where the frame that made it still runs: a note left by a call that a signal's handler's
    exception (Ctrl-C) ended before its end could undo it is no call."""
    was = held.get(threading.get_ident())
    frame = sys._getframe(1)
    while was is not None and frame is not None:
        if frame is was[2]:
            return was
        frame = frame.f_back
    if was is not None:
        held.pop(threading.get_ident(), None)
    return None


def _unhold(held: dict, was):
    if was is None:
        held.pop(threading.get_ident(), None)
    elif was is not True:
        held[threading.get_ident()] = was


def _whose():
    """The policy (or policy file) whose code runs here: a watched call or import begun in this thread (and not a
    signal's handler that interrupts it: a script's SIGTERM handler that arms a watchdog is the script's), a thread
    the policy started, or a pool's job it submitted; else None."""
    for held in (_CALLING, _IMPORTING):
        if (note := _noted(held)) is not None and note[1] == _depth():
            return note[0]
    whose = getattr(_OWNER, "whose", None)
    return whose if whose is not None else _POLICYS.get(threading.current_thread())


def _caller():
    """The thread whose policy call (or policy file's import) the policy's code here serves: this one, in a call begun
    here; the one whose call started this thread or submitted this job."""
    if _called_here():
        return threading.get_ident()
    if getattr(_OWNER, "whose", None) is not None:
        return getattr(_OWNER, "caller", None)
    return _CALLERS.get(threading.current_thread())


def _called_here() -> bool:
    """Whether a watched policy call, or a policy file's import, began in this thread."""
    return any((note := _noted(held)) is not None and note[1] == _depth() for held in (_CALLING, _IMPORTING))


def _serves(thread: int) -> bool:
    """Whether a policy's code runs here for the command running in `thread`: a thread or pool job a policy started,
    not a policy's call begun here (a script's thread's own), nor a thread or job of a call that another thread is
    in now (a script's thread calling its own policy: the command does not wait for that one). A pool made in one
    call runs later calls' jobs: what it runs while the thread that made it is in no call is the command's. A command
    copies what these print, and refuses a command from them (it waits for them)."""
    if _whose() is None or _called_here():
        return False
    caller = _caller()
    return caller is None or caller == thread or caller not in _CALLING and caller not in _IMPORTING


def _exit(code):
    """os._exit, as a policy sees it: called in a policy's call, or by a thread the policy started (its logger, a raw
    `_thread` one) or a pool's job it submitted, it ends no process, where it would skip every flush
    and `finally` (a run that printed nothing and exited 0), but raises SystemExit, which the watch names (a thread's,
    which Python drops, at the next call's end or the command's: `stopped`); from any other thread (the script's own
    watchdog, a worker's end) or a signal's handler it is Python's. Put in place on import, before a policy file's
    `from os import _exit` binds it."""
    thread = threading.current_thread()
    if (note := _noted(_CALLING)) is not None and note[1] == _depth():
        raise SystemExit(code)
    if (whose := _whose()) is not None:
        _STOPPED.append((code, thread.name, whose))
        raise SystemExit(code)
    _EXIT(code)


def stopped() -> str:
    """An os._exit a policy's own thread called, said once (at a policy call's end, or a command's)."""
    if _STOPPED:
        code, name, whose = _STOPPED.pop(0)
        _STOPPED.clear()
        whose = "a policy's" if whose is None else f"policy {whose}: its" if isinstance(whose, str) else \
            f"policy {policy_name(whose)}: its"  # (whose call, or file, started it)
        return f"{whose} thread {name!r} called os._exit({code!r}), which would have ended the process without a word"
    return ""


_START = getattr(threading.Thread.start, "python", threading.Thread.start)
_START_RAW = getattr(_thread.start_new_thread, "python", _thread.start_new_thread)
_SUBMIT = getattr(futures.ThreadPoolExecutor.submit, "python", futures.ThreadPoolExecutor.submit)
_SIGNAL, _GETSIGNAL = (getattr(f, "python", f) for f in (signal_c.signal, signal_c.getsignal))


def _start(self):
    """Thread.start, the thread noted as the policy's where a policy starts it (`_whose`). A thread pool's threads
    are nobody's: a script's pool may start them in a policy's call, a policy may use the script's; each job is its
    submitter's."""
    if getattr(self, "_target", None) is not futures.thread._worker and (whose := _whose()) is not None:
        _POLICYS[self] = whose
        if (caller := _caller()) is not None:
            _CALLERS[self] = caller
    return _START(self)


def _start_raw(function, args, kwargs=None):
    """_thread.start_new_thread, the thread the policy's where a policy starts it (threading's own go through
    `_start`): a script's raw watchdog, started outside a policy's call, is the script's."""
    if (whose := _whose()) is not None:
        function = functools.partial(_owned, (whose, _caller()), function)
    return _START_RAW(function, args, kwargs or {})


def _submit(self, fn, /, *args, **kwargs):
    """ThreadPoolExecutor.submit, a job a policy submits run as the policy's (`_OWNER`)."""
    if (whose := _whose()) is not None:
        fn = functools.partial(_owned, (whose, _caller()), fn)
    return _SUBMIT(self, fn, *args, **kwargs)


def _owned(who, fn, *args, **kwargs):
    """fn run as a policy's: `who` is (whose, the thread whose call it serves)."""
    was = getattr(_OWNER, "whose", None), getattr(_OWNER, "caller", None)
    _OWNER.whose, _OWNER.caller = who
    try:
        return fn(*args, **kwargs)
    finally:
        _OWNER.whose, _OWNER.caller = was


def _handler(h, whose=None):
    """A signal's handler, counted while it runs (`_HANDLING`), what it raises marked as no policy's; or, set anew in
    a policy's call (its own time limit), run as that policy's (`_OWNER`; whose: the policy and its call's thread),
    its exit and its exception the policy's."""
    if not callable(h) or _handled(h) is not None:
        return h
    def handle(sig, frame):
        if whose is not None:
            return _owned(whose, h, sig, frame)
        _HANDLING[0] += 1
        try:
            return h(sig, frame)
        except BaseException as e:
            with contextlib.suppress(AttributeError, TypeError):
                e.from_handler = True
            raise
        finally:
            _HANDLING[0] -= 1
    handle.__msrnn_handler__, handle.__msrnn_whose__ = h, whose  # (names no script's handler, nor a Mock, holds)
    return handle


def from_handler(e) -> bool:
    """Whether a signal's handler raised `e` (the script's sys.exit, its time limit's exception) into the code it
    interrupted: marked by the wrapper, or raised in a handler set before this import (its frame in the traceback)."""
    if getattr(e, "from_handler", False) is True:
        return True
    tb = getattr(e, "__traceback__", None)
    while tb is not None:
        if tb.tb_frame.f_code in _EARLY:
            return True
        tb = tb.tb_next
    return False


def _handled(h):
    """The script's handler that `h`, a wrapper of _handler's, counts; else None."""
    return h.__dict__.get("__msrnn_handler__") if isinstance(h, types.FunctionType) else None


def _given(h):
    """A handler, as signal.signal and getsignal give it back (the one set, not its wrapper), remembered where it is
    not a policy's own: set again in a policy's call (put back after its own time limit), it is still the script's."""
    script = h if _handled(h) is None else _handled(h)
    if script is h or h.__dict__.get("__msrnn_whose__") is None:
        with contextlib.suppress(TypeError):  # (a handler no weak reference can hold)
            _GIVEN[id(script)] = script
    return script


def _signal(sig, handler):
    """signal.signal (the `_signal` module's, which it calls: a script's `from signal import signal` before this
    import calls it too), its handler counted; a policy's own, set in its call, is the policy's."""
    whose = _whose() if _GIVEN.get(id(handler)) is not handler else None
    return _given(_SIGNAL(sig, _handler(handler, None if whose is None else (whose, _caller()))))


def _getsignal(sig):
    return _given(_GETSIGNAL(sig))


_exit.python, _start.python, _start_raw.python, _submit.python = _EXIT, _START, _START_RAW, _SUBMIT
_signal.python, _getsignal.python = _SIGNAL, _GETSIGNAL
os._exit, threading.Thread.start, futures.ThreadPoolExecutor.submit = _exit, _start, _submit
_thread.start_new_thread = _thread.start_new = _start_raw
signal_c.signal, signal_c.getsignal = _signal, _getsignal
setattr(sys.modules[os.name], "_exit", _exit)  # posix._exit, the same function
_EARLY = set()  # the code of a plain function set as a handler before this import, left as it is (a script compares
_PENDING = []  # its own with getsignal's) and found on the stack; any other (a decorator's closure, one code for many;
for _s in signal.valid_signals():  # an object, a partial) is wrapped: here, or, imported in a loader thread (only
    with contextlib.suppress(OSError, ValueError, TypeError):  # the main thread sets them), at the main thread's
        if callable(_h := _GETSIGNAL(_s)) and _handled(_h) is None:  # first policy call (`_early`)
            if isinstance(_h, types.FunctionType) and _h.__closure__ is None:
                _EARLY.add(_h.__code__)
            elif threading.current_thread() is threading.main_thread():
                _SIGNAL(_s, _handler(_h))
            else:
                _PENDING.append((_s, _h))


def _early():
    """Wrap the early handlers an import off the main thread could not, each where it is still the one set."""
    while _PENDING:
        sig, h = _PENDING.pop()
        with contextlib.suppress(OSError, ValueError, TypeError):
            if _GETSIGNAL(sig) is h:
                _SIGNAL(sig, _handler(h))


class _Watched(_Kept):
    def __init__(self, policy, rows):
        self.policy, self.rows = policy, rows

    def __enter__(self):
        rows = self.rows
        _copying(type(rows))
        self.held = _held(rows)  # kept so: a policy that keeps rows keeps copies
        for f in ROWS_FIELDS:  # the state's views leave rows.__dict__ for _HELD
            if f in rows.__dict__:
                self.held["fields"][f] = rows.__dict__.pop(f)
        self.snap()
        self.calling = True
        try:  # last, and undone where a signal's handler raises (Ctrl-C) before the call: __exit__ would never run
            self.calling = _hold(_CALLING, self.policy, sys._getframe(1))  # (a policy calling another, watched, is
            # still in its own call)
        except BaseException:
            _unhold(_CALLING, self.calling)
            raise

    def __exit__(self, kind, e, tb):  # on every policy call: the name is looked up only for an error
        _unhold(_CALLING, self.calling)
        changed = self.put_back()  # whatever else happened: a policy that changed a setting and then raised left it
        if isinstance(e, PolicyError) or from_handler(e):  # the checker's own stop (checker.timed),
            return False  # a policy that calls another, or a signal's handler's (sys.exit, a TimeoutError) raised here
        if e is not None:
            _STOPPED.clear()  # (a stop its own pool's thread made is what it raised)
        if e is not None and not isinstance(e, KeyboardInterrupt):  # sys.exit() or an exception class of the policy's
            # own (a BaseException) is the policy's failure, not the program's end; Ctrl-C is the user's
            err = PolicyError(f"policy {policy_name(self.policy)} raised {_typename(e)}: {_said(e)} {_where(self.policy, e)}"
                              + (f" (it had changed {changed}: put back where it can be)" if changed else ""))
            err.original = e  # what the policy raised (the checker tells a refusal, ValueError, from a crash)
            raise err from None
        if e is not None:  # KeyboardInterrupt: the user's, not the policy's
            return False
        for field, x in self.held["copies"].items():  # a copy not written since it was made
            if x._version != self.held["made"][field]:
                raise PolicyError(f"policy {policy_name(self.policy)} wrote into rows.{field}: it was shown a copy of the "
                                  "multi-state's memory (attn: the step's), so the state is unchanged, but a policy must "
                                  "compute new tensors and change nothing it is shown")
        if changed:
            others = [t.name for t in threading.enumerate()  # a daemon too (a watchdog), but not the lab's own
                      if t is not threading.current_thread() and not t.name.startswith("msrnn-")]
            others += ["one that has ended since"] if _thread._count() < self.threads else []
            raise PolicyError(f"policy {policy_name(self.policy)} changed {changed} (put back where it can be): a policy "
                              "must not change global settings" + (  # they are the process's: any thread's change shows
                                  f"; or another thread of this process ({', '.join(others)}) changed it while the policy "
                                  "ran, and its change was undone: change settings before or after a run" if others else ""))
        if said := stopped():
            err = PolicyError(said)
            err.stop = True  # (a key's probe, which takes a policy's failure as a refusal, lets it pass)
            raise err
        return False



SCORE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_scores(policy, rows, scores) -> torch.Tensor:
    """What policy(rows) returned, checked: a float tensor (B, 1, n) for the layer or (B, Hkv, n) per
    KV head, on the rows' device, with no NaN."""
    name = policy_name(policy)
    B, H, n = rows.pos.shape
    nested = isinstance(scores, torch.Tensor) and scores.is_nested  # which has no shape to read
    if nested or not (isinstance(scores, torch.Tensor) and scores.dtype in SCORE_DTYPES and scores.dim() == 3
                      and scores.shape[0] == B and scores.shape[1] in (1, H) and scores.shape[2] == n):
        got = "a nested tensor" if nested else f"{scores.dtype} {tuple(scores.shape)}" \
            if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise PolicyError(f"policy {name} must return a float tensor of scores (float16 to float64: float8 and "
                          f"complex cannot be ranked), shape ({B}, 1, {n}) "
                          f"for the layer or ({B}, {H}, {n}) per KV head (the lowest is dropped); got {got}")
    if scores.layout != torch.strided or scores.device != rows.pos.device:
        raise PolicyError(f"policy {name} returned scores on {scores.device} ({scores.layout}); the rows are on "
                          f"{rows.pos.device} (torch.strided): compute the scores from the rows, where they are")
    if not torch.compiler.is_compiling() and scores.device.type != "meta" and scores.isnan().any():
        if not rows.attn.isfinite().all() or not rows.query.isfinite().all():  # not the policy's doing
            raise FloatingPointError(
                f"the model's attention is not finite at layer {rows.layer}, position {rows.t} ({rows.attn.dtype}), so "
                f"policy {name}'s scores are NaN: the computation overflowed its dtype (float16 ends at 65504: "
                "run in float32 or bfloat16), or a weight or a T2R tail's gain is inf or NaN")
        raise PolicyError(f"policy {name} returned NaN scores (layer {rows.layer}, position {rows.t}): NaN cannot be "
                          "ranked, so which row goes would be arbitrary (rows.prev is NaN for a row never scored: "
                          "rows.prev.nan_to_num(...)); inf keeps a row, -inf drops it")
    return scores


def score_rows(policy, rows) -> torch.Tensor:
    """policy(rows), watched and checked: MultiState.scores' three lines, for the views beside it."""
    with policy_call(policy, rows):
        scores = policy(rows)
    return check_scores(policy, rows, scores)


def wraps(policy):
    """functools.wraps for a policy: its __name__, __doc__ and __dict__ copied onto a wrapper, where reading one may
    run the policy's own code (a property that raises, even SystemExit): named, not the command's silent end."""
    def decorate(wrapper):
        try:
            return functools.update_wrapper(wrapper, policy)
        except KeyboardInterrupt:
            raise
        except BaseException as e:
            raise ValueError(f"policy {policy_name(policy)}: reading its attributes (__name__, __doc__, __dict__) raised "
                             f"{_typename(e)}: {_said(e)}") from None
    return decorate


def numpy_value(x):
    """A numpy scalar's value by numpy's own reading (a subclass's item() or __float__ never runs), or TypeError where
    numpy holds no number for its class (a plain class first in its bases makes it an object: item() read its bytes
    as one, and the process died)."""
    if _numpy_object(x):
        raise TypeError(f"a {_typename(x)} holds no number numpy can read")
    x = np.generic.item(x)
    for part in (x.real, x.imag) if isinstance(x, np.inexact) else ():  # a longdouble's item() is itself: 1e4000 would
        if np.isfinite(part) and not math.isfinite(float(part)) or part != 0 and float(part) == 0:  # be read as inf,
            raise TypeError(f"a {_typename(x)} outside float64's range")  # 1e-4000 as 0.0 (a clongdouble's parts too)
    return float(x) if isinstance(x, np.floating) else complex(x) if isinstance(x, np.complexfloating) else x


def _numpy_object(x) -> bool:
    """A numpy scalar numpy holds as an object (or void): a plain class first in its bases."""
    try:
        return np.dtype(type(x)).kind in "OV"
    except Exception:
        return True


def shown(x) -> str:
    """repr(x) for a message, but for a numpy scalar numpy holds as an object, whose repr kills the process."""
    return f"a {_typename(x)}" if np.generic in type(x).__mro__ and _numpy_object(x) else repr(x)


def policy_name(policy) -> str:
    """A function's name, a partial's function's, else a callable instance's class (its repr holds an address)."""
    def read(x, name):  # an attribute of the policy's own that raises (a __getattr__ of a dict's KeyError) is no name
        try:
            got = getattr(x, name, None)
        except BaseException as e:  # sys.exit() in a property too; not Ctrl-C
            if isinstance(e, KeyboardInterrupt):
                raise
            return None
        return got if name == "func" or isinstance(got, str) else None
    inner = read(policy, "func") or policy
    return read(policy, "__name__") or read(inner, "__name__") or _typename(inner)


def _typename(x) -> str:
    """type(x).__name__, or a word where a metaclass's __name__ raises."""
    try:
        name = type(x).__name__
    except KeyboardInterrupt:
        raise
    except BaseException:  # a metaclass's __name__ that raises, even SystemExit
        name = None
    return str.__str__(name) if isinstance(name, str) else "an object of an unnamed class"


def _said(e) -> str:
    """What an exception says, or that it cannot say it (its __str__ raised)."""
    try:
        return str.__str__(str(e))  # a plain str: a subclass's own __format__ would run in every message after
    except BaseException as inner:  # sys.exit() in a __str__ too; not Ctrl-C
        if isinstance(inner, KeyboardInterrupt):
            raise
        return f"(its message could not be printed: {type(inner).__name__})"


def _where(policy, e) -> str:
    """'at file:line: code' for the innermost frame in the policy's own file (else the innermost)."""
    try:
        fn = inspect.unwrap(policy)
        home = inspect.getsourcefile(getattr(fn, "func", fn))
    except Exception:  # a built-in; a __wrapped__ that loops; a __getattr__ of the policy's own that raises
        home = None
    frames = traceback.extract_tb(e.__traceback__)[1:]  # [0] is the frame of the `with` around the call
    mine = [f for f in frames if f.filename == home] or frames
    return f"(at {mine[-1].filename}:{mine[-1].lineno}: {mine[-1].line})" if mine else ""


def digest(data: dict) -> str:
    """A results file's seal: a hash of all it holds but the seal (about.digest), which `save` writes. A file
    changed by hand since its run wrote it (a row given another's bytes, a number retyped) no longer matches it,
    and the pages refuse it: the table checks catch what no run makes, the seal what a run made otherwise."""
    body = {**data, "about": {k: v for k, v in data["about"].items() if k != "digest"}}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def sealed(data, name=None) -> dict:
    """`data`, a results file as read, if it holds what its run wrote (its seal, about.digest, matches) under the
    name it is read as (about.name: t2r_mini_quick.json copied over t2r_mini.json is not the full run), else an
    error that says so: the pages and the runs that read another's results take nothing typed by hand."""
    about = data.get("about") if isinstance(data, dict) else None
    if not isinstance(about, dict):
        raise ValueError("it holds no `about` object (the command and code that made it): not a run's results")
    if about.get("digest") != digest(data):
        raise ValueError(f"its about.digest ({about.get('digest')}) is not that of what it holds ({digest(data)}): it is "
                         f"not as its run wrote it (changed by hand, or written before runs sealed their results); run "
                         f"`{about.get('command')}` again")
    if name is not None and about.get("name") != name:  # no name at all: sealed before files were named, any run's
        raise ValueError(f"it is the results of {about.get('name', 'a run that names none')!r} (`{about.get('command')}`), "
                         f"not of {name!r}: a file copied under another's name, or from before results named their run")
    return data

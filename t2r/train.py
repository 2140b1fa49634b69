"""T2R's training and saving; the method is t2r/linear.py, the comparison `python demo.py t2r` t2r/compare.py.

Training is attention transfer as LoLCATs (arXiv 2410.10254) does it, an MSE between each layer's
linear and softmax outputs: only φ learns, so that each layer's linear attention reproduces its
softmax output on the frozen model's own q, k, v. Then a finetune: LoRA (LoLCATs') or every weight
(Kasai et al.'s T2R, arXiv 2103.13076, whose map is linear.py's kind "t2r").
"""
import copy
import dataclasses
import functools
import hashlib
import json
import math
import os
import pathlib
import re
import sys
import time
import unicodedata

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import llama
import msrnn
from data import corpus
from engine import guards
from lab import checker, experiments, harness, specs
from t2r import linear
from t2r.linear import FeatureMaps


FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)  # what maps are trained and read in


def save(maps: FeatureMaps, path, model: llama.Model | None = None):
    """The maps' weights and settings, as `load` reads them; maps `load` would refuse are not written. Given the
    model they were trained for, its config's key and some of its weights too: `load` warns of maps read with a model
    of other weights."""
    if not (isinstance(maps, torch.nn.Module) and all(hasattr(maps, a) for a in ("kind", "r", "window", "layers", "sinks",
                                                                                  "rotated", "gamma"))
            and isinstance(getattr(maps, "decay", None), bool)):  # FeatureMaps, or a course's copy of its class
        raise ValueError(f"save writes T2R feature maps (t2r.linear.FeatureMaps, their decay True or False), got "
                         f"{type(maps).__name__}")
    harness.check_file_path(path, "the maps' path")
    if odd := [f"{n!r} is {p.dtype}" for n, p in maps.named_parameters() if p.dtype not in FLOATS]:
        raise ValueError(f"the maps' tensor {odd[0]}, not a float (float16, bfloat16, float32 or float64): load would "
                         "refuse the file, so it is not written")
    if not (guards.integer(maps.r) and maps.r >= 1 and isinstance(maps.rotated, bool) and isinstance(maps.kind, str)):
        raise ValueError(f"the maps' r {maps.r!r}, rotated {maps.rotated!r} or kind {maps.kind!r} are not what load reads: "
                         "r >= 1 (r = 0 is a tail's test), rotated True or False, kind a name")  # the rest: read back, below
    if not isinstance(cfg := getattr(maps, "cfg", None), llama.Config):  # FeatureMaps keep the config they were built for
        raise ValueError("the maps keep no llama.Config (`cfg`; a FeatureMaps of an older linear.py?): build them with "
                         "this t2r/linear.py, so that save can read the file back as load would")
    if any(p.is_meta for p in maps.parameters()):
        raise ValueError("the maps are on the meta device: they hold no values to save")
    meta = {"kind": maps.kind, "r": str(maps.r), "window": str(maps.window), "layers": ",".join(map(str, maps.layers)),
            "sinks": str(maps.sinks), "decay": str(int(maps.decay)), "rotated": str(int(maps.rotated)),
            **(model_key(model) if model is not None else {})}
    dtype = functools.reduce(torch.promote_types, [p.dtype for p in maps.parameters()] or [torch.float32])  # the
    # maps' own, the widest where they mix (float16 with bfloat16 is float32)
    with harness.atomic(pathlib.Path(path)) as tmp:
        save_file({n: p.detach().contiguous() for n, p in maps.named_parameters()}, str(tmp), metadata=meta)
        try:  # read back by load's own rules, in the maps' dtype: a file load refuses is never written
            back = _read(tmp, cfg, dtype, "cpu")
        except (MemoryError, ValueError) as e:
            raise ValueError(f"the maps are not what load reads ({str(e).replace(f'{tmp}: ', '')}): load would refuse "
                             "the file, so it is not written") from None
        if back.r != maps.r:  # ELU+1 keeps head_dim features, whatever r it is told
            raise ValueError(f"the maps say r {maps.r}; {maps.kind} maps of this config have r {back.r}: load would "
                             "refuse the file, so it is not written")


def load(path, model: llama.Model) -> FeatureMaps:
    """Maps saved by `save`, checked against the model: every tensor present, no other, each shape right; and
    where the file names the model it was trained for, that model (one of the same shapes is another's)."""
    maps = _read(path, model.config, model.dtype, model.device)
    with safe_open(str(path), "pt") as f:
        meta = f.metadata() or {}
    if "config" in meta and (other := _other(meta, model_key(model))):
        print(f"[msrnn] warning: {path} holds maps trained for a model of other weights or config ({other}): what "
              "they measure is not this model's T2R", file=sys.stderr)
    return maps


def model_key(model: llama.Model) -> dict:
    """The config and weights a model's maps were trained for, as the file's metadata keeps them: its config's key
    and 16 values of each weight tensor, which `load` reads as one model's within bfloat16's rounding, whatever float
    each side computes in (a key of rounded bits was not: float16's weights rounded again to bfloat16 are not always
    bfloat16's)."""
    picks = lambda w: w.detach().flatten()[torch.linspace(0, w.numel() - 1, 16).long()].float().tolist()
    config = {k: float(v) if type(v) in (int, float) else v for k, v in dataclasses.asdict(model.config).items()
              if k != "max_positions"}  # a guard's bound, no number's; a theta of 10000 is one of 10000.0
    return {"config": harness.fingerprint(repr(config)), "weights": json.dumps([picks(w) for w in experiments.weights(model)])}


def _other(meta: dict, mine: dict) -> str | None:
    """How the model a maps file was trained for differs from this one: another config, or weights that differ by
    more than bfloat16 rounds (2^-8 of a value, twice: float16 and bfloat16 copies of one checkpoint)."""
    if meta["config"] != mine["config"]:
        return "another config"
    try:
        theirs, ours = json.loads(meta["weights"]), json.loads(mine["weights"])
        far = sum(abs(a - b) > 2 ** -7 * max(abs(a), abs(b)) + 1e-6 for t, o in zip(theirs, ours, strict=True)
                  for a, b in zip(t, o, strict=True))
    except (KeyError, TypeError, ValueError):  # a file's metadata is anyone's to write
        return "its weights' record is unreadable"
    return f"{far} of its {sum(map(len, ours))} sampled weights differ" if far else None


def _read(path, c: llama.Config, dtype, device) -> FeatureMaps:
    """load's reading, for a model of config c, dtype and device (save reads its file back with it)."""
    if not isinstance(path, (str, os.PathLike)) or type(os.fspath(path)) is not str or not os.fspath(path):  # bytes
        raise ValueError(f"the maps' path is a file's path (str or pathlib.Path), got {path!r:.80}")  # were opened as
        # "b'...'" and called a corrupt file
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder: name the maps' file in it (train.save wrote a .safetensors file)")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no saved maps (train them first: python demo.py t2r)")
    try:
        with safe_open(str(path), "pt") as f:
            meta, tensors = f.metadata() or {}, {n: f.get_tensor(n) for n in f.keys()}
    except Exception as e:  # safetensors reports a truncated or corrupt file in many ways
        raise ValueError(f"{path}: cannot read it as a safetensors file ({e}); if it is maps that train.save wrote, "
                         "delete it and train again") from None
    if not {"kind", "r", "window", "layers"} <= meta.keys():
        raise ValueError(f"{path}: not a T2R maps file (its metadata lacks kind, r, window, layers)")
    if meta["kind"] not in FeatureMaps.KINDS:
        raise ValueError(f"{path}: field 'kind' is {meta['kind']!r}, not one of {', '.join(FeatureMaps.KINDS)}")
    number = lambda field, low: _field_int(path, field, meta[field], low)
    r, window = number("r", 1), number("window", 0)
    sinks = _field_int(path, "sinks", meta.get("sinks", "0"), 0)  # files saved before sinks and decay have neither
    decay = _field_int(path, "decay", meta.get("decay", "0"), 0)
    rotated = _field_int(path, "rotated", meta.get("rotated", "1"), 0)
    for field, value in (("decay", decay), ("rotated", rotated)):
        if value > 1:
            raise ValueError(f"{path}: field {field!r} is {value}, it must be 0 or 1")
    layers = [_field_int(path, "layers", i, 0) for i in meta["layers"].split(",") if i]
    if len(set(layers)) != len(layers):  # a layer twice would count its state twice (state_bytes)
        raise ValueError(f"{path}: field 'layers' names a layer twice: {meta['layers']!r}")
    if any(not 0 <= i < c.n_layers for i in layers):
        raise ValueError(f"{path}: field 'layers' swaps layers {layers}, the model has {c.n_layers}")
    log_h = tensors.get("log_h")  # the decay's horizons: named here, not as the default's in bfloat16
    if decay and (log_h is None or not log_h.is_floating_point() or log_h.shape != (c.n_layers, c.n_kv_heads)):
        raise ValueError(f"{path}: tensor 'log_h' (the decay's horizons) is " + ("missing" if log_h is None else
                         f"{log_h.dtype} {tuple(log_h.shape)}, this model needs a float ({c.n_layers}, {c.n_kv_heads})"))
    # the file's horizons, checked as a new decay's are (one that rounds to γ = 1 in the model's dtype never decays); one
    # trained under a token is a trained value, not a start (the file's own is copied in below)
    horizon = log_h.double().exp().clamp_min(1 + 1e-9) if decay else None
    try:  # FeatureMaps estimates its size and refuses an absurd r before allocating
        maps = FeatureMaps(c, r, meta["kind"], window, layers, dtype=dtype, sinks=sinks,
                           decay=bool(decay), rotated=bool(rotated), horizon=horizon).to(device)
    except (MemoryError, ValueError) as e:  # the message names r, the window, the sinks or the file's horizons
        raise ValueError(f"{path}: " + str(e).replace("the decay's starting horizon", "tensor 'log_h' (the decay's "
                         "horizons, as exp(log_h))").replace("a decay from a horizon", "tensor 'log_h': a decay from a "
                         "horizon").replace("; give a shorter horizon", "; train shorter horizons")) from None
    want = dict(maps.named_parameters())
    for name in sorted(want.keys() | tensors.keys()):
        if name not in tensors or name not in want:
            raise ValueError(f"{path}: tensor {name!r} is " + ("missing" if name in want else "not a T2R map"))
        if tensors[name].dtype not in FLOATS:  # an integer or bool would be cast without a word
            raise ValueError(f"{path}: tensor {name!r} is {tensors[name].dtype}, not a float (float16, bfloat16, "
                             "float32 or float64)")
        if tensors[name].shape != want[name].shape:
            raise ValueError(f"{path}: tensor {name!r} has shape {tuple(tensors[name].shape)}, this model needs "
                             f"{tuple(want[name].shape)} (maps made for another model?)")
        if not torch.isfinite(tensors[name]).all():
            raise ValueError(f"{path}: tensor {name!r} holds NaN or infinite values")
        with torch.no_grad():
            want[name].copy_(tensors[name])
        if not torch.isfinite(want[name]).all():  # finite in the file, past the model's dtype
            raise ValueError(f"{path}: tensor {name!r} overflows {want[name].dtype}, this model's dtype")
    return maps


def maps_from(model: llama.Model, spec: str | None = None, path=None) -> tuple[linear.FeatureMaps, str]:
    """A tail's maps for the command line, and a line saying which: the maps a training run saved
    (path, read by `load`), or untrained maps of spec 'kind:r' ('hedgehog:16', 'relu:16', 'elu')."""
    if spec is not None and not isinstance(spec, str):
        raise ValueError(f"a tail is kind:r, e.g. hedgehog:16, relu:16 or elu; got {spec!r}")
    kind, _, r = (spec or "").partition(":")
    if r and not (r.isascii() and r.isdigit()):  # '²' is a digit to isdigit, not to int; '+16', '16.0', ' 16' are no r
        raise ValueError(f"a tail is kind:r with r >= 1 features, e.g. hedgehog:16, relu:16 or elu; got {spec!r}")
    r = r.lstrip("0") or r[:1]  # 'relu:0016' is relu:16, 'relu:000' is relu:0
    if spec and kind not in linear.FeatureMaps.KINDS:  # ':16', ' relu:16': no kind, not one that differs from a file's
        raise ValueError(f"a tail is kind:r, a kind of {', '.join(linear.FeatureMaps.KINDS)}; got {spec!r}" +
                         (" (a file of trained maps goes with --tail-maps)" if "/" in spec or spec.endswith(".safetensors") else ""))
    if path is not None:
        maps = load(path, model)
        if maps.window:  # a tail reads no window of its own (the policy's rows are its exact ones): said, not ignored
            raise ValueError(f"{path} holds a hybrid's maps (window {maps.window}): a tail's exact rows are the policy's, "
                             f"and it would ignore the window; pass a tail's maps (demo.py t2r saves them as t2r_tail_*)")
        if not maps.layers:  # its tail would fold nothing: the policy alone, under another name
            raise ValueError(f"{path} swaps no layer (its field 'layers' is empty): a tail of it is the policy alone")
        if spec and (maps.kind != kind or (r and r != str(maps.r))):
            raise ValueError(f"--tail {spec}, but {path} holds {maps.kind} maps of r={maps.r}")
        return maps, f"tail: {maps.kind} maps of r={maps.r} from {path}"
    if not kind or (r and (len(r) > 9 or int(r) < 1)):  # its digits checked above; 5,000 of them pass int()'s limit
        raise ValueError(f"a tail is kind:r with r >= 1 features, e.g. hedgehog:16, relu:16 or elu; got {spec!r}")
    if kind == "elu" and r:  # its features are x's own: an r would be dropped, and the label would lie
        raise ValueError(f"elu takes no r: its features are x's own (r = head_dim); got {spec!r}")
    if kind != "elu" and not r:  # no default: t2r.speed's was 64, this one's 16, under one label
        raise ValueError(f"a tail of {kind} needs its features: {kind}:r, e.g. {kind}:16; got {spec!r}")
    maps = linear.FeatureMaps(model.config, int(r or 0), kind, dtype=model.dtype).to(model.device)
    return maps, (f"tail: UNTRAINED {maps.kind} maps of r={maps.r} (their initial values; python demo.py t2r "
                  f"trains a tail and saves results/t2r_tail_*-maps.safetensors: pass it with --tail-maps)")


def _field_int(path, field, text, low) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{path}: field {field!r} is {text!r}, not an integer") from None
    if value < low:
        raise ValueError(f"{path}: field {field!r} is {value}, it must be at least {low}")
    return value


# ---------------------------------------------------------------- the training text

EVALUATED = ("alice29", "asyoulik")  # the books every T2R perplexity reads: never training text
LICENSES = pathlib.Path("/usr/share/common-licenses")  # Debian's base-files: prose on every Debian machine


BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"  # what orders text, drawn as nothing
PARAGRAPH = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2029"  # what ends a paragraph, and with it every override


def _drawn(text: str) -> str:
    """`text` as a right-to-left override (U+202E) draws it: in each paragraph, from its first override on, each line
    (U+2028 parts lines, not paragraphs) reversed, the ordering controls left out. A reading, not Unicode's whole
    algorithm (a line's plain text after a PDF comes out reversed): read beside the text as stored, it finds a copy
    stored backwards however the overrides are broken up."""
    out = []
    for para in re.split(f"[{PARAGRAPH}]", text):
        at = para.find("\u202e")
        lines = para[at:].split("\u2028") if at >= 0 else []
        out.append(para if at < 0 else para[:at] + "\u2028".join(re.sub(f"[{BIDI}]", "", line)[::-1] for line in lines))
    return "\n".join(out)


def _spans(text: str) -> str:
    """`text` with each right-to-left override's span reversed on its own (from U+202E to its PDF, or to the line's
    end), once the controls that change nothing (an empty isolate or embedding, a lone PDI) and the isolates are left
    out: a copy stored word by word backwards, each word in its own override."""
    while True:
        shorter = re.sub("[\u2066-\u2068]\u2069|[\u202a-\u202e]\u202c", "", text)
        if shorter == text:
            break
        text = shorter
    text = re.sub("[" + BIDI.replace("\u202c", "").replace("\u202e", "") + "]", "", text)  # but RLO and PDF
    return re.sub(f"\u202e([^\u202c\u202e{PARAGRAPH}\u2028]*)", lambda m: m.group(1)[::-1], text)


def letters(text: str) -> str:
    """The letters and digits of `text`, read after NFKC and case folding, with everything else left out (spaces,
    punctuation, a row of stars, and what a copy may hide between its letters: a zero-width space, a control, a
    blank drawn as a letter, corpus.BLANK): a copy in disguise reads as the copy."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return re.sub(r"[\W_" + "".join(map(chr, corpus.BLANK)) + "]+", "", text.casefold())


def shingles(text: str, n: int = 60) -> set:
    """Every run of n of `letters(text)` by its hash, of the text as stored and, where it holds a right-to-left
    override, as drawn (`_drawn` line by line, `_spans` span by span): two texts that share one share a passage (60 letters are about 12 words, a
    sentence no two unrelated texts write alike)."""
    runs = set()
    for reading in (text, _drawn(text), _spans(text)) if "\u202e" in text else (text,):
        reading = letters(reading)
        runs |= {hash(reading[i:i + n]) for i in range(len(reading) - n + 1)}
    return runs


def _licence(text: str) -> str:
    """A licence text by what makes it that licence: NFKC, case folded, its letters, marks (a Hindi vowel sign),
    digits, symbols ($ and €, + and −) and the punctuation between two digits (1.1 and 11), without spacing, other
    punctuation or what is drawn as nothing: copies in other quotes, commas, case or spacing read once."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(c for i, c in enumerate(text) if ord(c) not in corpus.BLANK and (
        unicodedata.category(c)[0] in "LMNS" or unicodedata.category(c)[0] == "P" and 0 < i < len(text) - 1
        and text[i - 1].isdigit() and text[i + 1].isdigit()))


def _here(path) -> bool:
    """Whether a path names the current folder ('', '.', 'sub/..', '../here', a link to it, a PathLike of any): a
    folder never meant."""
    try:
        text = os.fsdecode(path)  # ' ' is a folder of that name, not this one
        return os.path.normpath(text or ".") == "." or os.path.samefile(os.path.expanduser(text), ".")
    except (OSError, TypeError, ValueError):  # no such folder (yet); a PathLike of no path (_folder names it)
        return False


def _same(a: pathlib.Path, b: pathlib.Path) -> bool:
    """Whether two paths name one folder (a link, '..' in it), or the same path where neither exists."""
    try:
        return a == b or os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _folder(path, what: str) -> pathlib.Path:
    """A folder's path from a str, bytes or PathLike of either ('~' expanded), or ValueError naming `what`."""
    try:
        folder = pathlib.Path(os.fsdecode(path)).expanduser()
    except (RuntimeError, TypeError) as e:  # '~nosuchuser' has no home; __fspath__ gave no path
        raise ValueError(f"{what} {path!r}: {e}") from None
    if "\0" in str(folder):  # accepted here, every file in it would fail later
        raise ValueError(f"{what} {path!r} holds a NUL character, which no file system takes")
    return folder


def _leftover(name: str, names=()) -> bool:
    """A file or folder tools leave beside a user's texts, never a text of theirs: hidden ones (.git, .gitignore, an
    editor's lock .~lock.a.odt#), backups and autosaves (a.txt~, a.txt.bak, .orig, .save, .save.1, .swp, #a.txt#), a
    Mac zip's __MACOSX and Icon, Windows' desktop.ini, Thumbs.db, shortcuts, a file's stream copied out beside it
    (a.txt:Zone.Identifier, a.txt:SmartScreen where a.txt is among `names`: a stream's name has no space and no text's
    suffix) and a download not finished (.crdownload, .part). "#1 Intro.txt" and "Lecture 3: Attention.txt" are texts."""
    low = name.lower()
    return low.startswith(".") or low.startswith("#") and low.endswith("#") or low.endswith(
        ("~", ".bak", ".orig", ".save", ".swp", ".tmp", ".url", ".lnk", ".crdownload", ".part", ".download")) \
        or re.search(r"\.save\.\d+$", low) is not None or low.endswith(":zone.identifier") \
        or re.fullmatch(r"[^:]+:[\w.$-]+", name) is not None and name.rpartition(":")[0] in names \
        and not re.search(r"\.(txt|md|text|rst)$", low) \
        or low in ("__macosx", "desktop.ini", "thumbs.db", "icon\r")


def training_sources(books=("lcet10", "plrabn12"), licenses=LICENSES) -> list[str]:
    """Every training text: the two Canterbury books that are not evaluated on, and each distinct
    license text of `licenses` where that folder exists (links and copies read once). alice29 and
    asyoulik, the evaluation books, are never among them."""
    books = guards.listed(books, "books is a list of book names")
    if not all(isinstance(b, str) for b in books) or set(books) & set(EVALUATED) or len(set(books)) < len(books):
        raise ValueError(f"training books are names of other books than the evaluation's ({', '.join(EVALUATED)}), each "
                         f"once; got {books}")  # evaluated on; a book twice weighs double
    sources = [corpus.book(b) for b in books]
    if licenses is not None and not isinstance(licenses, (str, os.PathLike)):
        raise ValueError(f"licenses is a folder of texts, or None; got {licenses!r}")
    given, licenses = licenses, None if licenses is None else _folder(licenses, "licenses")
    default = licenses is not None and _same(licenses, LICENSES)  # by any spelling: read where it exists
    if licenses is not None and not default and _here(licenses):  # "": the current folder
        raise ValueError(f"licenses {given!r} is the current folder: name a folder of licence texts, or None")
    if licenses is not None and not default and not licenses.is_dir():  # dropped without a word
        raise ValueError(f"licenses {licenses} is not a folder (the default, {LICENSES}, is read where it exists)")
    if licenses is not None and licenses.is_dir():
        names = {f.name for f in licenses.iterdir()}
        entries = [f for f in sorted(licenses.iterdir()) if not _leftover(f.name, names)]
        if not default and (skipped := sorted(n for n in names - {f.name for f in entries} if not n.startswith("."))):
            print(f"[msrnn] left out of {licenses}, as what tools leave beside texts (a backup, an autosave, a download "
                  f"not finished): {', '.join(skipped[:8])}{' …' if len(skipped) > 8 else ''}", file=sys.stderr)
        seen, subs = {}, [f.name + "/" for f in entries if f.is_dir()]
        if subs and not default:  # a folder of texts in sub-folders trained on its top files alone, without a word
            raise ValueError(f"licenses {licenses}: its sub-folder {', '.join(subs)} is not read (only the files at its "
                             "top are): move their texts up, or name that folder")
        for f in entries:
            if f.is_symlink() and not f.exists():  # dropped without a word, a licence never trained on
                raise ValueError(f"licenses {licenses}: {f.name} is a link to nothing (or a loop)")
            if f.is_file():  # GPL -> GPL-3 and the like, or a copy with other line ends or quotes: one copy
                try:
                    text = corpus.read(f, corpus.marked(f))  # UTF-8, or what a byte-order mark says (Notepad's UTF-16)
                except ValueError as e:  # its advice to name an encoding is a --text's: licences are read as UTF-8
                    said = re.split(r"[;:] (?:convert|name|fix|remove|save)", str(e))[0]  # what it is, without that advice
                    raise ValueError(f"{said}; licences are read as UTF-8 (or as a byte-order mark says): convert it, "
                                     f"or leave it out of {licenses}") from None
                if not _licence(text):
                    raise ValueError(f"licenses {licenses}: {f.name} holds no letter, digit or symbol: no licence text")
                seen.setdefault(_licence(text), (f, text))
        if not seen and not default:  # a folder of sub-folders, or empty: it added nothing
            raise ValueError(f"licenses {licenses} holds no text file (sub-folders are not read, nor what tools leave beside "
                             "texts: hidden files, backups, autosaves)")
        texts = [t for _, t in seen.values()]
        if long := [f"{f.name} ({len(t):,} characters)" for f, t in seen.values() if len(t) > 10**6]:
            raise ValueError(f"licenses {licenses}: {', '.join(long)} is no licence text (Debian's longest, GPL-3, "
                             "is 35,149 characters); a book?")  # the tokenizer's probe reads a text as long, in memory
        sources += texts
        runs = {b: shingles(corpus.book(b)) for b in (*EVALUATED, *books)}  # the books' own folder, a copy, a part,
        if held := sorted({f"{f.name} ({b})" for f, t in seen.values()  # rewrapped: tested on
                           for b in runs if runs[b] & shingles(t)}):  # and trained on, or trained on twice
            evaluated = any(f"({b})" in h for b in EVALUATED for h in held)
            raise ValueError(f"licenses {licenses} holds " + ("an evaluation book" if evaluated else "a training book "
                             "again") + f", or a part of one: {', '.join(held)}")
    return sources


def training_text(tok, length: int = 4096, books=("lcet10", "plrabn12"), licenses=LICENSES) -> torch.Tensor:
    """Chunks (N, length) of every training text (`training_sources`)."""
    texts = training_sources(books, licenses)
    experiments.check_tokenizer(tok, longest=max(map(len, texts), default=0))
    ids = [c for t in texts for c in corpus.chunks(tok.encode(t).ids, length)]
    if not ids:
        raise ValueError(f"the training texts hold no chunk of {length} tokens")
    return torch.tensor(ids)


# ---------------------------------------------------------------- resumable runs

def _save_run(path, params: dict, opt, meta: dict):
    """A run's trainable tensors, Adam's moments and step, and `meta` (JSON) in one safetensors file."""
    tensors = {f"param.{n}": p.detach().contiguous() for n, p in params.items()}
    for n, p in params.items():
        for key, value in opt.state.get(p, {}).items():  # step, exp_avg, exp_avg_sq
            tensors[f"adam.{key}.{n}"] = value.detach().contiguous()
    record = json.dumps(meta)
    with harness.atomic(pathlib.Path(path)) as tmp:  # the record sealed, as a results file is: edited, it is refused
        save_file(tensors, str(tmp), metadata={"run": record, "seal": _seal(record)})


def _seal(record: str) -> str:
    return hashlib.sha256(record.encode()).hexdigest()[:16]


def _safetensors(path) -> bool:
    """Whether a file opens as safetensors' do (damaged or not): 8 bytes, the length of a JSON header that fits."""
    with open(path, "rb") as f:
        head = f.read(9)
    return len(head) == 9 and int.from_bytes(head[:8], "little") + 8 <= os.path.getsize(path) and head[8:] == b"{"


def _load_run(path, params: dict, opt, settings: dict, total=None) -> dict:
    """Restore what _save_run wrote into `params` and `opt`, if it was saved with `settings` and not past
    `total` steps (every tensor and the record checked first, so that a file refused changes nothing); returns its meta."""
    try:
        with safe_open(str(path), "pt") as f:
            record, tensors = f.metadata() or {}, {n: f.get_tensor(n) for n in f.keys()}
    except Exception as e:
        if not _safetensors(path):  # a PyTorch .bin, a text named by mistake, or this trainer's, emptied or cut
            raise ValueError(f"{path} is no safetensors file, so no checkpoint of this trainer as it is: if it was "
                             "one (emptied or cut), delete it to start again; if it is another file (a PyTorch .bin "
                             "or .pt, a text), name a file of its own for the checkpoint") from None
        raise ValueError(f"{path}: cannot read this training checkpoint ({guards._said(e)}); delete it to start "
                         "again") from None
    if "run" not in record:  # a model's weights, saved maps: another file named by mistake, not to be deleted
        raise ValueError(f"{path} holds {len(tensors)} tensors but no training run's record: it is no checkpoint of "
                         "this trainer (a model's weights? saved maps?); name a file of its own for the checkpoint "
                         "(where `demo.py t2r` named it, which takes no name, move that file away)")
    try:
        meta = json.loads(record["run"])
    except ValueError as e:
        raise ValueError(f"{path}: cannot read this training checkpoint ({e}); delete it to start again") from None
    if record.get("seal") != _seal(record["run"]):
        raise ValueError(f"{path}: its run record is not as the run wrote it (changed by hand, or saved by an older "
                         "version); delete the file to start again")
    kinds = {"settings": dict, "step": int, "seconds": (int, float), "tokens": int, "losses": list, "curve": list}
    number = guards.number
    if not isinstance(meta, dict) or any(not isinstance(meta.get(k), t) or isinstance(meta.get(k), bool)
                                         for k, t in kinds.items()) or meta["step"] < 0 or meta["tokens"] < 0 \
            or not number(meta["seconds"]) or meta["seconds"] < 0 or len(meta["losses"]) != meta["step"] \
            or not all(number(x) or isinstance(x, list) and all(map(number, x)) for x in meta["losses"]):
        raise ValueError(f"{path}: its run record is damaged (it needs {', '.join(kinds)}, a loss per step, "
                         f"nothing negative); delete the file to start again")
    for key, value in settings.items():  # (a run saved before "frozen" was recorded froze nothing)
        if meta["settings"].get(key, [] if key == "frozen" else None) != value:
            why = {"students": " (a student's key holds its code, its file's globals and what it closes over or holds: "
                               "one of them differs)",
                   "frozen": " (the parameters with requires_grad off, trained as they started)",
                   "start": " (the maps are not as that run's began: another seed or size, or trained since; give maps "
                            "made as that run's were, and the file restores its weights)"}
            raise ValueError(f"{path}: saved with {key}={meta['settings'].get(key)!r}, this run asks "
                             f"for {value!r}{why.get(key, '')}; delete the file or use another")
    if total is not None and meta["step"] > total:  # served, it would be a longer run's weights under this one's budget
        raise ValueError(f"{path}: a run of {meta['step']} steps, past the {total} this run asks for; give at least "
                         f"its epochs, or delete the file or use another")
    per_step = settings["chunks"][-1] * settings.get("batch", 1) if "chunks" in settings else None  # chunks a step
    if per_step and meta["tokens"] != meta["step"] * per_step:
        raise ValueError(f"{path}: its run record says {meta['tokens']:,} tokens in {meta['step']} steps of "
                         f"{per_step}: damaged; delete the file to start again")
    adam = ("step", "exp_avg", "exp_avg_sq")
    for n, p in params.items():  # every tensor checked before any is loaded: a damaged file changes nothing
        t = tensors.get(f"param.{n}")
        if t is None or t.shape != p.shape:
            raise ValueError(f"{path}: tensor 'param.{n}' is " + ("missing" if t is None else
                             f"{tuple(t.shape)}, this run needs {tuple(p.shape)} (another model or setting?)"))
        if not torch.isfinite(t).all():
            raise ValueError(f"{path}: tensor 'param.{n}' holds NaN or infinite values")
        state = {k: tensors[f"adam.{k}.{n}"] for k in adam if f"adam.{k}.{n}" in tensors}
        if state and len(state) < len(adam):
            raise ValueError(f"{path}: Adam's {', '.join(k for k in adam if k not in state)} of {n!r} is missing; "
                             f"delete the file to start again")
        for k, t in state.items():  # moments a run could not have made: NaN, or a negative second moment
            if k != "step" and t.shape != p.shape or not torch.isfinite(t).all() or (k != "exp_avg" and (t < 0).any()):
                raise ValueError(f"{path}: Adam's {k} of {n!r} is damaged (NaN, infinite, negative or of another "
                                 f"shape); delete the file to start again")
    for n, p in params.items():
        with torch.no_grad():
            p.copy_(tensors[f"param.{n}"])
        if f"adam.step.{n}" in tensors:  # Adam keeps its step on the CPU
            opt.state[p] = {k: tensors[f"adam.{k}.{n}"].to("cpu" if k == "step" else p.device) for k in adam}
    return meta


def _resume(checkpoint, params, opt, settings: dict, log, total=None) -> dict:
    """The meta of a saved run of the same settings, not past `total` steps (its tensors restored), or a fresh one."""
    if checkpoint is not None:  # named before the training, not after it
        harness.check_file_path(checkpoint, "checkpoint")
    if checkpoint is None or not os.path.isfile(checkpoint):
        return {"settings": settings, "step": 0, "seconds": 0.0, "tokens": 0, "losses": [], "curve": []}
    meta = _load_run(checkpoint, params, opt, settings, total)
    log and log(f"   resuming {checkpoint} at step {meta['step']} ({meta['tokens']:,} tokens)")
    return meta


def _order(n: int, step: int, seed: int) -> int:
    """Chunk of global step `step`: a fresh permutation of the n chunks every epoch (so a resumed run
    reads exactly what one run through would)."""
    epoch, j = divmod(step, n)
    return int(torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))[j])


class Teacher:
    """The frozen model's attention on training chunks (N, T), layer by layer: feed(c, learn) calls
    learn(i, q, k, v, o) for every layer i of chunk c in turn, with q (1, Hkv, G, T, hd), k, v (1, Hkv, 1,
    T, hd) detached and the softmax output o (1, Hkv, G, T, hd). Streamed (no folder): the model reads
    the chunk every time, o goes on to the next layer, nothing is kept. Cached (`Teacher.cached`): the
    first feed of a chunk also keeps it in folder/<c>.safetensors, and every later one (any epoch, map
    set or run) reads it back; folder/teacher.key says whose attention it holds (`of`), and another's is
    refused. A 1,024-token chunk of the default model is about 189 MB in float32."""

    def __init__(self, model, chunks, folder=None, key=None):
        if not isinstance(model, llama.Model):
            raise ValueError(f"a teacher is a llama.Model (load_weights.load_model()), got {type(model).__name__}")
        given, folder = folder, None if folder is None or not isinstance(folder, (str, os.PathLike)) \
            else _folder(folder, "the teacher's folder")  # read once: a PathLike may give another path next time
        if given is not None and (folder is None or _here(folder)):
            raise ValueError(f"the teacher's folder is a path of its own (Path('') is the current folder), or None to "
                             f"stream; got {given!r}")
        if not (isinstance(chunks, torch.Tensor) and chunks.ndim == 2 and chunks.numel()):  # (T,): a chunk of each token
            raise ValueError(f"a Teacher reads training chunks (N, T) of token ids, got "
                             f"{tuple(chunks.shape) if isinstance(chunks, torch.Tensor) else type(chunks).__name__}")
        self.model, self.chunks, self.folder = model, chunks, folder
        self.writing = self.folder is not None  # False once a write failed (a full disk): the rest is streamed
        if self.folder is not None and self.folder.is_symlink() and not self.folder.exists():  # its writes failed later
            raise ValueError(f"the teacher folder {self.folder} is a link to nothing (or a loop)")
        if self.folder is not None and self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"the teacher folder {self.folder} is " + ("a file" if self.folder.is_file() else
                             "a device, a pipe or a socket") + ", not a folder")
        if self.folder is not None:  # a folder another model or other chunks filled was read back as this one's
            self.key = key or self.of(model, chunks)
            self.versions = self._versions()  # weights changed in place later would be read back as these
            # its names: not 007.safetensors, nor a digit of another script
            own = r"teacher\.key|(0|[1-9][0-9]*)\.safetensors|\.(0|[1-9][0-9]*)\.safetensors\.\w+\.tmp\.safetensors"
            other = sorted(f.name for f in self.folder.iterdir() if not f.is_file() or not re.fullmatch(own, f.name)) \
                if self.folder.is_dir() else []  # a sub-folder too
            if other:  # the current folder, its parent, a folder of one's own: its files are not the teacher's to mix with
                raise ValueError(f"the teacher folder {self.folder} holds files or folders a Teacher does not write "
                                 f"({', '.join(other[:3])}"
                                 f"{', ...' if len(other) > 3 else ''}): give an empty folder of its own")
            mark, held = self.folder / "teacher.key", None  # held: whose attention the folder holds (None: empty)
            if mark.is_file():
                held = mark.read_text().strip()
            elif any(self.folder.glob("*.safetensors")):  # filled before teacher.key existed: Teacher.cached names it so
                held = self.folder.name
            if held not in (None, self.key):
                raise ValueError(f"the teacher folder {self.folder} holds attention that is not this model's on these "
                                 "chunks (its teacher.key, or without one its name, says another): give an empty folder, "
                                 "or Teacher.cached")

    def _versions(self):
        """What the key was made from, cheaply: each tensor's identity, storage and in-place version (a weight
        replaced, `.data =`, an in-place op, new RoPE frequencies, chunks edited), and the config's text."""
        tensors = [*experiments.weights(self.model), self.model.inv_freq, self.chunks]
        return [repr(self.model.config)] + [(id(t), t.data_ptr(), t._version) for t in tensors]

    @staticmethod
    def of(model, chunks) -> str:
        """The key of what a teacher folder holds: the model (config and weights), the chunks, the decoder and
        linear.py (its softmax)."""
        return harness.fingerprint(*experiments.identity(model), chunks, pathlib.Path(llama.__file__), pathlib.Path(linear.__file__))

    @classmethod
    def cached(cls, model, chunks):
        """Kept in results/t2r_teacher/<key>/ (`of`)."""
        key = cls.of(model, chunks)
        return cls(model, chunks, harness.RESULTS / "t2r_teacher" / key, key)

    def feed(self, c: int, learn):
        if not (guards.integer(c) and 0 <= c < len(self.chunks)):
            raise ValueError(f"chunk {c!r}: this Teacher holds chunks 0 to {len(self.chunks) - 1}, by a Python int")
        if self.folder and self._versions() != self.versions:
            raise ValueError(f"the model (its weights, config or RoPE) or the chunks changed since this Teacher was made, "
                             f"so {self.folder} holds another's attention: make a new Teacher (Teacher.cached keys it by them)")
        layers = self._read(c) if self.folder else None
        if layers is not None:
            for i, qkvo in enumerate(layers):
                learn(i, *qkvo)
            return
        kept = []  # the layers to save; streamed, none is kept

        def attend(i, q, k, v):
            qkvo = (q.detach(), k.detach(), v.detach(), linear.softmax(self.model, q, k, v))
            if self.writing:
                kept.append(qkvo)
            learn(i, *qkvo)
            return qkvo[3]
        with torch.no_grad():  # only the attention hooks matter: no vocabulary product
            llama.forward(self.model, self.chunks[c][None], attend, last=True)
        if self.writing:
            try:
                if not (self.folder / "teacher.key").is_file():
                    harness.atomic_write(self.folder / "teacher.key", self.key)
                with harness.atomic(self.folder / f"{c}.safetensors") as tmp:  # a killed run leaves no half file
                    save_file({f"{i}.{n}": t.contiguous() for i, qkvo in enumerate(kept) for n, t in zip("qkvo", qkvo)}, tmp)
            except Exception as e:  # a full disk (safetensors' own error, or OSError): the cache is optional
                self.writing = False
                print(f"[msrnn] the teacher cache {self.folder} stops at chunk {c} ({type(e).__name__}: {e}); "
                      "the chunks not cached are streamed from the model", file=sys.stderr)

    def _read(self, c: int):
        """Chunk c's [(q, k, v, o)] per layer from its file (mapped, not copied), or None: missing, or not
        what this model makes of this chunk (shapes, dtype, finite), which is computed again."""
        file = self.folder / f"{c}.safetensors"
        cfg, T = self.model.config, self.chunks[c].shape[-1]
        H, G, hd = cfg.n_kv_heads, cfg.n_heads // cfg.n_kv_heads, cfg.head_dim
        want = {"q": (1, H, G, T, hd), "k": (1, H, 1, T, hd), "v": (1, H, 1, T, hd), "o": (1, H, G, T, hd)}
        try:
            got = load_file(file, device=str(self.model.device))
            layers = [tuple(got[f"{i}.{n}"] for n in "qkvo") for i in range(len(self.model.layers))]
            for i, qkvo in enumerate(layers):
                for n, t in zip("qkvo", qkvo):
                    if tuple(t.shape) != want[n] or t.dtype != self.model.dtype or not torch.isfinite(t).all():
                        raise ValueError(f"{i}.{n} is {t.dtype} {tuple(t.shape)}" + ("" if torch.isfinite(t).all() else
                                         ", not finite") + f"; this chunk makes {self.model.dtype} {want[n]}")
            return layers
        except FileNotFoundError:
            return None
        except Exception as e:  # damaged by hand or by a full disk: computed again, as a missing file is
            print(f"[msrnn] ignoring the unreadable teacher cache {file} ({type(e).__name__}: {e}); "
                  "computing it again", file=sys.stderr)
            return None


# ---------------------------------------------------------------- stage 1: attention transfer

def student_of(maps: FeatureMaps):
    """The default student: layer i's linear attention (plain T2R, or the hybrid with maps.window, maps.sinks)."""
    return lambda i, q, k, v: linear.swapped(maps, i, q, k, v)


def _student(student, skip) -> str:
    """A student for a checkpoint's record: its name, and its key made as a policy's is (lab/specs.py: its code and
    files, and what its closure, defaults, globals, a partial or an object hold: a tail's policy, its key and sizes), with
    the model and the maps (`skip`, recorded apart: their weights change as they train) by their place alone. Maps
    trained under one student are not resumed under another."""
    fn = getattr(student, "func", getattr(student, "__func__", student))
    from t2r import tail
    counts = []  # a tail student's count of passes (tail.Passes), by its place: it changes as the student trains
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            counts += [cell.cell_contents] if isinstance(cell.cell_contents, tail.Passes) else []
        except ValueError:  # a cell not filled yet
            pass
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__qualname__)} " \
        f"{specs.key_of(student, (*skip, *counts))}"


def _output(out, o, i):
    """A student's output at layer i, of the softmax output o's shape (mse_loss broadcasts another, with a warning)."""
    if not isinstance(out, torch.Tensor) or out.shape != o.shape or not out.is_floating_point():
        got = f"{out.dtype} {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"the student's output at layer {i} is {got}, the softmax output it learns is {tuple(o.shape)}")
    return out


def check_callbacks(**functions):
    """log and evaluate: a function, or None (False too for log: no log)."""
    for name, f in functions.items():
        if f is not None and f is not False and not callable(f):
            raise ValueError(f"{name} is a function, or None; got {f!r}")


def transfer(model, maps, chunks, *, student=None, epochs=1, lr=1e-2, scale=1000.0, seed=0, minutes=None,
             checkpoint=None, save_every=20, evaluate=None, eval_every=50, teacher=None, log=print) -> dict:
    """Attention transfer (LoLCATs' stage 1: output MSE), streamed: the frozen model reads each chunk
    (N, T) once per epoch; inside every swapped layer the softmax output is computed (no grad), the
    student's output on the same detached q, k, v is regressed onto it (MSE x `scale`, LoLCATs'), its
    gradient taken at once and the graph freed, and the softmax output goes on to the next layer. So
    one layer's student graph is held at a time, and nothing is stored between chunks. One Adam step
    per chunk: a layer's maps get gradient only from that layer, so this is per-layer training.

    maps: FeatureMaps, or a list of them trained side by side on the same stream (one teacher pass);
    student(i, q, k, v) -> (B, Hkv, G, T, hd), differentiable in the maps (default student_of(maps));
    a list with a list of maps. Stops after `epochs` or `minutes`; with `checkpoint` (a path) it saves
    there every `save_every` steps and at the end, and a later call goes on from the saved step.
    evaluate() -> dict, every `eval_every` steps and at the end: the curve against tokens.
    teacher: a Teacher of these chunks (default: streamed); Teacher.cached reads them back instead of
    running the model again (the same q, k, v and outputs, so the same training: tests/test_t2r.py).
    Returns the run's meta: steps, tokens, seconds, tokens/s, per step the MSE of each maps set."""
    guards.check_training(epochs, minutes, lr=lr, scale=scale)
    if teacher is not None and not isinstance(teacher, Teacher):
        raise ValueError(f"teacher is a Teacher of these chunks (Teacher or Teacher.cached), or None to stream; got {teacher!r}")
    check_callbacks(log=log, evaluate=evaluate)
    many = isinstance(maps, (list, tuple))
    maps_list = list(maps) if many else [maps]
    if not maps_list or not all(isinstance(m, FeatureMaps) for m in maps_list) or \
            student is not None and isinstance(student, (list, tuple)) != many:
        raise ValueError("transfer trains FeatureMaps, or a list of them with a list of students (one each); got "
                         f"{type(maps).__name__} of {len(maps_list)} and a student {type(student).__name__}")
    shared = [id(p) for m in maps_list for p in m.parameters()]  # one set twice (or a copy.copy of it): a doubled
    if len(set(shared)) < len(shared):  # gradient and two Adam steps a step
        raise ValueError("the same maps (or maps sharing a parameter) are given twice: give each set of maps once")
    _check_run(model, maps_list, chunks, seed=seed, save_every=save_every, eval_every=eval_every)
    for m in maps_list:
        if not any(p.requires_grad for p in m.parameters()):  # ELU+1, or frozen maps
            raise ValueError(f"the {m.kind} maps have no trainable weight (ELU+1 has none; or requires_grad is off): "
                             "attention transfer would train nothing")
    students = (list(student) if many else [student]) if student is not None else [None] * len(maps_list)
    if not all(s is None or callable(s) for s in students):  # else it failed at the first step, in the teacher's pass
        raise ValueError(f"a student is a function (i, q, k, v) -> attention output, or None for the maps' own; got {student!r:.80}")
    if len(students) != len(maps_list):  # zip would leave the last maps untrained, their loss 0
        raise ValueError(f"{len(students)} students for {len(maps_list)} sets of maps: give one per set (None: the maps' own)")
    students = [s if s is not None else student_of(m) for s, m in zip(students, maps_list)]  # (the record names them: _student)
    params = {f"{j}.{n}": p for j, m in enumerate(maps_list) for n, p in m.named_parameters()}
    opt = torch.optim.Adam(params.values(), lr=lr)
    settings = {"stage": "transfer", "lr": lr, "scale": scale, "seed": seed, "chunks": list(chunks.shape),
                "maps": [describe(m) for m in maps_list], "students": [_student(s, (model, *maps_list)) for s in students],
                "frozen": [n for n, p in params.items() if not p.requires_grad]} | _identity(model, maps_list, chunks)
    if teacher is not None and (teacher.model is not model or teacher.chunks.shape != chunks.shape
                                or not torch.equal(teacher.chunks, chunks)):  # the record would name a run it is not
        raise ValueError("the teacher was made for another model or other chunks: give Teacher(model, chunks) "
                         "of the model and chunks this transfer trains on")
    run, layer_loss = _resume(checkpoint, params, opt, settings, log, epochs * len(chunks)), [0.0] * len(maps_list)
    teacher = teacher or Teacher(model, chunks)

    def learn(i, q, k, v, o):
        """Each student's gradient at layer i on the teacher's q, k, v (detached) and softmax output o."""
        for j, (m, s) in enumerate(zip(maps_list, students)):
            if i in m.layers:
                with torch.enable_grad():
                    loss = F.mse_loss(_output(s(i, q, k, v), o, i), o)
                    if not loss.requires_grad:  # torch's "element 0 of tensors does not require grad", mid-pass
                        raise ValueError(f"the student's output at layer {i} does not depend on the maps' weights: "
                                         "nothing to learn (a student reads the maps, as student_of does)")
                    # every parameter is stacked over layers: layer i's slice of each (weights, biases, Hedgehog's gain,
                    # the decay's log_h) must gain a gradient from layer i (no gradient yet counts as zeros)
                    weights = {n: p for n, p in m.named_parameters() if p.requires_grad}  # not one frozen on purpose
                    was = {n: None if p.grad is None else p.grad[i].clone() for n, p in weights.items()}
                    (scale * loss).backward()
                    if idle := [n for n, p in weights.items() if p.grad is None or (
                            torch.equal(p.grad[i], was[n]) if was[n] is not None else not p.grad[i].any())]:
                        raise ValueError(f"the student of maps set {j} at layer {i} gave no gradient to layer {i}'s "
                                         f"{', '.join(idle)}: it reads other weights there (a copy? another layer's?), or "
                                         "every feature is off (ReLU); they would not be learned")
                layer_loss[j] += loss.item() / len(m.layers)

    def step(i):
        layer_loss[:] = [0.0] * len(maps_list)
        teacher.feed(_order(len(chunks), i, seed), learn)
        return chunks.shape[1], list(layer_loss)

    def report(run, last):
        if log and (run["step"] % 10 == 0 or run["step"] == 1 or last):
            log(f"   transfer step {run['step']}/{epochs * len(chunks)}: {run['tokens']:,} tokens, "
                f"{run['tokens'] / run['seconds']:.0f} tokens/s, MSE " + " ".join(f"{l:.4g}" for l in run["losses"][-1]))
    return _train(run, step, epochs * len(chunks), minutes, params, opt, report, evaluate, eval_every, checkpoint, save_every)


def _check_run(model, maps_list, chunks, seed=0, save_every=1, eval_every=1):
    """What both stages and transfer_loss need before a step: chunks (N, T) of this model's tokens; maps that fit
    the model, swap a layer and fold a row of each chunk; whole seeds and intervals."""
    guards.check_tokens(model, chunks, dims=(2,))  # chunks (N, T): a text (T,) is one chunk, chunks[None]
    for m in maps_list:  # a row older than the exact ones is what a linear part learns from
        guards.check_maps(model, m)  # layers, shapes and dtype that fit the model
        guards.check_holds(m)  # r = 0 and no exact row: nothing to train, and nothing attended to
        if not m.layers:
            raise ValueError("maps that swap no layer have nothing to learn: give FeatureMaps some layers")
        if chunks.shape[1] <= max(m.window + m.sinks, 1):  # one token alone: out = v whatever φ is, a gradient of 0
            raise ValueError(f"maps with {m.sinks} sinks and a window of {m.window} fold no row of {chunks.shape[1]}-token "
                             "chunks: their linear part would learn nothing; train on longer chunks")
    if not (guards.integer(seed) and 0 <= seed <= 2**62):  # each epoch seeds torch with seed + epoch: 64 bits at most
        raise ValueError(f"seed must be a whole number from 0 to 2**62 (Python's int), got {type(seed).__name__} {seed!r}")
    for name, x in (("save_every", save_every), ("eval_every", eval_every)):
        if not (guards.integer(x) and x >= 1):
            raise ValueError(f"{name} is a number of steps, a whole number >= 1; got {x!r}")


def _identity(model, maps_list, chunks) -> dict:
    """For a checkpoint's record: the model (config and weights), the tokens and the maps as they start (their
    horizons, their seed), so that a run saved for others of the same shapes is not resumed as this one."""
    return {"model": harness.fingerprint(*experiments.identity(model)), "tokens": harness.fingerprint(chunks),
            "start": [harness.fingerprint(*(p.detach() for p in m.parameters())) for m in maps_list]}


def _train(run, step, total, minutes, params, opt, report, evaluate, eval_every, checkpoint, save_every) -> dict:
    """The loop both stages share: step(i) takes step i's gradient and returns (its tokens, its loss);
    then Adam steps, the run's meta counts them and the seconds, report(run, last) logs, evaluate() ->
    dict goes on the curve every eval_every steps and at the end (not counted as training time), and the
    run is saved every save_every steps and at the end. Stops after `total` steps or `minutes`."""
    t0, done_s, resumed = time.time(), run["seconds"], run["step"] > 0
    # a resumed run already past this budget under another: served, it would be a longer run's weights under this one's
    if minutes and done_s >= 60 * minutes and run.get("minutes", minutes) != minutes:
        raise ValueError(f"{checkpoint}: a run of {done_s / 60:.1f} minutes (its budget {run['minutes']}), past the "
                         f"{minutes} this run asks for; give at least its budget, or delete the file or use another")
    run["minutes"] = minutes  # saved with the run, so that a resume under a smaller budget is refused
    # the loop ends where a step was marked last (not on a later reading of the clock: a budget that ran out during
    # that step's log or evaluation left it unsaved and off the curve)
    last = run["step"] >= total or bool(minutes and done_s >= 60 * minutes)
    while not last:
        tokens, loss = step(run["step"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        if not all(math.isfinite(x) for x in (loss if isinstance(loss, list) else [loss])) or \
                not all(torch.isfinite(p).all() for p in params.values()):  # not saved, so a rerun starts where it was sound
            raise ValueError(f"training diverged at step {run['step'] + 1}: the loss or the weights are NaN or infinite "
                             f"(nothing saved): " + (f"is {checkpoint} damaged, or " if resumed else "is ") +
                             "the learning rate too high?" + ("" if all(p.dtype != torch.float16 for p in params.values())
                                                              else " In float16 Adam's epsilon (1e-8) rounds to 0, so a "
                                                              "weight whose gradient is 0 (a dead ReLU's) steps by 0/0: "
                                                              "train the maps in float32 or bfloat16"))
        run["step"] += 1
        run["tokens"] += tokens
        run["losses"].append(loss)
        run["seconds"] = done_s + time.time() - t0
        last = run["step"] == total or bool(minutes and run["seconds"] >= 60 * minutes)
        report(run, last)
        if evaluate and (run["step"] % eval_every == 0 or last):
            with guards.kept():  # the caller's function: grad mode, a seed or threads it changes are put back
                got = evaluate()
            if not (isinstance(got, dict) and all(isinstance(k, str) and k not in ("step", "tokens") and guards.number(v)
                                                  for k, v in got.items())):  # before it is saved on the curve
                raise ValueError(f"evaluate() returns a dict of numbers by name (not 'step' or 'tokens', the curve's "
                                 f"own), got {got!r}")
            run["curve"].append({"step": run["step"], "tokens": run["tokens"], **got})
            t0, done_s = time.time(), run["seconds"]  # evaluation is not training time
        if checkpoint is not None and (run["step"] % save_every == 0 or last):
            _save_run(checkpoint, params, opt, run)
    run["tokens_per_s"] = run["tokens"] / max(run["seconds"], 1e-9)
    return run


def transfer_loss(model, maps: FeatureMaps, chunks, student=None) -> float:
    """The attention-transfer MSE of `maps` on chunks (N, T), averaged over chunks and swapped layers."""
    if not isinstance(maps, FeatureMaps):  # (transfer takes a list; this measures one set)
        raise ValueError(f"transfer_loss measures one FeatureMaps, got {type(maps).__name__}")
    _check_run(model, [maps], chunks)
    if student is not None and not callable(student):
        raise ValueError(f"student is a function (i, q, k, v) -> the layer's output, or None for the maps' own; got {student!r}")
    student = student if student is not None else student_of(maps)  # (a callable whose len is 0 is a student)
    total, teacher = [0.0], Teacher(model, chunks)

    def measure(i, q, k, v, o):
        if i in maps.layers:
            total[0] += F.mse_loss(_output(student(i, q, k, v), o, i), o).item() / len(maps.layers) / len(chunks)
    for c in range(len(chunks)):
        teacher.feed(c, measure)
    return total[0]


def describe(maps: FeatureMaps) -> dict:
    return {"kind": maps.kind, "r": maps.r, "window": maps.window, "layers": maps.layers} | \
        ({"sinks": maps.sinks} if maps.sinks else {}) | ({"decay": True} if maps.decay else {}) | \
        ({} if maps.rotated else {"rotated": False})


def tail_check(spec):
    """The checker's "tail" check (`checker.check(..., more={"tail": tail_check(spec)})`): the policy with a
    T2R tail of feature map spec 'kind:r' (t2r/tail.py), random maps: its RNN view (llama.step) = its
    transformer view, and a tail of no features (r = 0) is the policy alone, bit for bit."""
    return functools.partial(_tail_check, spec=spec)


def _tail_check(named, deterministic, spec):
    from t2r import tail
    MODELS, SIZES, EXACT = checker.MODELS, checker.SIZES, checker.EXACT
    model = llama.random_model(MODELS["LLaMA"], seed=1)  # not Mistral: a tail cannot forget what its window would
    x = checker.tokens(2, 40, seed=2)
    policy = named.on(model, x)
    maps, _ = maps_from(model, spec)
    with torch.no_grad():  # random weights and biases, so that the tail matters and some features are off
        g = torch.Generator().manual_seed(3)
        for p in maps.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    none = linear.FeatureMaps(model.config, 0, dtype=model.dtype)  # a tail of no features
    worst, runs, refused = 0.0, 0, {}
    for size in SIZES:
        try:
            rnn = msrnn.feed(model, x, tail.init_state(model, maps, size, batch=2), policy)
            worst = max(worst, (tail.forward(model, maps, x, policy, size) - rnn).abs().max().item())
            if not torch.equal(msrnn.feed(model, x, tail.init_state(model, none, size, batch=2), policy),
                               msrnn.run(model, x, policy, size)):
                return "fail", f"size {size}: a tail of no features changed the policy's logits"
        except guards.PolicyError as e:
            if not isinstance(getattr(e, "original", None), ValueError):
                return "fail", str(e)
            refused[size] = str(e.original)
            continue
        runs += 1
    if not runs:
        return "fail", "the policy refused every size: " + next(iter(refused.values()))
    where = f"{runs} runs: LLaMA, sizes {SIZES[0]}-{SIZES[-1]}, random {maps.kind} maps of r={maps.r}"
    if worst > EXACT:
        return "fail", f"the tail's views differ by {worst:.1e} (bound {EXACT:.0e}, float64) in {where}" + \
            ("" if deterministic else "; it is not deterministic (see contract)")
    return "pass", (f"RNN view = transformer view to {worst:.0e} (bound {EXACT:.0e}, float64), {where}; "
                    "no features = the policy alone, bit for bit")



# ---------------------------------------------------------------- stage 2: swap, then finetune

LORA_ON = ("wq", "wk", "wv", "wo")  # LoLCATs' LoRA targets: the attention projections
LORA_RANK, LORA_ALPHA = 8, 16  # LoLCATs' r and alpha


def weights(model: llama.Model, mode: str, rank: int = LORA_RANK, alpha: float = LORA_ALPHA, seed: int = 0):
    """The finetune's trainable tensors (name -> leaf tensor) and build() -> the llama.Model they make.

    mode "full": every weight of the model (Kasai et al.): a copy of embeddings, norms and each layer's
    matrices. mode "lora": for q, k, v, o of every layer an A (rank, in) and a zero B (out, rank),
    W = W0 + alpha/rank B A (Hu et al. 2021, arXiv 2106.09685; LoLCATs' r=8, alpha=16). build() makes
    new Layers from the current tensors each step (Layer fuses wq, wk, wv on creation, so the fused
    matrix is rebuilt from them rather than edited in place)."""
    fields = [f.name for f in dataclasses.fields(llama.Layer)]
    tied = model.lm_head is model.embed
    if mode == "full":
        params = {f"layers.{i}.{f}": getattr(L, f).detach().clone() for i, L in enumerate(model.layers) for f in fields}
        params |= {n: getattr(model, n).detach().clone() for n in ("embed", "norm") + (() if tied else ("lm_head",))}

        def build():
            layers = [llama.Layer(**{f: params[f"layers.{i}.{f}"] for f in fields}) for i in range(len(model.layers))]
            return dataclasses.replace(model, embed=params["embed"], layers=layers, norm=params["norm"],
                                       lm_head=params["embed"] if tied else params["lm_head"])
    elif mode == "lora":
        g, params = torch.Generator().manual_seed(seed), {}
        for i, L in enumerate(model.layers):
            for w in LORA_ON:
                out, inp = getattr(L, w).shape
                bound = 1 / math.sqrt(inp)  # PEFT's start for A (Kaiming-uniform, a=√5); B = 0, so W = W0
                params[f"layers.{i}.{w}.A"] = ((torch.rand(rank, inp, generator=g, dtype=torch.float64) * 2 - 1)
                                               * bound).to(device=model.device, dtype=model.dtype)
                params[f"layers.{i}.{w}.B"] = torch.zeros(out, rank, device=model.device, dtype=model.dtype)

        def build():
            layers = [llama.Layer(**{f: getattr(L, f) + alpha / rank * params[f"layers.{i}.{f}.B"] @ params[f"layers.{i}.{f}.A"]
                                     if f in LORA_ON else getattr(L, f) for f in fields}) for i, L in enumerate(model.layers)]
            return dataclasses.replace(model, layers=layers)
    else:
        raise ValueError(f"finetune mode must be 'full' (every weight, Kasai et al.) or 'lora' (LoLCATs), got {mode!r}")
    for p in params.values():
        p.requires_grad_(True)
    return params, build


def finetune(model, maps: FeatureMaps, chunks, *, mode="lora", epochs=1, minutes=None, lr=None, maps_lr=1e-3,
             rank=LORA_RANK, alpha=LORA_ALPHA, seed=0, grad_checkpoint=True, checkpoint=None, save_every=10, evaluate=None,
             eval_every=25, log=print):
    """Swap, then finetune (Kasai et al.'s recipe: kind "t2r", mode "full"; LoLCATs' stage 2: LoRA):
    next-token loss with the linear attention in place, training the maps and the model's weights (mode "full") or LoRA
    adapters on q, k, v, o (mode "lora"). lr: the weights' (default 1e-4 for LoRA, LoLCATs'; 1e-5 for
    every weight); the maps learn at maps_lr. grad_checkpoint: each layer's attention is recomputed in
    the backward pass rather than kept (torch.utils.checkpoint). Resumable as `transfer` is.
    Returns (the finetuned llama.Model, detached; the run's meta)."""
    lr = lr if lr is not None else {"lora": 1e-4, "full": 1e-5}.get(mode, 1e-4)
    guards.check_training(epochs, minutes, lr=lr, maps_lr=maps_lr, **({"rank": rank, "alpha": alpha} if mode == "lora" else {}))
    check_callbacks(log=log, evaluate=evaluate)
    if mode == "lora" and not guards.integer(rank):
        raise ValueError(f"rank is LoRA's inner dimension, a whole number >= 1; got {rank!r}")
    if mode == "full" and (rank, alpha) != (LORA_RANK, LORA_ALPHA):  # read by nothing: said, not stored as if it trained
        raise ValueError(f"rank and alpha are LoRA's (mode='lora'); mode 'full' trains every weight, got rank={rank!r}, alpha={alpha!r}")
    _check_run(model, [maps], chunks, seed=seed, save_every=save_every, eval_every=eval_every)  # transfer's checks
    side = min((min(getattr(L, w).shape) for L in model.layers for w in LORA_ON), default=rank)
    if mode == "lora" and rank > side:  # B A of rank r > side is any matrix of rank <= side: r buys nothing but time
        raise ValueError(f"rank {rank} exceeds the smallest side ({side}) of the weights LoRA adapts ({', '.join(LORA_ON)})")
    guards.check_flags(grad_checkpoint=grad_checkpoint)  # "no" was true
    start = _identity(model, [maps], chunks)
    params, build = weights(model, mode, rank, alpha, seed)
    params = {f"maps.{n}": p for n, p in maps.named_parameters()} | {f"model.{n}": p for n, p in params.items()}
    opt = torch.optim.Adam([{"params": [p for n, p in params.items() if n.startswith("maps.")], "lr": maps_lr},
                            {"params": [p for n, p in params.items() if n.startswith("model.")], "lr": lr}])
    settings = {"stage": "finetune", "mode": mode, "lr": lr, "maps_lr": maps_lr, "seed": seed, "chunks": list(chunks.shape),
                "maps": describe(maps), "frozen": [n for n, p in params.items() if not p.requires_grad]} | \
        ({"rank": rank, "alpha": alpha} if mode == "lora" else {}) | start
    total = epochs * len(chunks)
    run = _resume(checkpoint, params, opt, settings, log, total)
    student = student_of(maps)
    attend = lambda i, q, k, v: (linear.softmax(model, q, k, v) if i not in maps.layers else
                                 torch.utils.checkpoint.checkpoint(student, i, q, k, v, use_reentrant=False)
                                 if grad_checkpoint else student(i, q, k, v))

    def step(i):
        x = chunks[_order(len(chunks), i, seed)]                         # (T,)
        logits = llama.forward(build(), x[None], attend)[0, :-1]          # (T - 1, vocab)
        loss = F.cross_entropy(logits.to(llama.wide(logits.dtype)), x[1:].to(logits.device))
        loss.backward()
        return x.numel(), loss.item()

    def report(run, last):
        if log:
            log(f"   finetune ({mode}) step {run['step']}/{total}: {run['tokens']:,} tokens, "
                f"{run['tokens'] / run['seconds']:.0f} tokens/s, next-token loss {run['losses'][-1]:.3f}")
    run = _train(run, step, total, minutes, params, opt, report, evaluate and (lambda: evaluate(detached(build))),
                 eval_every, checkpoint, save_every)
    return detached(build), run


def detached(build) -> llama.Model:
    """The model build() makes, as plain tensors that later training steps do not touch."""
    with torch.no_grad():
        m = build()
        fields = [f.name for f in dataclasses.fields(llama.Layer)]
        layers = [llama.Layer(**{f: getattr(L, f).detach().clone() for f in fields}) for L in m.layers]
        embed = m.embed.detach().clone()
        return dataclasses.replace(m, embed=embed, layers=layers, norm=m.norm.detach().clone(),
                                   lm_head=embed if m.lm_head is m.embed else m.lm_head.detach().clone())


# ---------------------------------------------------------------- what the runs are keyed by

def code_key(*extra) -> str:
    """A hash of the code that trains and measures: this whole file (the Teacher, `zeroed` and the training
    loop: a list of its functions missed the ones it did not name), the method (t2r/linear.py), the decoder
    (llama.py)."""
    return harness.fingerprint(pathlib.Path(__file__), pathlib.Path(linear.__file__), pathlib.Path(llama.__file__), *extra)


def zeroed(maps: FeatureMaps) -> FeatureMaps:
    """The same maps with every feature 0: S and z stay 0, so only the window (or the held rows) is left.
    A hybrid whose perplexity barely rises under this bypasses its linear part (arXiv 2510.05901)."""
    off = copy.copy(maps)
    off.phi = lambda layer, x, which, pos=None: x.new_zeros(*x.shape[:-1], maps.r)
    return off


TAIL_GAIN = -5.0  # the tail's query gain starts at exp(-5): thousands of folded rows would outweigh the few held ones

"""msrnn: a transformer is a multi-state RNN; bound its state and a policy decides what to forget.

  python demo.py                  the guided tour (about a minute on 2 CPU cores)
  python demo.py ppl --policy tova --size 256 --text FILE     perplexity under a policy
  python demo.py check mine.py:fn                             is your policy exact, causal, good?
  python demo.py sweep | retention | passkey | memory | t2r   the paper's experiments, and T2R
  python demo.py view --policy sink tova                      a page: what each policy keeps, step by step
  python demo.py grade [FOLDER | --reference]                 grade the course (course/README.md)

Every command but ppl writes results/<command>.json and .log (and .png with matplotlib); with
other settings than the defaults, results/runs/<command>-<what differs>.*.

A policy is named the same way everywhere: full, window, sink (or sink:8), h2o, h2o_head, tova,
tova_head, lookahead (or lookahead:256, the bound that reads ahead), or path/to/file.py:function.
"""
import argparse
import json
import os
import re
import stat
import sys
import threading
import time

from engine import threads  # noqa: F401  (first of all: OpenMP's wait policy is set before torch loads it)

import torch

from engine import fast, guards
from lab import bench
from lab import board
from lab import busy
from lab import checker
from lab import experiments
from lab import harness
import llama
import load_weights
import msrnn
from lab import specs
from t2r import compare, mini, tail, train
from t2r import length as t2r_length
from t2r import speed as t2r_speed
from data import corpus


def load(args):
    t0 = time.time()
    model = load_weights.load_model(args.model, load_weights.DTYPES[args.dtype], load_weights.device(args.device))
    tok = load_weights.load_tokenizer(args.model)
    c = model.config
    print(f"model: {args.model or 'SmolLM2-135M-Instruct (default)'} - {c.n_layers} layers, {c.n_heads} query / "
          f"{c.n_kv_heads} KV heads of {c.head_dim}; {args.dtype} on {model.device}; loaded in {time.time() - t0:.1f} s",
          flush=True)
    return model, tok


def say(title, text=""):
    print(f"\n== {title}\n" + indent(text.strip()), flush=True)


def indent(text):
    return "\n".join("   " + line for line in text.splitlines())


# ---------------------------------------------------------------- the tour

def tour_views(model, tok):
    say("1. Two views, one function",
        "The transformer view reads all tokens at once under a causal mask. The RNN view reads one\n"
        "token at a time: every layer is x, (K, V) = f(x, (K, V)), and the multi-state (K, V) gains a row.")
    ids = torch.tensor(tok.encode("The quick brown fox jumps over the lazy dog. A multi-state RNN keeps one key "
                                  "and one value for every token it has read, and attends over all of them.").ids)
    t0 = time.time()
    parallel = llama.forward(model, ids)
    t1 = time.time()
    recurrent = msrnn.run(model, ids)
    t2 = time.time()
    print(f"   {len(ids)} tokens: transformer view {t1 - t0:.2f} s, RNN view {t2 - t1:.2f} s; "
          f"max |logit difference| {(parallel - recurrent).abs().max().item():.1e} (float32 rounding; "
          f"the tests show 1e-10 in float64)")


def tour_generate(model, tok):
    say("2. Generation is the RNN running on", "Greedy decoding, token by token. Unbounded, the state grows forever:")
    state = msrnn.init_state(model)
    prompt = "The capital of France is"
    print(f"   {prompt!r}")
    for t in msrnn.generate(model, torch.tensor(tok.encode(prompt).ids), 8, state=state):
        kv = msrnn.state_bytes(model, state.n_rows)
        print(f"   + {tok.decode([t.item()])!r:10} rows per layer {state.n_rows:3d}, keys and values {kv / 1024:4.0f} KiB")


def tour_perplexity(model, tok, names=("window", "sink", "h2o", "tova"), length=1024, size=64):
    say("3. Bound the state: which rows to keep?",
        f"Perplexity on the first {length} tokens of Alice in Wonderland, every layer holding at most {size}\n"
        "rows. Window keeps the latest; Window+4 also the first 4 (attention sinks); H2O the most\n"
        "attended so far plus the latest; TOVA drops whichever row the current query attends to least.")
    ids = experiments.book_chunks(tok, 1, length, books=("alice29",))
    for p in map(specs.named, ("full", *names)):
        t0 = time.time()
        loss = experiments.nll(model, ids, p, None if p is specs.FULL else size)
        label = p.label if p is specs.FULL else f"{p.label} {size}"
        print(f"   {label:<14} perplexity {loss.mean().exp().item():8.2f}   ({time.time() - t0:.0f} s)", flush=True)


def tour_passkey(model, tok, names=("sink", "tova"), length=2048, size=256):
    say("4. Remember a number",
        f"A 5-digit pass key hidden early in {length} tokens of filler; then 'What is the pass key?'.\n"
        f"Who still holds it with {size} rows per layer? The prompt is read in one of two ways. Per step\n"
        "(the paper's MSRNN), the policy evicts from the first token on, by the filler's queries, before\n"
        "the question. In full, then cut once (the official TOVA code, kvpress), the policy chooses\n"
        "at the prompt's last token, whose query asks for the key. 'layers' counts those that still\n"
        "hold a row of the key's digits once the prompt is read.")
    x = experiments.passkey_prompts(tok, length, depths=(0.1,), keys=(71432,))
    try:
        experiments.says_keys(tok, (71432,))
    except ValueError as e:  # every row would read "lost", the full cache's too: the tokenizer's doing
        print(f"   skipped: {e}")
        return
    key = torch.isin(x[0], torch.tensor(tok.encode("71432").ids)).nonzero().flatten()  # its rows: no other digits
    full_answer = None
    for regime, oneshot, chosen in (("", 0, ["full"]), ("per step", 0, names), ("in full, then cut once", x.shape[1], names)):
        if regime:
            print(f"   read {regime}:")
        for p in map(specs.named, chosen):
            t0, bounded = time.time(), p is not specs.FULL
            # a lookahead reads the full cache's answer as its future, as experiments.answer does
            policy = p.on(model, torch.cat([x, full_answer[:, :-1]], 1) if p.reads_ahead else x)
            logits, state = fast.prefill(model, x, policy, size if bounded else None, oneshot, last=True)
            held = sum(bool(torch.isin(ms.pos, key.to(ms.pos.device)).any()) for ms in state.layers)
            ids = experiments.greedy(model, logits[:, -1].argmax(-1), 6, policy, state)  # (1, 6)
            full_answer = full_answer if bounded else ids
            answer, label = tok.decode(ids[0].tolist()), f"{p.label} {size}" if bounded else p.label
            print(f"   {label:<14} -> {answer!r:28} {'found' if '71432' in answer else 'lost':5}  "
                  f"layers {held:2d}/{len(state.layers)}  ({time.time() - t0:.0f} s)", flush=True)


def tour_retention(model, tok, length=512, size=64, layer=15):
    layer = min(layer, model.config.n_layers - 1)  # another model's tour: its last layer where it has no 15th
    say("5. What TOVA keeps", f"Layer {layer}, {size} rows per layer, the first {length} tokens of Alice in Wonderland:")
    data = experiments.retention(model, tok, size=size, length=length, layer=layer)
    print(indent(experiments.retention_table(data)))
    print(indent("Below, each line is a step t, each column a block of positions; '#' = most of the block\n"
                 "is held, '.' = some, ' ' = none. TOVA is not a window:"))
    held = experiments.held_rows(data["dropped_at"])                # (T, T)
    for t in range(size, length, length // 16):
        share = held[t].reshape(64, -1).float().mean(1)              # 64 columns of positions
        print("   " + "".join("#" if f > 0.5 else "." if f > 0 else " " for f in share.tolist()) + f" t={t}")


def tour_view(model, tok, length=512, size=64, page="tour"):
    say("6. See it", "The page below shows, step by step and layer by layer, what Window+4 and TOVA keep of the\n"
        "same text; open it in any browser (python demo.py view makes one for any text and policies):")
    ids = torch.tensor(tok.encode(corpus.book("alice29")).ids[:length])
    print(indent(os.path.relpath(write_page(experiments.view(model, tok, ids, size=size), harness.RESULTS / f"{page}-view.html"))))


def write_page(data, path):
    """viewer.html with `data` inline: one file that needs no network."""
    page = (harness.ROOT / "lab" / "viewer.html").read_text()
    # every < as \u003c: no "</script>" or "<!--" in the data can end or hide the page's script
    harness.atomic_write(path, page.replace("/*DATA*/null", json.dumps(data).replace("<", "\\u003c")))
    return path


def cmd_tour(args):
    t0 = time.time()
    chosen = {"names": args.policies} if args.policies else {}
    if args.policies and specs.FULL in [specs.named(p) for p in args.policies]:  # it failed mid-tour, after minutes
        raise SystemExit("error: the tour shows the full cache beside the policies itself: leave 'full' out of --policies")
    model, tok = load(args)
    tour_views(model, tok)
    tour_generate(model, tok)
    tour_perplexity(model, tok, **chosen)
    tour_passkey(model, tok, **chosen)
    tour_retention(model, tok)
    tour_view(model, tok, page=getattr(args, "result", "tour"))  # beside the run's results: another model's in runs/
    say(f"Done in {time.time() - t0:.0f} s", "python demo.py --help lists the experiments that remake the paper's "
        "tables and figures.")
    return {}, model


# ---------------------------------------------------------------- the commands: each returns (data, model)

def read_text(args) -> str:
    """The text of --text (in --encoding), else of --book."""
    if args.text is not None and not args.text.strip():  # '' is a mistake, not "the default book"
        raise ValueError("--text is empty: give a text file, or leave --text out for the default book (--book)")
    if args.text is not None and args.book is not None or args.text is None and args.encoding is not None:  # one was ignored
        raise ValueError("--book names the book read without --text, and --encoding the --text file's: give --text "
                         "with --encoding, or --book")
    return corpus.read(args.text, args.encoding or "utf-8") if args.text else corpus.book(args.book or "alice29")


def cmd_ppl(args):
    policy = specs.named(args.policy)
    if (policy is specs.FULL) != (args.size is None):
        raise SystemExit(f"error: --policy {args.policy} needs --size (the rows it keeps)" if args.size is None else
                         "error: --policy full takes no --size (it keeps every row)")  # (tova by default)
    with_tail = args.tail is not None or args.tail_maps is not None
    if with_tail and (policy is specs.FULL or args.prompt != "step" or args.prompt_len):
        raise SystemExit("error: --tail folds what a policy drops at every step: it needs a policy, --size, --prompt step")
    if policy.reads_ahead and args.compile:  # experiments.nll reads a bound eagerly (faster so): said, not dropped
        raise SystemExit("error: a lookahead runs eagerly (its table lookup splits a compiled step in two): leave out --compile")
    if with_tail and args.compile:  # tail.perplexity has no compiled path: said, not dropped without a word
        raise SystemExit("error: --tail runs eagerly (t2r/tail.py has no compiled path): leave out --compile")
    prompt_len = args.prompt_len if args.prompt_len is not None else args.chunk // 2 if args.prompt == "full" else 0
    if args.prompt == "full" and prompt_len == 0:  # its number was the per-step one, and --prompt full said nowhere
        raise SystemExit("error: --prompt full with --prompt-len 0 reads no prompt in full (that is --prompt step): "
                         "give a prompt length")
    text = read_text(args)
    model, tok = load(args)
    ids = torch.tensor(tok.encode(text).ids)[: args.tokens]
    if args.prompt_len is None and prompt_len >= len(ids):  # the default the user never typed, named
        raise SystemExit(f"error: --prompt full reads a prompt of --prompt-len tokens (default: half of --chunk, {prompt_len}) "
                         f"before it scores; the text has {len(ids)}: give a shorter --prompt-len")
    if args.size is not None:
        experiments.drops_nothing([args.size], min(args.chunk, len(ids)), f"chunks of at most {min(args.chunk, len(ids))} tokens")
    t0 = time.time()
    progress = lambda i, n: print(f"\r   chunk {i}/{n}", end="", file=sys.stderr)
    if with_tail:  # t2r/tail.py: what the policy drops is folded into a T2R state
        maps, which = train.maps_from(model, args.tail, args.tail_maps)
        print(which)
        r = tail.perplexity(model, maps, ids, policy, args.size, args.chunk, progress=progress)
    else:
        r = experiments.perplexity(model, ids, policy, args.size, args.chunk, regime=args.prompt, prompt_len=prompt_len,
                                   compile=args.compile, progress=progress)
    how = "per step"
    if args.prompt == "full" and not args.size:
        how = "in full (the full cache cuts nothing)"
    elif args.prompt == "full":  # a prompt that fits the size is not cut either
        how = "in full, then cut once" if prompt_len > args.size else f"in full (it fits in {args.size} rows: nothing cut)"
    scored = f" after a prompt of {prompt_len} read {how}"
    print(f"\rperplexity {r['ppl']:.3f} over {r['tokens']} tokens in {r['chunks']} chunk(s) of up to {args.chunk}"
          f"{scored if prompt_len else ''}; policy {policy.label}, size {args.size or 'unbounded'}"
          f"{f' + tail of {maps.kind} r={maps.r}' if with_tail else ''}; {time.time() - t0:.1f} s")
    return r, model


def cmd_check(args):
    named = specs.distinct([specs.named(p) for p in args.policy])
    if specs.FULL in named:  # nothing to score: every check would fail on calling None
        raise SystemExit("error: check takes policies; 'full' keeps every row and has nothing to check")
    if args.quick and (args.model is not None or args.dtype != "float32" or args.device != "cpu"):  # none would be read
        raise SystemExit("error: check --quick runs on the checker's own float64 tiny models and loads no model: "
                         "leave out --model, --dtype and --device, or --quick")
    model, tok = (None, None) if args.quick else load(args)
    more = {"tail": train.tail_check(args.tail)} if args.tail else None  # t2r/ stands on lab/, not under it
    results = [checker.check(p, model, tok, more=more) for p in named]
    if len(results) > 1:
        checker.summary(named, results)
    bad = {p.label: checker.failed(p, out) for p, out in zip(named, results)}
    return {"policies": [p.label for p in named], "failed": {k: v for k, v in bad.items() if v}}, model


def cmd_sweep(args):
    model, tok = load(args)
    data = experiments.sweep(model, tok, sizes=args.sizes, names=args.policies, n_chunks=args.chunks,
                             chunk=args.chunk, jobs=args.jobs, compile=args.compile, log=print)
    print("\n" + experiments.sweep_table(data))
    return data, model


def cmd_board(args):
    model, tok = load(args)
    names = [] if args.only else [n for n in [*specs.POLICIES, *specs.ZOO] if n != "lookahead"]
    names += args.policies
    if not names:
        raise ValueError("board --only: name at least one policy")
    data = board.board(model, tok, names, sizes=args.sizes, n_chunks=args.chunks, chunk=args.chunk,
                       passkey_sizes=args.passkey_sizes, length=args.length, jobs=args.jobs, compile=args.compile, log=print)
    print("\n" + board.table(data) + f"\n\nboard: {data['seconds']:.0f} s")
    return data, model


def cmd_retention(args):
    model, tok = load(args)
    data = experiments.retention(model, tok, size=args.size, length=args.length, layer=args.layer, policy=args.policy)
    print(experiments.retention_table(data))
    return data, model


def cmd_view(args):
    text = read_text(args)
    model, tok = load(args)
    ids = torch.tensor(tok.encode(text).ids[: args.tokens])
    data = experiments.view(model, tok, ids, names=args.policy, size=args.size)
    for p in data["policies"]:
        print(f"{p['label']}: {experiments.percent(p['summary']['recent_share'])} of kept rows among the {args.size} most recent, "
              f"the first token held to the end in {p['summary']['first_token_kept_to_end_layers']}/{data['n_layers']} layers")
    return data, model


def cmd_passkey(args):
    model, tok = load(args)
    data = experiments.passkey(model, tok, sizes=args.sizes, names=args.policies, length=args.length,
                               regimes=args.prompt, log=print)
    return data, model


def cmd_memory(args):
    model, _ = load(args)
    return experiments.memory(model, context=args.context, sizes=args.sizes, budget_gib=args.budget, log=print), model


CPU_BUDGET = dict(minutes=20.0, finetune_minutes=7.0, tail_minutes=10.0)  # demo.py t2r's --preset cpu, in minutes


def cmd_t2r(args):
    if "hedgehog" in args.kinds + ["hedgehog"] * bool(args.window) and (args.r % 2 or args.r < 4):  # before loading
        raise ValueError(f"--r {args.r}: Hedgehog's map (--kinds hedgehog, and the hybrid) needs an even r of at least 4")
    if args.tail_r % 2 or args.tail_r < 4:  # the tail's map is Hedgehog's too: said before the training
        raise ValueError(f"--tail-r {args.tail_r}: the tail's Hedgehog map needs an even r of at least 4")
    if args.threads:
        torch.set_num_threads(args.threads)
    # the budgets given (None where not: argparse's --minutes=5 and --minu 5 are given too), over the cpu preset's
    given = {k: getattr(args, k) for k in CPU_BUDGET if getattr(args, k) is not None}
    budget = CPU_BUDGET | given
    if args.preset == "papers" and (given or args.epochs is not None):  # before loading; --epochs was dropped unsaid
        raise ValueError("--preset papers trains for the papers' token counts, with no time limit: --epochs, "
                         "--minutes, --finetune-minutes and --tail-minutes do not apply (leave them out, or use --preset cpu)")
    if args.preset == "papers":  # the papers' token counts (compare.PAPERS), no time limit: for a GPU
        budget = dict(minutes=None, finetune_minutes=None, tail_minutes=None, **compare.PAPERS)
    model, tok = load(args)
    data = compare.experiment(model, tok, r=args.r, kinds=tuple(dict.fromkeys(args.kinds)), window=args.window, train_length=args.train_length,
                            epochs=args.epochs or 2, finetune_mode=args.finetune, sizes=args.sizes, tail_r=args.tail_r,
                            tail_size=args.tail_size, tail_length=args.tail_length, eval_chunks=args.eval_chunks,
                            log=print, **budget)
    print("\n" + compare.table(data))
    return data, model


# ---------------------------------------------------------------- tables written by the results

# a block of a page -> (the results file it is written from, what writes it). A page marks it
# "<!-- results: NAME -->" ... "<!-- /results -->"; `python demo.py report` rewrites every block,
# and tests/test_readme.py fails when a page differs from what its results give.
table_only = lambda fn: lambda data: "\n".join(line for line in fn(data).splitlines() if line.startswith("|"))


def fenced(fn):
    """A table of plain text, shown as printed, in a fence longer than any run of backticks it holds."""
    def write(data):
        text = fn(data)
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall("`+", text)), default=0))
        return f"{fence}\n{text}\n{fence}"
    write.fenced = True  # nothing in a fence renders as HTML: the report leaves its '<' as they are
    return write


REPORT = {"retention": ("retention", fenced(experiments.retention_table)), "memory": ("memory", fenced(experiments.memory_table)),
          "bench": ("bench", bench.speed_table), "busy": ("busy", busy.table), "t2r": ("t2r", table_only(compare.table)),
          "t2r_speed": ("t2r_speed", t2r_speed.table), "t2r_mini": ("t2r_mini", mini.main_table),
          "t2r_mini_quick": ("t2r_mini_quick", mini.table), "t2r_mini_summary": ("t2r_mini", mini.summary),
          "t2r_mini_claims": ("t2r_mini", mini.claims_table), "t2r_mini_quick_claims": ("t2r_mini_quick", mini.claims_table),
          "tour_time": ("busy", busy.tour_time), "t2r_length_costs": ("t2r_length", t2r_length.costs)}
REPORT |= {"t2r_length" + ("" if f == "hybrids" else f"_{f}"): ("t2r_length", lambda data, f=f: t2r_length.table(data, f))
           for f in t2r_length.FAMILIES if f not in t2r_length.ALONE}  # one results file, a table per family
# the families published from their own run (python -m t2r.length --sets F), and what each cost
REPORT |= {f"t2r_length_{f}{part}": (f"t2r_length_{f}", lambda data, f=f, part=part: t2r_length.costs(data) if part else t2r_length.table(data, f))
           for f in t2r_length.ALONE for part in ("", "_costs")}
PAGES = ["README.md", "docs/*.md", "course/*.md"]
BLOCK = re.compile(r"^(<!-- results: (\w+) -->\n)(.*?)^(<!-- /results -->)", re.S | re.M)  # markers at a line's start
LOOSE = r"(?i:<!--\s*/?\s*results?\s*(?::[^>]*)?-->)"  # a marker misspelled (no spaces, capitals, singular), which is
# named; a comment of prose that starts with "results" is a comment
MARKER = re.compile(rf"<!-- results: (\w+) -->\n|<!-- /results -->|{LOOSE}")
RAW = ("pre", "textarea", "script", "style")  # HTML whose content is shown or run as written, never read as Markdown
PUBLISHED = harness.ROOT / "results"  # what every page cites, whatever MSRNN_RESULTS says


def reported(text: str, results=None) -> str:
    """The page `text` with every results block written anew from its results file. A page whose
    markers do not pair (an opening, then its closing, then the next opening) is refused, so that no
    text outside a block is ever replaced; what is written is escaped so that it cannot end a block."""
    masked = outside_code(text)  # a marker inside a code example is an example, not a block
    paired(masked)
    results = results or PUBLISHED

    def fill(m):
        if m.group(2) not in REPORT:
            raise ValueError(f"a results block names {m.group(2)!r}; known: {', '.join(REPORT)}")
        file, write = REPORT[m.group(2)]
        try:
            data = json.loads((results / f"{file}.json").read_text(), parse_constant=not_finite)
            harness.sealed(data, file)  # as its run wrote it: the checks below catch what a run should never write
            plausible(data)
            body = write(data)
            command = harness.spelled(str(data.get("about", {}).get("command", "?"))).replace("\n", " ")
        except (OSError, ValueError, LookupError, TypeError, AttributeError, ArithmeticError, RecursionError, StopIteration) as e:
            raise ValueError(f"results/{file}.json (block {m.group(2)}): {type(e).__name__}: {e}") from None
        # a code span that no run of backticks in the command can end (CommonMark: a longer run delimits it)
        tick = "`" * (1 + max((len(r) for r in re.findall("`+", command)), default=0))
        pad = " " if command[:1] == "`" or command[-1:] == "`" else ""
        html = not getattr(write, "fenced", False)
        return f"{m.group(1)}{escaped(body, html=html)}\n\n({tick}{pad}{escaped(command)}{pad}{tick}, results/{file}.json)\n{m.group(4)}"
    out, last = [], 0  # the blocks found in the masked page, filled in the page itself
    for m in BLOCK.finditer(masked):
        out += [text[last:m.start()], fill(m)]
        last = m.end()
    return "".join(out) + text[last:]


def not_finite(name):
    raise ValueError(f"holds {name}: a published number must be finite")


SHARES = ("recent_share", "sum_share", "sink_share", "share_of_limit", "share_kept")  # parts of a whole (on_off_share
# is a difference: it may be negative)
COUNTS = ("bytes", "seconds", "per_s", "_s", "MiB", "batch", "per_seq", "size", "length", "lengths", "layers", "count",
          "tokens", "_read", "threads", "cores", "loops", "processes", "weights", "steps", "vs_transformers", "loss", "std",
          "_r")  # sizes, counts, times, speeds, their ratios, losses, spreads: never negative
WHOLE = ("tokens", "_read", "length", "lengths", "layers", "threads", "cores", "loops", "processes", "weights", "steps",
         "batch", "_r", "_size", "_sizes")  # counted, never a fraction
SIZES = ("_size", "_sizes", "_weights")  # a multi-state's rows, a model's weights: at least 1


def plausible(data, where="", key="") -> None:
    """Refuse a number no run can produce: a perplexity below 1 (a loss below 0), a negative count, time,
    speed or speed ratio (COUNTS), a size below 1, a fraction of a count (WHOLE), a share outside 0..1, inf
    (1e999 in the file), and text or true where a number goes. Walks the whole
    results file (nested objects and lists; a list's numbers are its key's: "lengths": [1024, 4096])."""
    if isinstance(data, dict):
        for k, v in data.items():
            plausible(v, f"{where}.{k}" if where else str(k), str(k))
    elif isinstance(data, list):
        if key == "conversions":  # [tokens, loss from scratch, loss converted, their difference] per row
            data = [dict(zip(("tokens", "scratch_loss", "converted_loss"), row)) if isinstance(row, list) else row for row in data]
        for i, v in enumerate(data):
            plausible(v, f"{where}.{i}", key)
    else:
        named = f"_{key}"  # "r" and "tail_r" end in "_r" too
        floor = 1 if key.endswith("ppl") else 0 if named.endswith(COUNTS) else None
        floor = 1 if named.endswith(SIZES) else floor  # no run has a size of 0 rows
        numeric = floor is not None or key.endswith(SHARES) or named.endswith(WHOLE)
        words = isinstance(data, str) and named.endswith(("_threads", "_tokens"))  # "one per job"; view's tokens, as text
        if isinstance(data, (bool, str)) and numeric and not words:  # json's true would print as 1.00, "-5" as -5
            raise ValueError(f"{where} is {json.dumps(data)}: a published {key} is a number")
        if isinstance(data, float) and not guards.number(data):  # 1e999 reads as inf, past parse_constant's words
            raise ValueError(f"{where} is {data}: a published number is finite")
        if not guards.number(data):
            return
        if floor is not None and data < floor:
            raise ValueError(f"{where} is {data}: a published {key} is at least {floor}")
        if named.endswith(WHOLE) and data != int(data):
            raise ValueError(f"{where} is {data}: a published {key} is a whole number")
        if key.endswith(SHARES) and not 0 <= data <= 1:
            raise ValueError(f"{where} is {data}: a published {key} is from 0 to 1")


def outside_code(text: str) -> str:
    """text with every code example outside a results block blanked (newlines kept, so line numbers
    hold): the markers a page shows as an example are not blocks. An example is a fence (``` or ~~~,
    closed by a run of the same character at least as long, CommonMark's rule), a <pre>, <textarea>,
    <script> or <style> (CommonMark's raw HTML blocks), an indented code block (a tab is 4 columns) or a
    quote. A block's own fences stay."""
    out, fence, block = list(text), None, False
    pos = 0
    blank = lambda a, b: [c if c == "\n" else " " for c in text[a:b]]
    for line in re.findall(r"[^\n]*\n|[^\n]+$", text):  # Markdown's lines end at \n alone (splitlines: at \f, U+2028 too)
        columns = line.expandtabs(4)  # CommonMark's tab stops: a tab indents as far as 4 spaces
        s, indent = line.strip(" \t\n"), len(columns) - len(columns.lstrip(" "))  # a no-break space is text, not indentation
        if block:
            block = not line.startswith("<!-- /results -->")
        elif fence is not None:  # a fence closes at a run as long, indented less than 4 spaces (CommonMark)
            if fence[1] in s.lower() if fence[1].startswith(("</", "-->")) else indent < 4 and s.startswith(fence[1]) and not s.strip(fence[1][0]):
                out[fence[0]:pos + len(line)] = blank(fence[0], pos + len(line))
                fence = None
        elif indent < 4 and s.startswith(("```", "~~~")) and not (s[0] == "`" and "`" in s.lstrip("`")):  # ```x```: a span
            fence = (pos, s[0] * (len(s) - len(s.lstrip(s[0]))))
        elif indent < 4 and (raw := next((t for t in RAW if re.match(rf"<{t}(\s|>|$)", s.lower())), None)):
            fence = (pos, f"</{raw}>")
            if fence[1] in s.lower():  # one line
                out[pos:pos + len(line)] = blank(pos, pos + len(line))
                fence = None
        elif line.startswith("<!-- results:"):
            block = True
        elif indent < 4 and s.startswith("<!--") and not re.match(LOOSE, s):  # a comment, not a marker however spelled:
            fence = (pos, "-->")  # nothing in it opens a fence (CommonMark's HTML block up to its '-->')
            if "-->" in s[4:] or s.startswith(("<!-->", "<!--->")):  # one line
                out[pos:pos + len(line)] = blank(pos, pos + len(line))
                fence = None
        elif indent >= 4 or s.startswith(">"):  # an indented code block or a quote: an example
            out[pos:pos + len(line)] = blank(pos, pos + len(line))
        else:  # a code span in prose: `<!-- results: NAME -->` quoted as an example
            for m in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", line):
                out[pos + m.start():pos + m.end()] = blank(pos + m.start(), pos + m.end())
        pos += len(line)
    if fence is not None:  # a fence never closed runs to the end of the page: a block after it would be an example
        if re.search(r"^<!-- results:", text[fence[0]:], re.M):  # never rewritten, and --check would call it up to date
            raise ValueError(f"line {text[:fence[0]].count(chr(10)) + 1} opens {fence[1]!r}'s example, which is never "
                             "closed, so the results blocks after it are taken for an example: close it")
        out[fence[0]:] = [c if c == "\n" else " " for c in text[fence[0]:]]
    return "".join(out)


def paired(text: str):
    """Every results marker of a page in order: an opening on a line of its own, then a closing, and so on."""
    opened = None
    for m in MARKER.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        # BLOCK reads markers at a line's start only: an indented one would pair here, be skipped there, and
        # the block before it would run on to the next block's closing, over the prose between
        if m.start() and text[m.start() - 1] != "\n":
            raise ValueError(f"line {line}: a results marker must begin its line: {m.group(0).strip()!r} "
                             "follows other text or indentation")
        if m.group(0) == "<!-- /results -->":
            if opened is None:
                raise ValueError(f"line {line}: a '<!-- /results -->' closes no block")
            opened = None
        elif m.group(1) is None:
            raise ValueError(f"line {line}: {m.group(0)!r} is not a results marker: write '<!-- results: NAME -->' "
                             "on a line of its own, or '<!-- /results -->' (a comment of prose: start it with another word)")
        elif opened is not None:
            raise ValueError(f"line {opened[0]}: the block {opened[1]!r} has no '<!-- /results -->' before the next "
                             f"block (line {line})")
        else:
            opened = (line, m.group(1))
    if opened is not None:
        raise ValueError(f"line {opened[0]}: the block {opened[1]!r} has no '<!-- /results -->'")


def escaped(text: str, html=False) -> str:
    """Written text that cannot open or close an HTML comment, so no results file can end its block, nor
    hold a carriage return (written \\r: the next report would refuse the page as CRLF);
    with html (any block but a fenced one: the writer, not the data, says which), every '<' is written
    &lt;, so a label cannot be a tag (inside a fence nothing renders as HTML, and &lt; would show as written)."""
    text = text.replace("<!--", "&lt;!--").replace("-->", "--&gt;").replace("\r", "\\r")  # a CR made the page CRLF
    return text.replace("<", "&lt;") if html else text


def cmd_report(args):
    """Rewrite every results block of README.md, docs/*.md and course/*.md from results/ (what the pages
    cite, whatever MSRNN_RESULTS says); --check only lists stale ones. A page that cannot be written is
    named, and no page is written unless every page can be."""
    print(f"reading {PUBLISHED}" + (f" (the pages cite it; MSRNN_RESULTS={harness.RESULTS} is not read)"
                                    if harness.RESULTS != PUBLISHED else ""))
    stale = []
    for page in sorted(p for pattern in PAGES for p in harness.ROOT.glob(pattern)):
        name = page.relative_to(harness.ROOT)
        try:
            text = page.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{name} is not UTF-8 text ({e.reason} at byte {e.start})") from None
        if b"\r" in page.read_bytes():  # a Windows checkout: read_text hides \r, and the rewrite would drop every one
            raise ValueError(f"{name} has Windows line ends (CRLF): convert it to LF (git config core.autocrlf false) "
                             "before the report writes it")
        try:
            new = reported(text)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
        if new != text:
            stale.append((page, new))
    for page, _ in stale if not args.check else ():  # every page checked before any is written
        if page.is_symlink() or not page.resolve().is_relative_to(harness.ROOT.resolve()):  # or its folder (docs/) is one
            raise ValueError(f"{page.relative_to(harness.ROOT)} is a link to {page.resolve()}: the report writes only "
                             "the repository's own pages (replace the link by the file)")
        if page.stat().st_nlink > 1:  # a rewrite is a new file: the other links would keep the old text
            raise ValueError(f"{page.relative_to(harness.ROOT)} has {page.stat().st_nlink} hard links: the report would "
                             "rewrite this one only; copy it to a file of its own")
        if not page.stat().st_mode & stat.S_IWUSR:  # by its mode: root may write a read-only file, and should not
            raise ValueError(f"{page.relative_to(harness.ROOT)} is read-only: the report does not change its mode")
    for page, new in stale if not args.check else ():
        mode = stat.S_IMODE(page.stat().st_mode)
        harness.atomic_write(page, new)
        os.chmod(page, mode)  # the page's own mode, not a new file's
    print(("stale: " if args.check else "rewritten: ") + (", ".join(str(p.relative_to(harness.ROOT)) for p, _ in stale) or "none"))
    if args.check and stale:
        raise SystemExit(1)
    return None, None


COMMANDS = {"tour": (cmd_tour, None), "ppl": (cmd_ppl, None), "check": (cmd_check, None),
            "sweep": (cmd_sweep, experiments.draw_sweep), "retention": (cmd_retention, experiments.draw_retention),
            "passkey": (cmd_passkey, None), "memory": (cmd_memory, None), "t2r": (cmd_t2r, compare.draw),
            "view": (cmd_view, None), "board": (cmd_board, board.draw), "report": (cmd_report, None)}


def result_name(args, parser) -> str:
    """The command's name for its default configuration; otherwise runs/ and a name that says what
    differs, so a run with other settings or another model never overwrites the results README shows.
    --compile is not a setting: it computes the same numbers (to float32 rounding), sooner; nor is
    --fresh, which measures them again."""
    common = {"model": None, "dtype": "float32", "device": "cpu"}  # options of every command, and their defaults
    changed = harness.changed_options(args, parser, ("cmd", "debug", "screenshot", "compile", "fresh", *common))
    changed += [(k, getattr(args, k)) for k, default in common.items() if getattr(args, k) != default]
    return harness.run_name(args.cmd, changed)


def parser():
    """The command line. Long, but flat: one declaration per option, nothing to follow."""
    model_help = "a Hugging Face checkpoint folder (default: SmolLM2-135M-Instruct, prepared on first use)"
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    debug_help = harness.DEBUG_HELP
    dtype_help = "the float the model computes in: float32 (default), bfloat16, float16 or float64"
    device_help = "cpu (default), cuda, cuda:N, mps, or auto (cuda where there is a GPU)"
    fresh_help = ("measure every setting again, ignoring results/'s cached numbers (their keys cover the model's "
                  "config and weights, the tokens, the code, and a policy's file, its imports, the data files its "
                  "source names beside it, the values its code reads and its scores on a fixed probe; not a file it reads "
                  "by a name built at run time, nor code outside the repository and the state only such code reaches, "
                  "where the probe's scores do not change)")
    compile_help = ("read each text's steps with torch.compile: the same numbers to float32 rounding, faster "
                    "once compiled (a C++ compiler is needed; up to minutes of compiling the first time, far less once "
                    "cached: python -m lab.bench, line 1d)")
    # the options of every command go before it or after it; after it, they must not reset a value given before
    common = argparse.ArgumentParser(add_help=False)
    for p, default in ((ap, lambda value: value), (common, lambda value: argparse.SUPPRESS)):
        p.add_argument("--model", default=default(None), help=model_help)
        p.add_argument("--dtype", choices=list(load_weights.DTYPES), default=default("float32"), help=dtype_help)
        p.add_argument("--device", default=default("cpu"), help=device_help)
        p.add_argument("--debug", action="store_true", default=default(False), help=debug_help)
    sub = ap.add_subparsers(dest="cmd", metavar="command")
    one = "full, a name from policies.py, lookahead.py or zoo.py (" + ", ".join(specs.POLICIES | specs.ZOO) + "), with parameters as in sink:8, " \
          "or path/to/file.py:function"
    p = sub.add_parser("tour", parents=[common], help="the guided tour (the default)")
    p.add_argument("--policies", nargs="+", help=f"each: {one} (default: window sink h2o tova for perplexity, "
                   "window sink tova for the pass key)")

    text = argparse.ArgumentParser(add_help=False)  # the commands that read a text: read_text
    text.add_argument("--text", help="a UTF-8 text file (default: a Canterbury-corpus book, see --book)")
    text.add_argument("--encoding", help="the --text file's encoding (default utf-8)")
    text.add_argument("--book", choices=list(corpus.BOOKS), help="a book to read without --text (default alice29)")

    p = sub.add_parser("ppl", parents=[common, text], help="perplexity of a text under a policy and multi-state size")
    p.add_argument("--policy", default="tova", help=f"{one} (default tova)")
    p.add_argument("--size", type=harness.at_least(1), help="multi-state size: rows kept per layer (omit for --policy full)")
    p.add_argument("--prompt", choices=("step", "full"), default="step",
                   help="step: evict from the first token (the MSRNN, default); full: read each chunk's first "
                        "--prompt-len tokens with full attention, then cut to --size once (the official TOVA code, kvpress)")
    p.add_argument("--prompt-len", type=harness.at_least(0), help="tokens of each chunk that are the prompt; only the tokens after it "
                   "are scored (default: half the chunk with --prompt full, else 0)")
    p.add_argument("--tokens", type=harness.at_least(2), default=None, help="use only the first N tokens of the text")
    p.add_argument("--chunk", type=harness.at_least(2), default=4096, help="tokens per chunk, each read from scratch (default 4096)")
    p.add_argument("--compile", action="store_true", help=compile_help)
    p.add_argument("--tail", help="fold every row the policy drops into a T2R state (t2r/tail.py) of this feature "
                   "map, kind:r, e.g. hedgehog:16 or relu:16; untrained unless --tail-maps is given")
    p.add_argument("--tail-maps", help="a maps file that training saved (safetensors), for --tail")

    p = sub.add_parser("check", parents=[common], help="check a policy: exact, causal, contract, cost, quality")
    p.add_argument("policy", nargs="*", default=list(specs.POLICIES) + ["lookahead:256"],
                   help=f"one or more: {one} (default: every built-in, and lookahead:256)")
    p.add_argument("--quick", action="store_true", help="skip the quality run on the default model")
    p.add_argument("--fresh", action="store_true", help=fresh_help)
    p.add_argument("--tail", help="also check the policy with a T2R tail of this feature map, kind:r (e.g. "
                   "relu:6): its two views agree, and a zeroed tail is the policy alone")

    p = sub.add_parser("sweep", parents=[common], help="perplexity vs multi-state size, every policy (Table 3)")
    p.add_argument("--sizes", type=harness.at_least(1), nargs="+", default=[64, 128, 256, 512, 1024, 2048])
    p.add_argument("--chunks", type=harness.at_least(1), default=4, help="4,096-token chunks of the books (default 4)")
    p.add_argument("--chunk", type=harness.at_least(2), default=4096, help="tokens per chunk (default 4096)")
    p.add_argument("--policies", nargs="+", default=["window", "sink", "h2o", "tova", "lookahead", "lookahead:256"],
                   help=f"each: {one} (default: window sink h2o tova lookahead lookahead:256)")
    p.add_argument("--jobs", type=harness.at_least(1), default=2, help="processes of one thread each (default 2: faster on 2 cores)")
    p.add_argument("--compile", action="store_true", help=compile_help)
    p.add_argument("--fresh", action="store_true", help=fresh_help)

    p = sub.add_parser("board", parents=[common], help="a leaderboard: perplexity, gap to the bound, passkey, cost, "
                       "verdicts for any set of policies")
    p.add_argument("policies", nargs="*", help=f"each: {one}; added to the paper's and the zoo's")
    p.add_argument("--only", action="store_true", help="just the policies named, not the paper's and the zoo's")
    p.add_argument("--sizes", type=harness.at_least(1), nargs="+", default=[64, 256, 1024])
    p.add_argument("--chunks", type=harness.at_least(1), default=4, help="4,096-token chunks of the books (default 4)")
    p.add_argument("--chunk", type=harness.at_least(2), default=4096, help="tokens per chunk (default 4096)")
    p.add_argument("--passkey-sizes", type=harness.at_least(1), nargs="+", default=[128, 512])
    p.add_argument("--length", type=harness.at_least(64), default=2048, help="passkey prompt tokens (default 2048)")
    p.add_argument("--jobs", type=harness.at_least(1), default=2, help="processes of one thread each (default 2)")
    p.add_argument("--compile", action="store_true", help=compile_help)
    p.add_argument("--fresh", action="store_true", help=fresh_help)

    p = sub.add_parser("retention", parents=[common], help="which tokens TOVA keeps (Fig. 7-9, Table 2)")
    p.add_argument("--policy", default="tova", help=f"{one} (default tova)")
    p.add_argument("--size", type=harness.at_least(1), default=256)
    p.add_argument("--length", type=harness.at_least(2), default=2048)
    p.add_argument("--layer", type=harness.at_least(0), default=15, help="the layer drawn in the heatmap")

    p = sub.add_parser("view", parents=[common, text], help="a page to see what policies keep, step by step, layer by layer")
    p.add_argument("--policy", nargs="+", default=["sink", "tova"], help=f"one or more (the page shows two side by "
                   f"side): {one} (default: sink tova)")
    p.add_argument("--size", type=harness.at_least(1), default=64, help="multi-state size (default 64)")
    p.add_argument("--tokens", type=harness.at_least(2), default=512, help="the first N tokens of the text (default 512)")
    p.add_argument("--screenshot", action="store_true", help="also a PNG of the page, taken by headless Chromium")

    p = sub.add_parser("passkey", parents=[common], help="passkey retrieval accuracy per policy and size")
    p.add_argument("--sizes", type=harness.at_least(1), nargs="+", default=[128, 512])
    p.add_argument("--length", type=harness.at_least(1), default=2048, help="prompt tokens (default 2048)")
    p.add_argument("--policies", nargs="+", default=["sink", "h2o", "tova", "lookahead"],
                   help=f"each: {one} (default: sink h2o tova lookahead)")
    p.add_argument("--prompt", nargs="+", choices=("step", "full"), default=["step", "full"],
                   help="prompt regimes: step (evict while reading), full (read in full, cut once); default both")

    p = sub.add_parser("memory", parents=[common], help="cache bytes, largest batch, decoding tokens/s (Table 1)")
    p.add_argument("--sizes", type=harness.at_least(1), nargs="+", default=[256, 512, 1024, 2048])
    p.add_argument("--context", type=harness.at_least(1), default=4096)
    p.add_argument("--budget", type=harness.positive_at_most(2.0 ** 40), default=1.0,
                   help="cache memory budget in GiB (default 1)")

    p = sub.add_parser("report", help="rewrite the results tables of README.md and docs/ from results/*.json")
    p.add_argument("--check", action="store_true", help="only say which pages are stale (exit status 1 if any)")

    sub.add_parser("grade", add_help=False, help="grade the course: demo.py grade [FOLDER] [--reference] [--init] "
                   "[--only N ...] (course/README.md)")

    p = sub.add_parser("t2r", parents=[common], help="linear attention swapped in, a constant-size state (LoLCATs' "
                       "transfer, then a finetune), compared with TOVA by bytes of state; Kasai's T2R: python -m t2r.mini")
    p.add_argument("--r", type=harness.at_least(2), default=64, help="features of each map and the hybrid's, "
                   "Hedgehog's two signs counted together (default 64)")
    p.add_argument("--kinds", choices=("relu", "hedgehog"), nargs="+", default=["relu", "hedgehog"],
                   help="the maps with no exact rows, trained side by side (default: relu hedgehog)")
    p.add_argument("--window", type=harness.at_least(0), default=64, help="the hybrid's exact rows (default 64; 0: no hybrid)")
    p.add_argument("--train-length", type=harness.at_least(2), default=1024, help="tokens per training chunk (default 1024)")
    p.add_argument("--epochs", type=harness.at_least(1), help="passes over the training text (default 2; not with --preset papers)")
    p.add_argument("--minutes", type=harness.positive, help="CPU budget of the attention transfer (default 20)")
    p.add_argument("--finetune", choices=("lora", "full"), default="lora",
                   help="lora: LoRA r=8 on q, k, v, o (LoLCATs); full: every weight (Kasai et al.)")
    p.add_argument("--finetune-minutes", type=harness.positive, help="budget of each finetune (default 7)")
    p.add_argument("--tail-r", type=harness.at_least(2), default=16, help="features of TOVA's tail (default 16)")
    p.add_argument("--tail-size", type=harness.at_least(1), default=64, help="rows TOVA holds while its tail trains (default 64)")
    p.add_argument("--tail-minutes", type=harness.positive, help="budget of the tail's transfer (default 10)")
    p.add_argument("--tail-length", type=harness.at_least(2), default=None,
                   help="tokens per chunk of the tail's transfer (default: 4,096, the evaluation's)")
    p.add_argument("--eval-chunks", type=harness.at_least(1), default=1, help="4,096-token chunks of alice29, asyoulik (default 1)")
    p.add_argument("--sizes", type=harness.at_least(1), nargs="+", default=[32, 64, 128, 256], help="TOVA, H2O, Window+4 sizes")
    p.add_argument("--threads", type=harness.at_least(0, threads.cores()), default=0,
                   help=f"torch threads, at most the {threads.cores()} cores (default 0: torch's choice)")
    p.add_argument("--preset", choices=("cpu", "papers"), default="cpu", help="cpu: the --minutes budgets (default); "
                   "papers: LoLCATs' 20 M transfer + 20 M finetune tokens, no time limit (a GPU: --device cuda)")
    return ap, sub


def main(argv=None):
    """Run a command (argv as the command line's); a second command started in another thread of the process waits
    for the first to end (harness.ONE); one started in the same thread (a signal's handler, a policy) is refused."""
    if harness.RUNNING[0] == threading.get_ident():  # it cannot wait for the command it interrupts
        raise SystemExit("error: a command was started while another runs in the same thread (from a signal's "
                         "handler, a policy, or a file run as a policy): it cannot wait for that one to end; start it after")
    if harness.RUNNING[0] is not None and guards._serves(harness.RUNNING[0]):  # nor for one
        raise RuntimeError("a command was started by a policy's thread or pool job while its command runs: that command "
                           "waits for its policy, so this one could never start; start it after")  # that waits for
        # its policy (an exception, not an exit: a thread pool's worker passes it on, where an exit would end it)
    if not harness.ONE.acquire(blocking=False):
        print("[msrnn] another command is running in this process: this one starts when it ends (two at once would "
              "share sys.stdout, so each log would hold the other's lines)", file=sys.stderr, flush=True)
        t0 = time.time()
        while not harness.ONE.acquire(timeout=60):  # said again: a command started by the one it waits for never starts
            print(f"[msrnn] still waiting for the other command ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    harness.RUNNING[0] = threading.get_ident()
    one = harness.ONE  # the lock taken (a fork in the command replaces the child's, not this one)
    try:
        return _main(argv)
    finally:
        harness.RUNNING[0] = None
        one.release()


def _main(argv):
    ap, sub = parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["grade"]:  # the course's grader, with its own options (course/grade.py)
        from course import grade
        raise SystemExit(grade.main(argv[1:]))
    command = next((a for a in argv if a in sub.choices or a == "grade"), None)  # `--text grade` is ppl's text
    if command == "grade" and argv[0].startswith("-"):  # `demo.py --model X grade`: the grader has options of its own
        raise SystemExit("error: grade takes no options before it: python demo.py grade [FOLDER] [--reference] "
                         "[--only N ...] [--model] (its --model is the real-model checks, not a checkpoint)")
    args = harness.parse(ap, argv)
    if args.cmd is None:  # no command: the tour
        args = ap.parse_args([*argv, "tour"])
    if args.model is not None:  # check the folder before any work, with the loader's own message
        load_weights.checkpoint_folder(args.model)
    load_weights.device(args.device)  # and the device
    harness.FRESH.set(getattr(args, "fresh", False))
    if twice := harness.repeated(args, ignore=("policies", "policy")):  # policies: specs.distinct names them below
        raise SystemExit(f"error: {twice}")
    chosen = getattr(args, "policies", None) or getattr(args, "policy", None) or []
    # a bad policy name or file, or two policies of one display name, fail before the model is loaded; what a policy
    with harness.transcript() as imported:  # file prints at its import is the log's first lines
        specs.distinct([specs.named(spec) for spec in ([chosen] if isinstance(chosen, str) else chosen)])
    command, draw = COMMANDS[args.cmd]
    if args.cmd in ("ppl", "report"):  # tools, not experiments: nothing to save
        return command(args)
    name = args.result = result_name(args, sub.choices[args.cmd])
    harness.check_writable(name)  # before the work, not after it
    t0, version = time.time(), harness.code_version()
    with harness.transcript() as printed:
        data, model = command(args)
    about = {"code_version": version, "seconds": round(time.time() - t0, 1),  # the model, where one was read (not
             "model": None if model is None else args.model or "SmolLM2-135M-Instruct (default)",  # check --quick)
             "dtype": str(model.dtype).removeprefix("torch.") if model is not None else None}
    path = harness.save(name, data, about, imported.getvalue() + printed.getvalue(), draw)
    if args.cmd == "view":  # the page itself, beside its data
        print(f"page: {write_page(data, path.with_suffix('.html'))}")
        if not args.screenshot and path.with_suffix(".png").exists():  # kept (the pages embed the published one), but said
            print(f"{path.with_suffix('.png')} is an earlier run's screenshot, not this page's: --screenshot remakes it")
        if args.screenshot:
            harness.browse(path.with_suffix(".html"), f"layer=15&step={len(data['tokens']) * 2 // 3}",
                           screenshot=path.with_suffix(".png"))
    print(f"{args.cmd}: {time.time() - t0:.0f} s; results in {path.with_suffix('.*')}")
    if data.get("failed"):  # a course or CI grades with the exit status
        raise SystemExit("check failed: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in data["failed"].items()))
    return data, model


if __name__ == "__main__":
    harness.command(main, "interrupted (results already saved are kept; a sweep run again resumes where it stopped)")

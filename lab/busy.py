"""Speed beside other work: python -m lab.busy [--quick] [--tour]  ->  results/busy.json, .log, .png

Each OpenMP setting runs the same two jobs in fresh processes (libgomp reads its variables when torch
loads it): decoding 48 tokens under TOVA 16 token by token (many small parallel regions), and one
prefill of 1,024 tokens (a few large ones). Idle: one process alone. Loaded: three at once beside two
busy loops this command starts and stops, as on a laptop with other programs open or a shared
server. Settings and conditions alternate round by round, and each figure is the median of its
rounds, so the ratios are measured in one run. --tour also times `python demo.py` with the project's
defaults, idle and loaded (5 to 10 minutes more). engine/threads.py holds the default it chooses.
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

from engine import threads
from lab import harness

SETTINGS = {  # name -> the environment a process starts with (none of the variables set by the user)
    "libgomp's default (spin 300,000)": {},
    f"GOMP_SPINCOUNT={threads.SPIN} (ours)": {"GOMP_SPINCOUNT": threads.SPIN},
    "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "one thread (OMP_NUM_THREADS=1)": {"OMP_NUM_THREADS": "1"},
}
DEFAULT = f"GOMP_SPINCOUNT={threads.SPIN} (ours)"
BUSY = "while True: pass"
WORKER = """
import sys, time, torch, llama, load_weights, msrnn, policies
model = load_weights.load_model()
x = torch.arange(100, 1124)[None]
with torch.no_grad():
    msrnn.run(model, x[:, :4], policies.tova, 16); llama.forward(model, x[:, :64])  # warm up
    t0 = time.perf_counter(); msrnn.run(model, x[:, :48], policies.tova, 16); decode = time.perf_counter() - t0
    t0 = time.perf_counter(); llama.forward(model, x); prefill = time.perf_counter() - t0
print(decode, prefill, torch.get_num_threads())
"""


def clean_env(extra: dict) -> dict:
    """This environment without any OpenMP variable, plus the setting's."""
    env = {k: v for k, v in os.environ.items() if k not in threads.OURS + ("OMP_NUM_THREADS",)}
    return env | extra | {"PYTHONPATH": str(harness.ROOT)}


def workers(setting: dict, n: int) -> list[tuple[float, float, int]]:
    """Start n worker processes at once under `setting`; (decode s, prefill s, threads) of each."""
    procs = [subprocess.Popen([sys.executable, "-c", WORKER], cwd=harness.ROOT, env=clean_env(setting),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate()
        if p.returncode:
            raise RuntimeError(f"a timing process failed:\n{stderr[-2000:]}")
        decode, prefill, n_threads = stdout.split()
        out.append((float(decode), float(prefill), int(n_threads)))
    return out


class Load:
    """`n` busy loops for the length of a with-block: the known load beside which 'loaded' runs."""
    def __init__(self, n=2):
        self.n = n

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(self.n)]
        time.sleep(0.5)

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def measure(rounds: int, loaded_procs: int, log) -> dict:
    """Per setting and condition: the median over rounds of each process's decode and prefill seconds."""
    runs = {name: {"idle": [], "loaded": []} for name in SETTINGS}
    for r in range(rounds):
        for name, env in SETTINGS.items():
            runs[name]["idle"] += workers(env, 1)
            with Load():
                runs[name]["loaded"] += workers(env, loaded_procs)
            log(f"round {r + 1}/{rounds}, {name}: idle decode {runs[name]['idle'][-1][0]:.2f} s, loaded decode "
                + ", ".join(f"{d:.2f}" for d, _, _ in runs[name]["loaded"][-loaded_procs:]) + " s")
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    return {name: {cond: {"decode_s": med(xs, 0), "prefill_s": med(xs, 1), "threads": xs[0][2], "samples": len(xs)}
                   for cond, xs in conds.items()} for name, conds in runs.items()}


def table(data: dict) -> str:
    """The settings side by side: seconds, and each against libgomp's default in the same condition."""
    base = data["settings"][next(iter(SETTINGS))]
    rows = ["| OpenMP setting | threads | decode 48 tokens, idle | loaded | prefill 1,024, idle | loaded | loaded decode vs libgomp's default |",
            "|---|---|---|---|---|---|---|"]
    for name, r in data["settings"].items():
        for cond in ("idle", "loaded"):  # a time of 0 is no run's (and divides the last column)
            if not all(r[cond][k] > 0 for k in ("decode_s", "prefill_s")):
                raise ValueError(f"{name}, {cond}: decode_s {r[cond]['decode_s']}, prefill_s {r[cond]['prefill_s']}; "
                                 "a measured time is above 0")
        rows.append(f"| {name} | {r['idle']['threads']} | {r['idle']['decode_s']:.2f} s | {r['loaded']['decode_s']:.2f} s | "
                    f"{r['idle']['prefill_s']:.2f} s | {r['loaded']['prefill_s']:.2f} s | "
                    f"{base['loaded']['decode_s'] / r['loaded']['decode_s']:.1f}x faster |")
    return "\n".join(rows) + ("\n\n" + tour_time(data) if "tour_s" in data else "")


def tour_time(data) -> str:
    t, cores, loops = data["tour_s"], data["cores"], data["busy_loops"]
    for what, x in (("tour_s.idle", t["idle"]), ("tour_s.loaded", t["loaded"]), ("cores", cores), ("busy_loops", loops)):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x < math.inf:
            raise ValueError(f"{what} must be a positive number, got {x!r}")
    return (f"The tour, `python demo.py`, with the project's defaults ({data['default']}): {t['idle']:.0f} s on "
            f"{cores} idle cores, {t['loaded']:.0f} s beside {loops} busy loops ({t['loaded'] / t['idle']:.1f}x).")


def tour(log) -> dict:
    """Seconds of `python demo.py` with the project's defaults (no OpenMP variable set: engine/threads.py
    chooses), idle and loaded."""
    out = {}
    for cond in ("idle", "loaded"):
        t0 = time.time()
        with Load() if cond == "loaded" else _nothing(), tempfile.TemporaryDirectory() as elsewhere:
            done = subprocess.run([sys.executable, "demo.py"], cwd=harness.ROOT, capture_output=True, text=True,
                                  env=clean_env({"MSRNN_RESULTS": elsewhere}))  # a timing run: not the published tour
        if done.returncode:
            raise RuntimeError(f"python demo.py failed:\n{done.stderr[-2000:]}")
        out[cond] = time.time() - t0
        log(f"tour ({cond}): {out[cond]:.0f} s")
    return out


class _nothing:
    def __enter__(self): pass
    def __exit__(self, *exc): pass


def draw(plt, data):
    names = list(data["settings"])
    for i, cond in enumerate(("idle", "loaded")):
        plt.bar([j + 0.4 * i for j in range(len(names))], [data["settings"][n][cond]["decode_s"] for n in names],
                0.4, label=cond)
    plt.xticks([j + 0.2 for j in range(len(names))], [n.split(" (")[0].split(":")[0] for n in names], fontsize=7)
    plt.ylabel("seconds to decode 48 tokens (TOVA 16)")
    plt.title(f"beside 2 busy loops, {data['loaded_processes']} processes at once")
    plt.legend()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=harness.at_least(1), default=3)
    ap.add_argument("--quick", action="store_true", help="one round")
    ap.add_argument("--tour", action="store_true", help="also time python demo.py, idle and loaded")
    ap.add_argument("--debug", action="store_true", help=harness.DEBUG_HELP)
    args = harness.parse(ap, argv)
    # the published settings (with --tour: the pages cite its times) write results/busy.* (busy_quick.*); any
    # other run, runs/ and a name of what differs
    changed = harness.changed_options(args, ap, ("quick", "tour", "debug")) + [("tour", False)] * (not (args.tour or args.quick))
    name = harness.run_name("busy_quick" if args.quick else "busy", changed)
    harness.check_writable(name)
    t0, version = time.time(), harness.code_version()
    with harness.transcript() as printed:
        log = lambda s: print(s, flush=True)
        log(f"{threads.cores()} cores; each setting: 1 process idle, 3 at once beside 2 busy loops")
        data = {"cores": threads.cores(), "loaded_processes": 3, "busy_loops": 2, "default": DEFAULT,
                "settings": measure(1 if args.quick else args.rounds, 3, log)}
        if args.tour:
            data["tour_s"] = tour(log)
        print("\n" + table(data), flush=True)
    about = {"code_version": version, "seconds": round(time.time() - t0, 1)}  # the command as typed, --rounds too
    path = harness.save(name, data, about, printed.getvalue(), draw)
    print(f"busy: {time.time() - t0:.0f} s; results in {path.with_suffix('.*')}")
    return data


if __name__ == "__main__":
    harness.command(main)

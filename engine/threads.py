"""What OpenMP's waiting threads do: set by every entry point before torch is imported.

Torch's CPU build runs each operation's parallel part on libgomp threads. Between two parallel
regions a waiting thread spins (300,000 turns by default) before it sleeps. On an idle machine that
saves a wake-up; beside other programs the spinning threads take the cores the busy ones need, and
a decode step, hundreds of small parallel regions, becomes several times slower. A short spin
(GOMP_SPINCOUNT=1000) decodes under load as fast as threads that sleep at once
(OMP_WAIT_POLICY=PASSIVE: 7.78 s against 8.01 s in results/busy.json), which cost an earlier idle tour about
40%; 10,000 turns took 1.56x PASSIVE's time (python -m lab.busy measures the settings, idle too; docs/speed.md).

Only a default: a user who sets OMP_WAIT_POLICY or GOMP_SPINCOUNT keeps their choice. libgomp reads
these when torch loads it, so importing this after torch changes only the child processes.
"""
import os

SPIN = "1000"  # turns a waiting thread spins before it sleeps (libgomp's GOMP_SPINCOUNT; its default 300,000)
OURS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # the variables a user may set instead


def defaults(environ=os.environ) -> dict:
    """Set the short spin where the user set neither variable; return what was set."""
    if any(name in environ for name in OURS):
        return {}
    environ["GOMP_SPINCOUNT"] = SPIN
    return {"GOMP_SPINCOUNT": SPIN}


def cores() -> int:
    """The cores this process may run on (its affinity), not the machine's count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


defaults()

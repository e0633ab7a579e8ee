"""Sweep machinery: overhead per trivial cell in-process, and the vmap-over-seeds speed-up.

    python benchmarks/sweep.py [--quick]

1. Overhead: a sweep of trivial cells (no training, no analysis: build the model, write the
   config, hash, write the marker), run in-process on Dask; per-cell wall time after the
   client has started (target < 0.5 s), and the client start-up itself.
2. vmap over seeds: the same S cells (a small ARU trained on the adding task, differing only
   in seed) run as S one-cell tasks and as one vmapped group; both in-process, same run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dynlab.scenarios import parse
from dynlab.scenarios.sweep import dask_client, run_sweep


def scenario(doc: dict, tmp: Path, name: str):
    path = tmp / f"{name}.toml"
    path.write_text("")  # the sweep copies the file text; the parsed doc is what runs
    return parse(doc, str(path))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer cells and steps")
    args = ap.parse_args()
    n_trivial = 20 if args.quick else 60
    seeds = 4 if args.quick else 8
    steps = 100 if args.quick else 300

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        with dask_client() as client:
            client.scheduler_info()  # a round trip: the client is up
        startup = time.perf_counter() - t0

        trivial = {"model": {"unit": "rnn", "hidden": 8}, "train": {"steps": 0}, "sweep": {"seed": list(range(n_trivial))}}
        t0 = time.perf_counter()
        run_sweep(scenario(trivial, tmp, "trivial"), tmp / "trivial")
        total = time.perf_counter() - t0
        per_cell = (total - startup) / n_trivial
        print(f"Dask in-process client start-up: {startup:.2f} s")
        print(f"trivial cells: {n_trivial} in {total:.2f} s -> {per_cell * 1e3:.0f} ms per cell "
              f"(machinery overhead, target < 500 ms: {'met' if per_cell < 0.5 else 'NOT met'})")

        base = {
            "model": {"unit": "aru", "hidden": 32, "n_g": 8},
            "task": {"name": "adding", "length": 20},
            "train": {"steps": steps, "log_every": 50, "eval_every": steps, "checkpoint_every": steps},
        }
        timings = {}
        for vmap in (False, True):
            doc = {**base, "sweep": {"seed": list(range(seeds)), "vmap_seeds": vmap}}
            t0 = time.perf_counter()
            ds = run_sweep(scenario(doc, tmp, f"v{vmap}"), tmp / f"v{vmap}")
            timings[vmap] = time.perf_counter() - t0
            assert (ds["status"] == "ok").all()
        print(f"{seeds} seeds x {steps} steps (ARU 32/8, adding T=20): one cell per seed {timings[False]:.1f} s, "
              f"vmapped {timings[True]:.1f} s -> speed-up {timings[False] / timings[True]:.2f}x")


if __name__ == "__main__":
    main()

"""Fixed points with no options find the flip-flop's 8 attractors (issue 48's acceptance).

    python benchmarks/flipflop_fixed_points.py [--out DIR] [--seeds 3] [--steps 1500]

For each of a GRU, an LSTM and a vanilla RNN (dynlab's defaults: 64 units, BPTT) trained by
``dynlab train --task flipflop`` for ``--seeds`` seeds, and a GRU of 64 units trained in plain
PyTorch (``torch.nn.GRU`` + ``torch.nn.Linear``, Adam, batches of the same task made in NumPy) and
brought in with ``dynlab import --format torch-gru --task flipflop``, this runs the command a user
runs, with no options:

    dynlab analyze fixed-points --checkpoint RUN

and reads its dataset: the stable points near the visited states (the 3-bit flip-flop needs
2^3 = 8, Sussillo & Barak 2013), the saddles, whether the second sampling confirmed the count,
and the time. Run directories already in ``--out`` are reused (delete them to retrain). A
training or an analysis that fails is printed as such, not skipped. Takes about 1 to 4 minutes
per run on 2 shared cores (training and analysis).

Measured (2026-12-07, 2 CPU cores shared with other work, load 8-11; dynlab's default 1,500
training steps, every run at held-out sign accuracy 1.0):

| run | stable (near the visited states) | saddles | beyond | confirmed | analysis |
|---|---|---|---|---|---|
| GRU s0, s1, s2 | 8, 8, 8 | 2, 6, 7 | 118, 109, 119 | yes, yes, yes | 137-337 s |
| LSTM s0, s1, s2 | 8, 8, 8 | 18, 17, 19 | 0, 0, 0 | yes, yes, yes | 216-293 s |
| RNN s0, s1, s2 | 8, 8, 8 | 17, 18, 19 | 0, 0, 0 | yes, yes, yes | 70-112 s |
| PyTorch GRU s0 (sign accuracy 1.0, imported) | 8 | 7 | 116 | yes | 57 s |

Before (the autonomous default), GRU s0 gave 2 stable points near the visited states (one found
by a single run) and the issue's PyTorch GRU "1 stable, 2 saddle ... about 0 unseen". GRU s1's
second sampling first missed 2 of the 8 when it drew 64 starts at random from its pool; it now
minimises from all of its starts (252 there) and finds the same 8. PyTorch trained with one
intra-op thread (its pool's contention on shared cores is ~10x slower).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import xarray as xr

UNITS = ("gru", "lstm", "rnn")


def dynlab(*args: str) -> subprocess.CompletedProcess:
    """The command as a user runs it (the ``dynlab`` console script of this interpreter's environment)."""
    return subprocess.run([sys.executable, "-c", "from dynlab.cli import main; main()", *args],
                          capture_output=True, text=True)


def train_dynlab(run: Path, unit: str, seed: int, steps: int) -> str:
    if (run / "model.eqx").is_file():
        return "reused"
    done = dynlab("train", "--model", unit, "--task", "flipflop", "--seed", str(seed), "--steps", str(steps),
                  "--out", str(run), "-q")
    return "trained" if done.returncode == 0 else f"training failed: {done.stderr.strip()[-200:]}"


def train_torch(run: Path, steps: int, hidden: int = 64, seed: int = 0) -> str:
    """A GRU trained as PyTorch users write it, on dynlab's flip-flop batches, imported with ``dynlab import``."""
    if (run / "model.eqx").is_file():
        return "reused"
    import jax
    import torch

    from dynlab import registry

    task = registry.build("task", "flipflop")
    torch.set_num_threads(1)  # on shared cores its thread pool's contention slows these small ops ~10x (benchmarks/flipflop.py)
    torch.manual_seed(seed)
    gru, readout = torch.nn.GRU(3, hidden, batch_first=True), torch.nn.Linear(hidden, 3)
    params = list(gru.parameters()) + list(readout.parameters())
    opt = torch.optim.Adam(params, lr=3e-3)
    for i in range(steps):
        x, y = (torch.from_numpy(np.array(a)) for a in task.batch(jax.random.key(10_000 + i), 64)[:2])
        loss = torch.mean((readout(gru(x)[0]) - y) ** 2)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    x, y = (torch.from_numpy(np.array(a)) for a in task.batch(jax.random.key(1), 256, split="test")[:2])
    with torch.no_grad():
        accuracy = float((torch.sign(readout(gru(x)[0])) == torch.sign(y)).float().mean())
    weights = run.parent / "torch-gru.pt"
    torch.save({**{f"rnn.{k}": v for k, v in gru.state_dict().items()},
                **{f"fc.{k}": v for k, v in readout.state_dict().items()}}, weights)
    done = dynlab("import", str(weights), "--format", "torch-gru", "--task", "flipflop", "--out", str(run), "-q")
    if done.returncode != 0:
        return f"import failed: {done.stderr.strip()[-200:]}"
    return f"trained in PyTorch (sign accuracy {accuracy:.4f}) and imported"


def accuracy(run: Path) -> str:
    path = run / "metrics.nc"
    if not path.is_file():
        return "-"
    with xr.open_dataset(path) as m:
        return f"{float(m['eval_sign_accuracy'].values[-1]):.4f}" if "eval_sign_accuracy" in m else "-"


def analyse(run: Path) -> dict:
    out = run / "fixed-points.nc"
    for old in run.glob("fixed-points*.*"):  # this script's own results of an earlier run
        old.unlink()
    start = time.perf_counter()
    done = dynlab("analyze", "fixed-points", "--checkpoint", str(run), "-q")
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-300:], "seconds": seconds}
    with xr.open_dataset(out) as ds:
        near = ~ds["beyond_visited"].values.astype(bool)
        classes = ds["stability"].values.astype(str)
        return {"stable": int(((classes == "stable") & near).sum()), "saddle": int(((classes == "saddle") & near).sum()),
                "beyond": int((~near).sum()), "confirmed": int(ds.attrs.get("confirmed", -2)),
                "second": int(ds.attrs.get("confirm_n_stable", -1)), "protocol": ds.attrs.get("protocol", ""),
                "seconds": seconds, "reading": ds.attrs.get("reading", "")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/flipflop-fixed-points"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = [(f"{unit} s{seed}", args.out / f"{unit}-s{seed}", lambda r, u=unit, s=seed: train_dynlab(r, u, s, args.steps))
            for unit in UNITS for seed in range(args.seeds)]
    if not args.no_torch:
        runs.append(("torch GRU s0", args.out / "torch-gru", lambda r: train_torch(r, args.steps)))
    rows = []
    for label, run, train in runs:
        how = train(run)
        result = analyse(run) if (run / "model.eqx").is_file() else {"error": how, "seconds": 0.0}
        rows.append((label, how, accuracy(run), result))
        print(f"{label}: {how}; " + (f"ERROR {result['error']}" if "error" in result else
                                     f"{result['stable']} stable, {result['saddle']} saddle near the visited states, "
                                     f"{result['beyond']} beyond; confirmed {result['confirmed']} (second sampling: "
                                     f"{result['second']} stable); {result['seconds']:.0f} s"), flush=True)
    print("\nrun            accuracy  stable  saddle  beyond  confirmed  seconds")
    for label, _, acc, r in rows:
        if "error" in r:
            print(f"{label:<14} {acc:>8}  error: {r['error'][:80]}")
        else:
            print(f"{label:<14} {acc:>8}  {r['stable']:>6}  {r['saddle']:>6}  {r['beyond']:>6}  {r['confirmed']:>9}  "
                  f"{r['seconds']:>7.0f}")
    eight = sum(1 for *_, r in rows if r.get("stable") == 8)
    print(f"\n{eight} of {len(rows)} runs: 8 stable points with no options (the 3-bit flip-flop's 2^3)")


if __name__ == "__main__":
    main()

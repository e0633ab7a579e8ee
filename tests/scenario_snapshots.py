"""Every built-in scenario at toy size, reduced to its numbers: the before/after check of issue 18.

``python tests/scenario_snapshots.py record`` runs each built-in scenario with the overrides
below (the smallest sizes that still exercise every code path of the program) and writes the
numbers of every dataset it produced to ``tests/reference/scenarios.json``;
``tests/test_scenario_snapshots.py`` reruns them and compares at float32 round-off. Recorded
(on the 2-core CPU machine, jax 0.10.2, ``DYNLAB_DATA`` = the shared data directory: real MNIST
for aru-table1 and pc-width-depth) before the redesign steps of issue 18
(layout, one rule contract, values not flags), so a refactor that changes a number fails the
test. The verdicts (``findings.nc``) are left out since issue #38 decided them by their intervals:
their rule is tested as properties in ``tests/test_claims.py``, not pinned here.

Issue 34 retires these pins: a scenario leaves this table when tests of its properties replace it
(``tests/test_scenario_<name>.py``: identities, closed forms, the same numbers computed two ways),
and a cross-unit scenario when its file is shown to reproduce the recorded numbers. Gone so far:
elm-budget, aru-seeds, pc-time-law (property tests) and pc-width-depth (its datasets equal
``compare_pc_bp`` run directly: ``tests/test_pc_findings.py``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import xarray as xr

REFERENCE = Path(__file__).parent / "reference" / "scenarios.json"

# name -> the --set overrides that make it toy-sized; the scenarios over many networks on 2-3 of them
# (compilation per network dominates the time; every code path of the program still runs)
TOY: dict[str, list[str]] = {
    "aru-table1": ["params.networks=[\"rnn-relu\",\"aru\",\"lstm\"]", "params.steps=3", "params.seeds=[0]", "params.hidden=16", "params.eval_size=32",
                   "params.n_test=64", "params.strengths=[0.0,5.0]", "params.downsample=4",
                   "params.rotation={network=\"aru\",steps=2}",
                   "params.adaptation={onset=10,duration=40,window=10,realisations=2,ics=2,steps=60,burn_in=10}"],
    "elm-shd-adding": ["params.seeds=[0]", "params.steps=3", "params.eval_size=32", "params.batch_size=8",
                       "params.bins_ms=[50.0,100.0]"],
    "sith-trw": ["params.networks=[\"sith-rnn\",\"sithcon\"]", "params.seeds=[0]", "params.steps=3", "params.generic_steps=3", "params.sith_rnn_steps=3",
                 "params.quick=true", "params.n_shuffle=4"],
}


TIMINGS = ("seconds", "wall", "elapsed")  # measured times differ run to run


def _numbers(path: Path) -> dict:
    """Every numeric variable and coordinate of a dataset, as nested lists (NaN as None)."""
    out = {}
    with xr.open_dataset(path) as ds:
        for name, var in {**ds.coords, **ds.data_vars}.items():
            values = np.asarray(var.values)
            if values.dtype.kind not in "fiub" or any(w in str(name) for w in TIMINGS):
                continue
            out[str(name)] = reduce(values)
    return out


SAMPLE = 48


def reduce(values: np.ndarray) -> dict:
    """A variable's fingerprint: its shape, up to [`SAMPLE`][] evenly spaced values (NaN as None),
    and over all values the number of non-finite ones, the sum of |v| and the sum of v² — so a
    change anywhere shows, while the reference file stays small."""
    flat = values.astype(float).ravel()
    idx = np.unique(np.linspace(0, flat.size - 1, min(SAMPLE, flat.size)).round().astype(int)) if flat.size else []
    finite = np.isfinite(flat)
    return {"shape": list(values.shape), "values": [None if not math.isfinite(flat[i]) else float(flat[i]) for i in idx],
            "n_nonfinite": int((~finite).sum()), "abs_sum": float(np.abs(flat[finite]).sum()),
            "sq_sum": float((flat[finite] ** 2).sum())}


def run(name: str, out: Path, env: dict | None = None) -> dict:
    """Run scenario ``name`` at toy size into ``out``; the numbers of every ``*.nc`` it wrote."""
    args = [sys.executable, "-m", "dynlab.cli", "run", name, "-q", "--out", str(out)]
    for s in TOY[name]:
        args += ["--set", s]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=out.parent, env=env)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    result = {}
    for nc in sorted(out.rglob("*.nc")):
        rel = nc.relative_to(out)
        if rel.parts[0] == "cells":  # cell directories are named by a hash: key them by position
            continue
        if rel.name == "findings.nc":  # verdicts: their rule is tested as properties (tests/test_claims.py)
            continue
        result[str(rel)] = _numbers(nc)
    return result


def main() -> None:
    import tempfile

    import conftest  # noqa: F401  (the suite's compile flags, tests/conftest.py: a recording matches the test)

    names = sys.argv[2:] or list(TOY)
    record = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            print(name, flush=True)
            record[name] = run(name, Path(tmp) / name, env={**os.environ})
    REFERENCE.parent.mkdir(exist_ok=True)
    REFERENCE.write_text(json.dumps(record, indent=0, sort_keys=True))


if __name__ == "__main__" and sys.argv[1:2] == ["record"]:
    main()

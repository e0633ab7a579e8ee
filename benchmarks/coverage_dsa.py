"""DSA's null (issue 38, item 4), through the public ``dsa_models`` at the defaults of
``dynlab analyze dsa`` (16 trials of the adding task, 10 delays, rank 10, 16 principal
components, 20 null draws per model).

    python benchmarks/coverage_dsa.py [--copies 8] [--reps 1] [--seed 0] [--only 0 2]

Each comparison drives ``copies`` copies of each of two models, every copy under its own
independent draw of the task's inputs and with its own 20 null draws, in one ``dsa_models`` call.
Pairs of copies of one model are the same model under two input draws: the truth is "not
distinguishable", and the fraction called distinguishable is the false-distinguishable rate
(acceptance: at most about 5%; an exact rank test gives 1/21 = 4.8%). Pairs across the two
models measure the power where the models differ. The comparisons (models built as ``dynlab
train`` builds them, untrained, at their default sizes):

- ``aru s0 | gru s0``: the issue's ARU against GRU;
- ``aru s0 | aru s1``: two seeds of one unit (at initialisation, two different random networks);
- ``rnn | rnn x0.3``: a tanh RNN against itself with its recurrent weights scaled by 0.3 (a
  clearly different, faster-decaying dynamics).

Prints one row per comparison and kind of pair: pairs, the fraction called distinguishable, the
median distance, the median of the models' distances from themselves (the null's scale) and the
seconds taken. ``rates(...)`` is importable.

Measured (2 shared CPU cores, single-threaded BLAS, ``--copies 6``; seeds 0 and 1, 20-105 s per
comparison), fraction called distinguishable:

| comparison        | one model, two draws (30 + 30 pairs) | across the models (36 + 36 pairs) |
|-------------------|--------------------------------------|-----------------------------------|
| aru s0 / gru s0   | 0.100, 0.033                         | 0.333, 0.167                      |
| aru s0 / aru s1   | 0.100, 0.000                         | 0.194, 0.139                      |
| rnn / rnn x0.3    | 0.100, 0.100                         | 0.389, 0.083                      |

False-distinguishable rate over all 180 pairs of one model under two draws: 0.072 (13/180; the
pairs share operators, so its SE is above the binomial 0.019; the exact rank test's rate is
1/21 = 0.048). A model's median distance from itself is 0.19-0.25 rad (range about 0.1-0.45),
as large as the median distances between the models (0.36-0.46): with 16 trials DSA tells
these untrained models apart in only 8-39% of pairs.

Measured again (2 CPU cores, ``--copies 8 --reps 2 --seed 2``: seeds 2 and 3, 26-72 s per
comparison, 2026-11-28), fraction called distinguishable:

| comparison        | one model, two draws (56 + 56 pairs per seed) | across the models (64 + 64 pairs per seed) |
|-------------------|-----------------------------------------------|--------------------------------------------|
| aru s0 / gru s0   | 0.054, 0.018                                  | 0.125, 0.109                               |
| aru s0 / aru s1   | 0.018, 0.000                                  | 0.281, 0.000                               |
| rnn / rnn x0.3    | 0.071, 0.036                                  | 0.250, 0.703                               |

False-distinguishable rate over these 336 pairs: 0.033 (11/336); with the 180 pairs above, 24 of
516 = 0.047, at the exact rank test's 1/21 = 0.048. The power across models varies from seed to
seed (aru s0 / aru s1: 0.28 at seed 2, 0 at seed 3).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # many small SVDs: on a loaded machine threads only spin (45x)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

TRIALS, NULL_DRAWS = 16, 20
COMPARISONS = (("aru s0", "gru s0"), ("aru s0", "aru s1"), ("rnn", "rnn x0.3"))


def build(name: str):
    """``(model, task)`` for "UNIT sSEED" or "rnn x GAIN" (the default adding task)."""
    import equinox as eqx

    from dynlab import experiment

    unit, _, rest = name.partition(" ")
    seed = int(rest[1:]) if rest.startswith("s") else 0
    exp = experiment.build(experiment.default_config(unit, "adding", seed=seed))
    model = exp.model
    if rest.startswith("x"):
        model = eqx.tree_at(lambda m: m.cells[0].w_hh, model, model.cells[0].w_hh * float(rest[1:]))
    return model, exp.task


def rates(first: str, second: str, copies: int, seed: int) -> dict:
    """One comparison: for pairs of one model ("same") and across the two ("across"), the number of
    pairs, the fraction distinguishable and the median distance; the median self-distance."""
    import jax

    from dynlab.analyses.dsa import dsa_models

    (a, task), (b, _) = build(first), build(second)
    m = 2 * copies
    key = jax.random.fold_in(jax.random.key(seed), 7)
    draws = np.stack([task.batch(k, TRIALS, split="test")[0] for k in jax.random.split(key, m * (1 + NULL_DRAWS))])
    draws = draws.reshape(m, 1 + NULL_DRAWS, *draws.shape[1:])
    ds = dsa_models([a] * copies + [b] * copies, draws[:, 0], null_inputs=draws[:, 1:], seed=seed)
    kind = np.repeat([0, 1], copies)
    upper = np.triu(np.ones((m, m), bool), 1)
    out = {"self": float(np.median(ds["self_distance"].values)),
           "converged": bool(ds["converged"].all() and ds["self_converged"].all())}
    for name, mask in (("same", upper & (kind[:, None] == kind[None, :])), ("across", upper & (kind[:, None] != kind[None, :]))):
        out[name] = (int(mask.sum()), float(ds["distinguishable"].values[mask].mean()),
                     float(np.median(ds["distance"].values[mask])))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=8, help="copies of each model per comparison")
    parser.add_argument("--reps", type=int, default=1, help="repetitions of each comparison (new draws)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=int, nargs="*", default=None, help="indices of the comparisons to run (default: all)")
    a = parser.parse_args()
    print(f"DSA null: {a.copies} copies of each model, each under its own input draw and {NULL_DRAWS} null draws; "
          f"{TRIALS} trials; false-distinguishable acceptance <= ~0.05 on 'same'")
    print(f"{'comparison':<20} {'pairs':<7} {'n':>5} {'distinguishable':>16} {'median d':>9} {'median self':>12} {'s':>6}",
          flush=True)
    totals = {"same": [0, 0.0]}
    for first, second in [c for k, c in enumerate(COMPARISONS) if a.only is None or k in a.only]:
        for rep in range(a.reps):
            start = time.perf_counter()
            r = rates(first, second, a.copies, a.seed + rep)
            took = time.perf_counter() - start
            for kind in ("same", "across"):
                n, rate, med = r[kind]
                print(f"{first + ' | ' + second:<20} {kind:<7} {n:>5} {rate:>16.3f} {med:>9.4f} {r['self']:>12.4f} {took:>6.0f}"
                      + ("" if r["converged"] else "  (some alignments did not converge)"), flush=True)
            totals["same"][0] += r["same"][0]
            totals["same"][1] += r["same"][0] * r["same"][1]
    n, hits = totals["same"]
    print(f"false-distinguishable rate over all {n} pairs of one model under two draws: {hits / n:.3f} "
          f"(binomial SE {np.sqrt(max(hits / n * (1 - hits / n), 1e-12) / n):.3f})")


if __name__ == "__main__":
    main()

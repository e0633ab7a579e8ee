"""Coverage of the I_rep fit's intervals (issue 38, item 10), through the public ``fit_i_rep``.

    python benchmarks/coverage_irep.py [--reps 200] [--boot 0] [--jobs N] [--popsize 8] [--maxiter 200]

Each data set: 12 networks at one budget P = 4000 with k_c = 20 and k_e log-spaced over 5-600
(N = floor(P / (k_e + k_c))), losses generated from the model, ``3.0 - 0.02 I_rep(k_e; N, alpha =
0.8, beta = 0.6, gamma = 0.01, q_inf = 10^-0.8) + N(0, 0.001^2)``: the truth is known. ``alpha``,
``gamma``, the offset and the scale are fitted (beta and q_inf pinned by their bounds: 8 degrees
of freedom). ``--boot 0`` (default): the default linearised intervals; ``--boot B``: the residual
bootstrap with B refits (slow: B Nelder-Mead refits per data set). Prints the coverage of each
95% interval (acceptance 0.90-0.99) and its median width. Needs only numpy/scipy/xarray (and
dynlab); the data sets run in parallel processes (``--jobs``, default all cores).

``coverage(reps, seed, n_boot)`` is importable (e.g. by ``benchmarks/coverage.py``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402

K_C, BUDGET, OFFSET, SCALE, NOISE = 20.0, 4e3, 3.0, 0.02, 1e-3
K_E = np.geomspace(5, 600, 12)
NAMES = ("alpha", "gamma", "offset", "scale", "k_e_opt")


def truth() -> dict:
    """The generating values of every interval's quantity (k_e_opt: the theory optimum on the fit's k_range)."""
    from dynlab.analyses.elm_scaling import IrepParams, optimal_k_e

    p = IrepParams(alpha=0.8, beta=0.6, gamma=0.01, q_inf=10**-0.8)
    k_opt = optimal_k_e(BUDGET, K_C, p, k_range=(K_E.min() / 2, K_E.max() * 2)).k_e
    return {"params": p, "alpha": p.alpha, "gamma": p.gamma, "offset": OFFSET, "scale": SCALE, "k_e_opt": float(k_opt)}


def one(rep: int, seed: int = 0, n_boot: int = 0, popsize: int = 8, maxiter: int = 200) -> np.ndarray:
    """``[5, 3]``: (covered, low, high) of each of ``NAMES`` for data set ``rep``."""
    from dynlab.analyses.elm_scaling import fit_i_rep, i_rep

    t = truth()
    p = t["params"]
    n = np.floor(BUDGET / (K_E + K_C))
    rng = np.random.default_rng([seed, rep])
    loss = OFFSET - SCALE * i_rep(K_E, n * (K_E + K_C), K_C, p) + NOISE * rng.standard_normal(K_E.size)
    fit = fit_i_rep(loss, K_E, K_C, n, seed=rep, popsize=popsize, maxiter=maxiter, n_boot=n_boot,
                    bounds={"beta": (p.beta, p.beta + 1e-9), "q_inf": (p.q_inf, p.q_inf * (1 + 1e-9))})
    rows = []
    for name in NAMES:
        low, high = (float(fit[f"{name}_ci_{side}"].values.ravel()[0]) for side in ("low", "high"))
        rows.append((low <= t[name] <= high, low, high))
    return np.array(rows, float)


def coverage(reps: int, seed: int = 0, n_boot: int = 0, jobs: int = 1, popsize: int = 8, maxiter: int = 200) -> dict:
    """Coverage and median width of each interval over ``reps`` data sets."""
    args = [(r, seed, n_boot, popsize, maxiter) for r in range(reps)]
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            out = np.stack(list(pool.map(_star, args)))
    else:
        out = np.stack([one(*a) for a in args])
    return {name: {"coverage": float(np.mean(out[:, i, 0])), "width": float(np.median(out[:, i, 2] - out[:, i, 1]))}
            for i, name in enumerate(NAMES)}


def _star(a):
    return one(*a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--boot", type=int, default=0, help="0: linearised intervals; B >= 2: residual bootstrap")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--popsize", type=int, default=8)
    parser.add_argument("--maxiter", type=int, default=200)
    a = parser.parse_args()
    start = time.perf_counter()
    result = coverage(a.reps, a.seed, a.boot, a.jobs, a.popsize, a.maxiter)
    t = truth()
    method = "linearised (default)" if a.boot == 0 else f"residual bootstrap, {a.boot} refits"
    print(f"I_rep fit, 95% intervals, {method}; {a.reps} synthetic data sets of 12 points (seed {a.seed}); "
          f"acceptance 0.90-0.99; {time.perf_counter() - start:.0f} s")
    print(f"{'quantity':<10} {'truth':>10} {'coverage':>9} {'median width':>13}")
    for name in NAMES:
        r = result[name]
        flag = "" if 0.90 <= r["coverage"] <= 0.99 else "  OUTSIDE 0.90-0.99"
        print(f"{name:<10} {t[name]:>10.4g} {r['coverage']:>9.3f} {r['width']:>13.4g}{flag}")


if __name__ == "__main__":
    main()

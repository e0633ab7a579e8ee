"""Coverage of the covariance power-law exponent's interval (issue 38, item 7), through the public
``covariance_spectrum`` with its defaults.

    python benchmarks/coverage_spectra.py [--reps 200] [--seeds 1] [--jobs N] [--cells 500:0.9,2000:0.9]

Each data set: ``M`` rows of 64 units whose population covariance has eigenvalues ``n^-1``
(alpha = 1 exactly: the truth), the rows i.i.d. Gaussian (``rho = 0``) or AR(1) in time with
coefficient ``rho`` (stationary start). The default 95% interval (``n_boot=100``) must cover 1 in
90-99% of the data sets. Prints one row per cell and seed: the coverage, the misses on each side,
the median half-width, the range of the last fitted rank n_max over the data sets (ranks 1..n_max; it follows M_eff) and the seconds taken. Needs only
numpy/scipy/xarray (and dynlab); the cells run in parallel processes (``--jobs``, default all
cores), each with single-threaded BLAS.

``coverage(m, rho, reps, seed)`` is importable (e.g. by ``benchmarks/coverage.py``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # many small eigendecompositions: threads only spin
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402

DEFAULT_CELLS = ((500, 0.9), (1000, 0.9), (2000, 0.9), (500, 0.5), (200, 0.0), (1000, 0.0))
UNITS = 64


def recording(rng: np.random.Generator, m: int, rho: float) -> np.ndarray:
    """``[m, 64]`` rows with covariance eigenvalues ``n^-1``, AR(1) in time with coefficient ``rho``."""
    from scipy.signal import lfilter

    z = rng.standard_normal((m, UNITS))
    if rho:
        z[0] /= np.sqrt(1 - rho**2)  # stationary start
        z = lfilter([np.sqrt(1 - rho**2)], [1.0, -rho], z, axis=0)
    return z * np.arange(1, UNITS + 1) ** -0.5


def coverage(m: int, rho: float, reps: int, seed: int = 0, n_boot: int = 100) -> dict:
    """Coverage of alpha = 1 by ``reps`` default intervals; also the misses below/above, the median
    half-width and the fitted ranks' range."""
    from dynlab.analyses.spectra import covariance_spectrum

    rng = np.random.default_rng(seed)
    low, high, ranks = np.empty(reps), np.empty(reps), np.empty(reps, int)
    for r in range(reps):
        ds = covariance_spectrum(recording(rng, m, rho), n_boot=n_boot, seed=r)
        low[r], high[r], ranks[r] = float(ds.alpha_ci_low), float(ds.alpha_ci_high), ds.attrs["fit_rank_max"]
    return {"m": m, "rho": rho, "seed": seed, "reps": reps, "coverage": float(np.mean((low <= 1) & (1 <= high))),
            "below": float(np.mean(high < 1)), "above": float(np.mean(low > 1)),
            "half_width": float(np.median((high - low) / 2)), "ranks": (int(ranks.min()), int(ranks.max()))}


def _run(args):
    start = time.perf_counter()
    out = coverage(*args)
    out["seconds"] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=1, help="independent runs of each cell")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--cells", default=",".join(f"{m}:{rho}" for m, rho in DEFAULT_CELLS),
                        help="M:rho pairs, comma-separated")
    a = parser.parse_args()
    cells = [(int(c.split(":")[0]), float(c.split(":")[1])) for c in a.cells.split(",")]
    jobs = [(m, rho, a.reps, seed) for m, rho in cells for seed in range(a.seeds)]
    print(f"covariance alpha, 95% interval (covariance_spectrum defaults, n_boot=100), truth alpha = 1, "
          f"N = {UNITS}; {a.reps} data sets per row; acceptance 0.90-0.99")
    print(f"{'M':>6} {'rho':>5} {'seed':>4} {'coverage':>9} {'below':>6} {'above':>6} {'half-width':>10} "
          f"{'n_max':>7} {'s':>6}")
    with ProcessPoolExecutor(max_workers=max(1, min(a.jobs, len(jobs)))) as pool:
        for r in pool.map(_run, jobs):
            ok = "" if 0.90 <= r["coverage"] <= 0.99 else "  OUTSIDE 0.90-0.99"
            print(f"{r['m']:>6} {r['rho']:>5} {r['seed']:>4} {r['coverage']:>9.3f} {r['below']:>6.3f} {r['above']:>6.3f} "
                  f"{r['half_width']:>10.3f} {'%d-%d' % r['ranks']:>7} "
                  f"{r['seconds']:>6.0f}{ok}", flush=True)


if __name__ == "__main__":
    main()

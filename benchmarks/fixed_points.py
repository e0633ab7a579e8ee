"""Fixed points: dynlab's batched optimistix minimisation against SciPy and BrainPy.

    python benchmarks/fixed_points.py [--n 256] [--ics 256] [--quick]

Every side minimises the same speed q(h) = |F(h) - h|^2 / 2 of the same autonomous tanh RNN

    h_{t+1} = tanh(W h_t),    W ~ N(0, g^2/N), g = 1.5 (chaotic),

from the same `ics` initial states, visited states of one trajectory (every 4th step after a
1000-step burn-in, as Sussillo & Barak prescribe), all in float64:

- **dynlab** (`dynlab.analyses.fixed_points.minimise_speed`): `optimistix.BFGS` (and, in a
  second row, `optimistix.LBFGS`), `jax.vmap`-ed over chunks of initial states (`batch_size`
  "auto": 8 states per chunk for BFGS at N = 256, see `BFGS_CHUNK_BYTES`) inside one jit, its
  default tolerances (rtol = sqrt(eps)/10, atol = 1e-14, at most 1000 steps);
- **scipy**: `scipy.optimize.minimize(method="L-BFGS-B")` per initial state with the analytic
  gradient (W^T ((1 - f^2) r) - r) in NumPy, (a) at its default tolerances and (b) stopped by a
  callback as soon as q <= 1e-10 (dynlab's default `q_tol`: a fixed point found), tolerances
  otherwise tight, which is the least work SciPy can do to reach the same verdict;
- **brainpy** (if installed): `brainpy.analysis.SlowPointFinder(...).find_fps_with_opt_solver`
  (BFGS of `jax.scipy.optimize`, batched), the issue's named comparator. It takes minutes per
  call at full size, so it runs once on the first `--brainpy-ics` initial states (compilation
  included) and its time is scaled linearly to all of them (marked as such).

Printed per side: wall time (JAX: compilation excluded, and the first call reported), the
fraction of initial states that reach q <= 1e-10, the median q, the number of distinct points
(deduplicated within 1e-3 by `dynlab.analyses.fixed_points.unique_points`, the same for all),
and the ratio of times. OPENBLAS_NUM_THREADS=1 unless set (see benchmarks/lyapunov.py).

Measured (2-core CPU shared with other work, so +-20%; N = 256, 256 initial states): dynlab BFGS
7.8 s, 74.6% of the minimisations at q <= 1e-10 (median q 2e-30, 10 distinct points); SciPy
stopped at q <= 1e-10: 33.7 s, 67.6% (4.3x); SciPy at its defaults 7.7 s (1.0x) but no
minimisation reaches q <= 1e-10 (median q 2e-6: it stops on the relative decrease of q, so
its "points" are 213 distinct non-converged states); dynlab L-BFGS (optimistix's, with a
backtracking Armijo search) 14.8 s and mostly unconverged after 1000 steps; BrainPy's
SlowPointFinder 35.5 s for 16 states with compilation (568 s scaled to 256, 73x) and median q
7e-4 at its defaults. So 5x over SciPy is not reached on this CPU: per step the batched BFGS
update is memory-bound (one 0.5 MiB matrix per state), which chunking (`BFGS_CHUNK_BYTES`)
improved from 17-20 s to 7.5-8 s; a GPU would change this, but this task had none to measure on.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402
from jax.tree_util import Partial  # noqa: E402

from dynlab.analyses.fixed_points import minimise_speed, unique_points  # noqa: E402

GAIN = 1.5
Q_TOL = 1e-10
RADIUS = 1e-3


def _rnn(w, h, x):
    return jnp.tanh(w @ h)


def problem(n: int, ics: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(n, n)) * GAIN / np.sqrt(n)
    h = rng.normal(size=n)
    visited = []
    for _ in range(1000 + 4 * ics):
        h = np.tanh(w @ h)
        visited.append(h)
    return w, np.array(visited[1000::4][:ics])


def speed_and_gradient(w):
    def fg(h):
        f = np.tanh(w @ h)
        r = f - h
        return 0.5 * r @ r, w.T @ ((1.0 - f * f) * r) - r

    return fg


def scipy_minimise(w, h0s, stop_at: float | None):
    fg = speed_and_gradient(w)
    points, qs = [], []
    for h0 in h0s:
        if stop_at is None:
            res = scipy.optimize.minimize(fg, h0, jac=True, method="L-BFGS-B")
        else:
            def stop(intermediate_result):
                if intermediate_result.fun <= stop_at:
                    raise StopIteration

            res = scipy.optimize.minimize(fg, h0, jac=True, method="L-BFGS-B", callback=stop,
                                          options={"maxiter": 5000, "ftol": 1e-16, "gtol": 1e-12})
        points.append(res.x)
        qs.append(fg(res.x)[0])
    return np.array(points), np.array(qs)


def brainpy_minimise(w, h0s):
    import brainpy as bp
    import brainpy.math as bm

    bm.set_environment(x64=True)
    wj = jnp.asarray(w)
    finder = bp.analysis.SlowPointFinder(f_cell=lambda h: jnp.tanh(wj @ h), f_type="discrete", verbose=False)
    finder.find_fps_with_opt_solver(jnp.asarray(h0s), opt_solver="BFGS")
    points = np.asarray(finder.fixed_points)
    return points, np.array([speed_and_gradient(w)(p)[0] for p in points])


def describe(name: str, seconds: float, points: np.ndarray, q: np.ndarray, extra: str = "") -> str:
    ok = np.isfinite(q) & (q <= 1e-4)
    kept = len(unique_points(points[ok], q[ok], RADIUS)[0]) if ok.any() else 0
    return (f"{name:<28} {seconds:8.2f} s   q <= {Q_TOL:.0e}: {np.mean(q <= Q_TOL):5.1%}   median q {np.median(q):.1e}   "
            f"distinct points {kept:3d}{extra}")


def timed(fn):
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--ics", type=int, default=256)
    parser.add_argument("--brainpy-ics", type=int, default=16,
                        help="BrainPy runs on this many initial states (one call; its time is scaled up linearly)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="dynlab: minimise in chunks of this many (default: minimise_speed's 'auto')")
    parser.add_argument("--quick", action="store_true", help="n = 64, 64 initial states")
    args = parser.parse_args()
    if args.quick:
        args.n, args.ics = 64, 64
    w, h0s = problem(args.n, args.ics)
    print(f"fixed points of a {args.n}-unit tanh RNN (g = {GAIN}) from {args.ics} visited states, float64; "
          f"jax {jax.__version__} on {jax.devices()[0].platform}")

    results = {}
    with jax.enable_x64(True):
        step = Partial(_rnn, jnp.asarray(w))
        for solver in ("bfgs", "lbfgs"):
            run = lambda: minimise_speed(step, jnp.asarray(h0s), None, rtol=float(np.sqrt(np.finfo(float).eps) / 10),  # noqa: E731
                                         atol=1e-14, max_steps=1000, solver=solver, batch_size=args.batch_size or "auto")
            first, _ = timed(run)
            seconds, out = timed(run)
            results[f"dynlab {solver}"] = seconds
            print(describe(f"dynlab optimistix {solver}", seconds, np.asarray(out.points), np.asarray(out.q),
                           f"   (first call {first:.1f} s; steps median {int(np.median(out.num_steps))}, "
                           f"max {int(np.max(out.num_steps))})"))

    for label, stop in (("scipy L-BFGS-B (defaults)", None), (f"scipy L-BFGS-B (stop q<={Q_TOL:.0e})", Q_TOL)):
        seconds, (points, q) = timed(lambda: scipy_minimise(w, h0s, stop))
        results[label] = seconds
        print(describe(label, seconds, points, q))

    try:
        import brainpy  # noqa: F401
    except ImportError:
        print("brainpy not installed (pip install brainpy): skipped")
    else:
        m = min(args.brainpy_ics, args.ics)
        seconds, (points, q) = timed(lambda: brainpy_minimise(w, h0s[:m]))  # one call: compilation included
        scaled = seconds * args.ics / m
        results["brainpy"] = scaled
        print(describe("brainpy SlowPointFinder BFGS", seconds, points, q,
                       f"   (first {m} initial states only, compilation included; x {args.ics}/{m} = {scaled:.1f} s)"))

    print("time ratios (comparator / dynlab; > 1: dynlab faster):")
    for name in ("dynlab bfgs", "dynlab lbfgs"):
        ratios = ", ".join(f"{other} {results[other] / results[name]:.2f}x" for other in results if not other.startswith("dynlab"))
        print(f"  {name}: {ratios}")


if __name__ == "__main__":
    main()

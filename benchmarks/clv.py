"""Covariant Lyapunov vectors: dynlab's Ginelli core against plain NumPy implementations.

    python benchmarks/clv.py [--n 64] [--steps 10000] [--transient 500] [--window 1000] [--quick]

All sides compute the N covariant Lyapunov vectors (k = N) of the same driven tanh RNN

    h_{t+1} = tanh(W h_t + b + x_t),    W ~ N(0, g^2/N), g = 0.9,

over a stretch of `steps` steps after a forward transient and before a backward transient of
`transient` steps each, from the same initial state and frame (the identity, lyapynov's), in float64:

- **dynlab** (`dynlab.analyses.clv.clv_core`): the frame is pushed by JVPs inside jit-compiled
  `lax.scan`s; memory is bounded by windows of `window` steps, so the forward pass runs twice
  (checkpoints, then each window recomputed before its backward sweep); per step it also
  returns the local growth rates and the hyperbolicity angles;
- **numpy**: Ginelli's method as written in the paper: explicit Jacobian, `numpy.linalg.qr`
  every step, every Q and R stored, then `scipy.linalg.solve_triangular` backward and V = Q C
  at every step of the stretch (the same quantities: growth rates and CLVs);
- **lyapynov** (PyPI `lyapynov`, if installed): its `CLV` function on a `DiscreteDS` (plain
  NumPy, stores every Q and R, general `numpy.linalg.solve` backward, random triangular start).
  It returns the CLVs only.

`clvlib` (PyPI) integrates ODE flows with an RK4 variational stepper; a discrete map would need
a stepper of its own, so it is not compared.

A contracting gain keeps the three trajectories together to rounding, so the exponents from the
CLV growth rates must agree; the largest difference is printed. Each side is timed once after a
warm-up run of the same size (JAX compilation excluded, and reported separately).
OPENBLAS_NUM_THREADS=1 unless set (see benchmarks/lyapunov.py: OpenBLAS threads fight XLA's on
2 cores).

Measured (2-core CPU shared with other work, so +-20%; N = 64, 10,000 steps, transients 500):
k = N = 64: NumPy 1.65 s, lyapynov 1.95 s, dynlab 1.86 s with window 1000 (0.9x NumPy, 1.1x
lyapynov) and 1.23 s with one window over the whole run (1.3x, 1.6x); k = 8: NumPy 0.38 s,
dynlab 0.12 s (3.1x). The exponents agree to 3e-14 and the CLVs to |cos| = 1.000000. What
limits k = N: both sides are bound by LAPACK's Householder QR of the 64 x 64 frame (~50 us per
step in either), and NumPy does one per step where windowed dynlab does two (the frames are
recomputed from checkpoints so that memory stays within a window) plus a triangular solve and
the angles; without the second pass (one window) dynlab is 1.3x. At k = 8 the QR is cheap and
NumPy's per-step interpreter overhead dominates, which the compiled scan removes. 5x is not
reached at k = N on this CPU.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from jax.tree_util import Partial  # noqa: E402

from dynlab.analyses.clv import clv_core  # noqa: E402

GAIN = 0.9


def _rnn(params, h, x):
    w, b = params
    return jnp.tanh(w @ h + b + x)


def problem(n: int, total: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(n, n)) * GAIN / np.sqrt(n)
    b = 0.1 * rng.normal(size=n)
    xs = 0.5 * rng.normal(size=(total, n))
    h0 = 0.5 * rng.normal(size=n)
    q0 = np.eye(n)  # lyapynov starts from the identity frame; so do the others, so that all agree
    return w, b, xs, h0, q0


def numpy_ginelli(w, b, xs, h0, q0, transient, steps):
    """The paper's algorithm in NumPy: returns the growth rates [steps, k] and the last CLVs."""
    h, q = h0, q0
    qs, rs = [], []
    for x in xs:
        h = np.tanh(w @ h + b + x)
        jac = (1.0 - h**2)[:, None] * w
        q_next, r = np.linalg.qr(jac @ q)
        signs = np.sign(np.diag(r))
        qs.append(q)
        q, r = q_next * signs, r * signs[:, None]
        rs.append(r)
    c = np.eye(q0.shape[1])
    growth = np.empty((steps, q0.shape[1]))
    v = None
    for t in range(len(xs) - 1, transient - 1, -1):
        c = scipy.linalg.solve_triangular(rs[t], c, lower=False)
        norms = np.linalg.norm(c, axis=0)
        c = c / norms
        if t < transient + steps:
            growth[t - transient] = -np.log(norms)
            v = qs[t] @ c
    return growth, v


def lyapynov_clv(w, b, xs, h0, transient, steps):
    import lyapynov

    def f(h, t):
        return np.tanh(w @ h + b + xs[int(round(t))])

    def jac(h, t):
        nxt = np.tanh(w @ h + b + xs[int(round(t))])
        return (1.0 - nxt**2)[:, None] * w

    system = lyapynov.DiscreteDS(h0.copy(), 0.0, f, jac)
    np.random.seed(0)
    return lyapynov.CLV(system, len(h0), 0, transient, steps, transient, traj=False)


def timed(fn):
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - start, out


def compare(n: int, k: int, steps: int, tr: int, windows: list[int]) -> None:
    total = tr + steps + tr
    w, b, xs, h0, q0 = problem(n, total)
    q0 = q0[:, :k]
    print(f"\n== {n}-unit RNN, k = {k} CLVs, {steps} steps, transients {tr} + {tr} ==")
    t_numpy, (growth, _) = timed(lambda: numpy_ginelli(w, b, xs, h0, q0, tr, steps))
    print(f"numpy     {t_numpy:7.2f} s  ({t_numpy / steps * 1e3:.3f} ms/step)")
    t_lyap = None
    if k == n:  # lyapynov computes all N vectors from the identity frame
        try:
            import lyapynov  # noqa: F401
        except ImportError:
            print("lyapynov  not installed (pip install lyapynov): skipped")
        else:
            t_lyap, clvs = timed(lambda: lyapynov_clv(w, b, xs, h0, tr, steps))
            print(f"lyapynov  {t_lyap:7.2f} s  ({t_lyap / steps * 1e3:.3f} ms/step)")
    with jax.enable_x64(True):
        step = Partial(_rnn, (jnp.asarray(w), jnp.asarray(b)))
        for window in windows:
            run = lambda: clv_core(step, jnp.asarray(h0), jnp.asarray(xs), k, window=window,  # noqa: E731
                                   transient_forward=tr, transient_backward=tr, snapshots=1, q0=q0)
            first, _ = timed(run)
            t_dynlab, result = timed(run)
            frames = window
            diff = np.max(np.abs(result.growth.mean(axis=0) - growth.mean(axis=0)))
            line = (f"dynlab    {t_dynlab:7.2f} s  ({t_dynlab / steps * 1e3:.3f} ms/step; window {window}: "
                    f"<= {frames} frames held; first call {first:.2f} s)  vs numpy {t_numpy / t_dynlab:4.1f}x")
            if t_lyap is not None:
                cos = np.abs(np.sum(clvs[0] * result.clv[0], axis=0))
                line += f", vs lyapynov {t_lyap / t_dynlab:4.1f}x (min |cos| with its CLVs {cos.min():.6f})"
            print(line + f"; max |exponent diff| vs numpy {diff:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--transient", type=int, default=500)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="n = 16, 1000 steps")
    args = parser.parse_args()
    if args.quick:
        args.n, args.steps, args.transient, args.window = 16, 1000, 100, 250
    print(f"CLVs of a driven tanh RNN (g = {GAIN}), float64; jax {jax.__version__} on {jax.devices()[0].platform}")
    compare(args.n, args.n, args.steps, args.transient, [args.window, args.steps + args.transient])
    compare(args.n, max(1, args.n // 8), args.steps, args.transient, [args.window])


if __name__ == "__main__":
    main()

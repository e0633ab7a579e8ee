"""Covariant Lyapunov vectors: dynlab's Ginelli core against plain NumPy implementations.

    python benchmarks/clv.py [--n 64] [--steps 10000] [--transient 500] [--window 1000] [--quick]

All sides compute the N covariant Lyapunov vectors (k = N) of the same driven tanh RNN

    h_{t+1} = tanh(W h_t + b + x_t),    W ~ N(0, g^2/N), g = 0.9,

over a stretch of `steps` steps after a forward transient and before a backward transient of
`transient` steps each, from the same initial state and frame (the identity, lyapynov's), in float64:

- **dynlab** (`dynlab.analyses.clv.clv_core`): the frame is pushed by JVPs inside jit-compiled
  `lax.scan`s and factorised by Householder (`qr=Householder()`, LAPACK) or by one-pass CholeskyQR
  (`qr=CholeskyQR(passes=1)`, its float64 default; Householder wherever its selector finds the frame
  too ill-conditioned); memory is bounded by windows of `window` steps, so with windows shorter than
  the run the forward pass runs twice (checkpoints, then each window recomputed before its backward
  sweep; only R_t and the snapshots are stored); per step it also returns the local growth rates and
  the hyperbolicity angles;
- **numpy**: Ginelli's method as written in the paper: explicit Jacobian, `numpy.linalg.qr`
  every step, every Q and R stored, then `scipy.linalg.solve_triangular` backward and V = Q C
  at every step of the stretch (the same quantities: growth rates and CLVs);
- **lyapynov** (PyPI `lyapynov`, if installed): its `CLV` function on a `DiscreteDS` (plain
  NumPy, stores every Q and R, general `numpy.linalg.solve` backward, random triangular start).
  It returns the CLVs only.

`clvlib` (PyPI) integrates ODE flows with an RK4 variational stepper; a discrete map would need
a stepper of its own, so it is not compared.

A contracting gain keeps the three trajectories together to rounding, so the exponents from the
CLV growth rates must agree; the largest difference is printed.
OPENBLAS_NUM_THREADS=1 unless set (see benchmarks/lyapunov.py: OpenBLAS threads fight XLA's on
2 cores).

Timing: one warm-up call of every side (compilation), then `--repeats` rounds (default 3) calling
each side once in turn, medians; the comparators run in the same process, interleaved, so that load
from other jobs falls on all alike.

Measured (2-core CPU shared with two other jobs, load average 3.4-7.6; N = 64, 10,000 steps,
transients 500 + 500; two full runs, R = 3): k = N = 64: NumPy 2.08 / 2.82 s, lyapynov 2.74 /
4.17 s; dynlab with windows of 1000: Householder 1.0x NumPy (1.3-1.4x lyapynov), CholeskyQR 1.3-1.4x
(1.7-2.0x); with one window over the run: Householder 1.0-1.4x (1.4-1.9x), CholeskyQR 1.8-2.0x NumPy
and 2.6-2.7x lyapynov. The exponents agree with NumPy's to 3e-14 and the CLVs with lyapynov's to
|cos| = 1.000000000. k = 8: NumPy 0.40 / 0.81 s, dynlab 2.8-3.2x (Householder), 3.8-6.0x
(CholeskyQR). Before this round (same machine, load 5.3): 0.9x / 1.1x with windows of 1000, 1.3x /
1.5x with one window, k = 8 2.6x. What changed: (1) the forward factorisation is a value, and one-pass
CholeskyQR (Gram matrix, Cholesky, one triangular solve) is 1.4-2x cheaper than LAPACK's Householder
at 64 x 64 (41 against 75 us under load); (2) a window no longer stores its frames Q_t, only R_t (and
U^T Q_t with a read-out, Q_t at the snapshots), which halves its memory and the memory traffic
(storing Q_t and R_t cost 20-45 us per step); one window over the run already ran the forward pass
once.

The target of issue 19 (>= 5x both) is NOT met at k = N = 64, by a factor 2.5-2.8 against NumPy and
1.9 against lyapynov. Why (per step, float64, timed alone in scans at load 3-5): NumPy takes 208-282
us, so 5x needs 42-56 us for everything; dynlab's forward pass alone (JVP push ~11 us + one-pass
CholeskyQR) is 55 us (Householder: 64 us), and the backward sweep (a 64 x 64 triangular solve ~11 us,
column norms, the angles' triangular solve, the stored R_t read back) adds ~40 us. At 64 x 64 every
LAPACK call (potrf, trsm, geqrf, getrf) costs 7-30 us, mostly call overhead: a factorisation per step
cannot fall below ~25 us here, and Ginelli's method needs one per step (the per-step R_t are the
method). Considered and not built: a pivoted LU in the forward pass (as in the Lyapunov engine) gives
no orthonormal Q_t, so the norms and angles would need the frame's Gram matrix every step (a matmul
and a Cholesky, more than the LU saves over CholeskyQR). Timed and dropped: R_t^{-1} formed in the forward pass so that the backward sweep is a
matmul (the inverse costs a triangular solve as large as the one it replaces: +8 us forward, -6 us
backward); the triangular solves and angles batched over a window after the sweep (XLA's batched
triangular solve on CPU: ~72 us per 64 x 64 matrix, slower than the sequential ones).
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
from dynlab.analyses.lyapunov.factorisations import CholeskyQR, Householder  # noqa: E402

GAIN = 0.9
TARGET = 5.0  # issue 19: at least 5x NumPy and lyapynov at equal accuracy


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


def measure(fns: dict, repeats: int) -> dict:
    """One warm-up call of each callable (JAX compilation; reported as `first`), then `repeats` rounds
    calling each once in turn, so that load from other processes on a shared machine falls on all of
    them alike. Returns name -> (median seconds, first-call seconds, last output)."""
    first, out, times = {}, {}, {name: [] for name in fns}
    for name, fn in fns.items():
        start = time.perf_counter()
        out[name] = jax.block_until_ready(fn())
        first[name] = time.perf_counter() - start
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            out[name] = jax.block_until_ready(fn())
            times[name].append(time.perf_counter() - start)
    return {name: (float(np.median(times[name])), first[name], out[name]) for name in fns}


def compare(n: int, k: int, steps: int, tr: int, windows: list[int], repeats: int) -> dict[str, float]:
    """Time NumPy, lyapynov (k = N only) and dynlab (each window, Householder and CholeskyQR in the forward
    pass) interleaved in this process; print the ratios. Returns the best dynlab ratios."""
    total = tr + steps + tr
    w, b, xs, h0, q0 = problem(n, total)
    q0 = q0[:, :k]
    print(f"\n== {n}-unit RNN, k = {k} CLVs, {steps} steps, transients {tr} + {tr}; medians of {repeats} "
          "interleaved runs ==")
    fns = {"numpy": lambda: numpy_ginelli(w, b, xs, h0, q0, tr, steps)}
    if k == n:  # lyapynov computes all N vectors from the identity frame
        try:
            import lyapynov  # noqa: F401
        except ImportError:
            print("lyapynov  not installed (pip install lyapynov): skipped")
        else:
            fns["lyapynov"] = lambda: lyapynov_clv(w, b, xs, h0, tr, steps)
    methods = {"Householder": Householder(), "CholeskyQR-1": CholeskyQR(passes=1)}
    with jax.enable_x64(True):
        step = Partial(_rnn, (jnp.asarray(w), jnp.asarray(b)))
        hj, xj = jnp.asarray(h0), jnp.asarray(xs)
        for window in windows:
            for label, method in methods.items():
                fns[f"dynlab {label} window {window}"] = (
                    lambda window=window, method=method: clv_core(
                        step, hj, xj, k, window=window, transient_forward=tr, transient_backward=tr,
                        snapshots=1, q0=q0, qr=method))
        results = measure(fns, repeats)
    t_numpy, _, (growth, _) = results["numpy"]
    line = f"numpy     {t_numpy:7.2f} s  ({t_numpy / steps * 1e3:.3f} ms/step)"
    print(line)
    t_lyap = clvs = None
    if "lyapynov" in results:
        t_lyap, _, clvs = results["lyapynov"]
        print(f"lyapynov  {t_lyap:7.2f} s  ({t_lyap / steps * 1e3:.3f} ms/step)")
    best = {}
    for name, (seconds, first, result) in results.items():
        if not name.startswith("dynlab"):
            continue
        diff = np.max(np.abs(result.growth.mean(axis=0) - growth.mean(axis=0)))
        line = (f"{name:<32} {seconds:6.2f} s ({seconds / steps * 1e3:.3f} ms/step; first call {first:.2f} s)  "
                f"vs numpy {t_numpy / seconds:4.1f}x")
        best["numpy"] = max(best.get("numpy", 0.0), t_numpy / seconds)
        if t_lyap is not None:
            cos = np.abs(np.sum(clvs[0] * result.clv[0], axis=0))
            line += f", vs lyapynov {t_lyap / seconds:4.1f}x (min |cos| with its CLVs {cos.min():.9f})"
            best["lyapynov"] = max(best.get("lyapynov", 0.0), t_lyap / seconds)
        print(line + f"; max |exponent diff| vs numpy {diff:.1e}")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--transient", type=int, default=500)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each side (median)")
    parser.add_argument("--quick", action="store_true", help="n = 16, 1000 steps")
    args = parser.parse_args()
    if args.quick:
        args.n, args.steps, args.transient, args.window = 16, 1000, 100, 250
    print(f"CLVs of a driven tanh RNN (g = {GAIN}), float64; jax {jax.__version__} on {jax.devices()[0].platform} "
          f"({os.cpu_count()} cores), OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")
    if hasattr(os, "getloadavg"):
        print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    best = compare(args.n, args.n, args.steps, args.transient, [args.window, args.steps + args.transient], args.repeats)
    print(f"k = N = {args.n}: fastest dynlab run at equal accuracy: {best.get('numpy', 0):.1f}x NumPy"
          + (f", {best['lyapynov']:.1f}x lyapynov" if "lyapynov" in best else "")
          + f" (target >= {TARGET:g}x each: {'met' if min(best.values()) >= TARGET else 'NOT met'})")
    compare(args.n, max(1, args.n // 8), args.steps, args.transient, [args.window], args.repeats)
    if hasattr(os, "getloadavg"):
        print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()

"""Lyapunov spectrum: dynlab's JAX core against a straightforward NumPy implementation.

    python benchmarks/lyapunov.py [--quick] [--steps T] [--repeats R]

Both sides run the same QR (Benettin) iteration on the same driven tanh RNN

    h_{t+1} = tanh(W h_t + b + x_t),    W ~ N(0, g^2/N), g = 0.9,

from the same initial state and frame. NumPy forms the Jacobian diag(1 - h_{t+1}^2) W
explicitly and calls numpy.linalg.qr every step; dynlab pushes the frame forward by JVPs inside
one jit-compiled lax.scan, with a QR every step (its default) and, in rows marked "QR every m",
every m steps (`reortho_every=m`). A weak, contracting gain keeps the trajectory insensitive to
rounding, so the implementations must agree to rounding, which is checked (the speed does not
depend on the gain). All figures come from this one process:

- steady-state time (compilation excluded) and the first call (compilation included);
- the speed-up over NumPy (always a QR every step) in the same dtype, and JAX float32 (dynlab's
  default) over NumPy float64 (NumPy's default), each with the largest difference of the
  exponents from that NumPy run, over all k and over the leading k/2 (float32 rounding shows up
  as +- pairs, ~1e-4, on nearly equal exponents anywhere in the spectrum; blocking error grows
  into the smallest exponents);
- the achieved GFLOP/s, counting 2N^2 k for the tangent push and 4Nk^2 - 4k^3/3 for the
  Householder QR and forming Q, against the jnp matmul rate measured here;
- where the time goes: one tangent push and one QR, timed alone, and the speed-up over NumPy
  that they leave room for with a QR every step.

What limits the full spectrum (k = N = 256, float32, 2-core CPU). Per step, the tangent push
J Q is one 256^3 matmul (0.18-0.33 ms, 100-190 GFLOP/s across runs) and the QR is LAPACK's
Householder sgeqrf + sorgqr (~1.5 ms, ~30 GFLOP/s single-threaded; R alone ~0.8 ms), so dynlab
needs ~1.8 ms/step against NumPy's ~3.6 ms (numpy.linalg.qr computes float32 input in float64):
2.0x in float32, 2.4x against NumPy float64. 5x needs <= ~0.73 ms/step, less than LAPACK's QR
(even geqrf alone) takes, so no QR-every-step variant built on it gets there. Only a QR running
at the push's own matmul rate would (0.4-0.76 ms/step, i.e. 5-9x, depending on that rate), which
would mean a hand-written blocked Householder QR in XLA ops as fast as a dense matmul of the same
size; that is not attempted. Options measured and left out of the core:

- CholeskyQR2 (Q R from the Cholesky factor of Z^T Z, twice) is slower here for every shape
  timed: 256 x 256 float32 ~1.7-1.9 ms (float64 ~4.2 ms vs 2.5 ms Householder), 1024 x 16
  ~0.18 ms vs 0.11 ms; a 256 x 256 Gram product alone costs 0.33-0.48 ms, Cholesky 0.3 ms, the
  triangular solve 0.36 ms. In float32 it would also need its Householder fallback often:
  cond(J_t) of this RNN is ~1.6e3 (up to 5.6e3), so cond^2 eps is 0.15-1.9.
- Blocking (`reortho_every = m > 1`, the "QR every m" rows) divides the QR cost by m, but between
  QRs the columns drift together by exp(m (l_1 - l_k)) (l_1 - l_N ~ 3.9 here), and the smallest
  exponents lose about eps * exp(m (l_1 - l_N)). In float32, against NumPy float64, m = 2, 3, 4
  give 3.6x, 5.1x, 6.1x but move l_N by 1.7e-3, 5.8e-3, 4.8e-2 (m = 1: <= 2.6e-4 anywhere, the
  rounding level); the leading half stays at rounding level. So 5x in float32 costs 20x the
  rounding error in the smallest exponents. In float64 m = 4 stays within 1e-8 (3.6x); 5x would
  need m ~ 10, where exp(39) eps ~ 10 leaves l_N meaningless.
- Pushing the frame: the JVP push runs at the speed of a hand-written scan of
  diag(1 - h^2) W Q (0.27 vs 0.28 ms/step in float32, QR left out), so there is nothing left to
  gain there; a dense Jacobian (`method="dense"`, jacfwd, a second 256^3 matmul) is 0.34 ms/step.
- OpenBLAS threads: both NumPy and jaxlib's LAPACK kernels (QR) call OpenBLAS. Its worker
  threads spin while waiting and on a 2-core machine fight XLA's own thread pool (and any other
  load): with OPENBLAS_NUM_THREADS=2 one jnp 256 x 256 QR took 3 ms instead of 1.5 ms (single
  QRs up to 0.5 s under load), and NumPy's loop ran 2-4x slower than single-threaded. So this
  script sets OPENBLAS_NUM_THREADS=1 unless you set it yourself (it must be set before NumPy is
  imported); XLA's own matmuls still use every core. Run with OPENBLAS_NUM_THREADS=<n> to compare.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.tree_util import Partial  # noqa: E402

from dynlab.analyses.lyapunov import lyapunov_core  # noqa: E402

GAIN = 0.9
BURN_IN = 100
HIGHEST = jax.lax.Precision.HIGHEST


def _tanh_rnn(params, h, x):
    w, b = params
    return jnp.tanh(w @ h + b + x)


def numpy_lyapunov(w, b, xs, h0, q0, burn_in):
    """The textbook loop: explicit Jacobian, numpy.linalg.qr every step."""
    h, q = h0, q0
    total = np.zeros(q.shape[1], dtype=w.dtype)
    for t, x in enumerate(xs):
        h = np.tanh(w @ h + b + x)
        jac = (1.0 - h**2)[:, None] * w  # d h_{t+1} / d h_t, with h now h_{t+1}
        q, r = np.linalg.qr(jac @ q)
        d = np.diag(r)
        q = q * np.where(d < 0, -1.0, 1.0).astype(w.dtype)
        if t >= burn_in:
            total += np.log(np.abs(d))
    return -np.sort(-total / (len(xs) - burn_in))


def push_flops(n: int, k: int) -> float:
    return 2.0 * n * n * k + 2.0 * n * n  # W Q and W h


def qr_flops(n: int, k: int) -> float:
    return 4.0 * n * k * k - 4.0 * k**3 / 3.0  # geqrf + forming Q (orgqr)


def flops_per_step(n: int, k: int, reortho_every: int = 1) -> float:
    return push_flops(n, k) + qr_flops(n, k) / reortho_every


def timed(fn: Callable[[], object], repeats: int = 1) -> tuple[float, object]:
    """Best wall-clock time of `repeats` calls (after any warm-up the caller did), and the output."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best, out


def timed_jit(fn: Callable, *args, repeats: int = 20) -> float:
    """Best time of a jit-compiled `fn(*args)`, compilation excluded."""
    fn = jax.jit(fn)
    jax.block_until_ready(fn(*args))
    return timed(lambda: fn(*args), repeats)[0]


def matmul_gflops(dtype, n: int = 1024, repeats: int = 10) -> float:
    a = jnp.ones((n, n), dtype) / n
    return 2.0 * n**3 / timed_jit(lambda x: x @ x, a, repeats=repeats) / 1e9


def problem(n: int, k: int, steps: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(n, n)) * GAIN / np.sqrt(n)
    b = rng.normal(size=n) * 0.1
    xs = rng.normal(size=(steps, n)) * 0.5
    h0 = rng.normal(size=n) * 0.5
    q0, _ = np.linalg.qr(rng.normal(size=(n, k)))
    return w, b, xs, h0, q0


def compare(
    n: int,
    k: int,
    steps: int,
    dtypes: list[str],
    peak: dict[str, float],
    repeats: int,
    blocked: tuple[int, ...] = (),
) -> float:
    """Time NumPy and dynlab (QR every step, and every m in `blocked`) and print the ratios.

    Returns NumPy's float32 seconds per step.
    """
    print(f"\n== k = {k} of N = {n}, {steps} steps (burn-in {BURN_IN}) ==")
    w, b, xs, h0, q0 = problem(n, k, steps)
    results: dict[tuple[str, str, int], tuple[float, np.ndarray]] = {}

    def report(name: str, dtype: str, m: int, seconds: float, extra: str = "") -> None:
        rate = flops_per_step(n, k, m) * steps / seconds / 1e9
        per_step = seconds / steps * 1e3
        print(f"{name:>6} {dtype} QR every {m:2d}: {seconds:7.2f} s {per_step:8.3f} ms/step "
              f"{rate:6.1f} GFLOP/s = {rate / peak[dtype]:4.0%} of jnp matmul{extra}")  # fmt: skip

    for dtype in dtypes:
        arrays = [a.astype(dtype) for a in (w, b, xs, h0, q0)]
        seconds, exps = timed(lambda: numpy_lyapunov(*arrays, BURN_IN), repeats)
        results["numpy", dtype, 1] = seconds, exps
        report("numpy", dtype, 1, seconds)

        for m in (1, *blocked):
            with jax.enable_x64(dtype == "float64"):
                wj, bj, xj, hj, qj = (jnp.asarray(a) for a in arrays)
                step = Partial(_tanh_rnn, (wj, bj))
                run = lambda: lyapunov_core(  # noqa: E731
                    step, hj, xj, k, burn_in=BURN_IN, reortho_every=m, q0=qj
                )
                first, _ = timed(run)
                seconds, out = timed(run, repeats)
            results["dynlab", dtype, m] = seconds, np.asarray(out.exponents)
            report("dynlab", dtype, m, seconds, f"  (first call {first:.2f} s)")

    if len(dtypes) == 2:
        diff = np.max(np.abs(results["numpy", "float32", 1][1] - results["numpy", "float64", 1][1]))
        print(f"float32 rounding, for scale: numpy float32 vs numpy float64 differ by {diff:.1e}")
    lead = max(k // 2, 1)
    print("speed-up over numpy (a QR every step), and max |exponent difference| from that numpy "
          f"run over all {k} / the leading {lead}:")  # fmt: skip
    for (name, dtype, m), (seconds, exps) in results.items():
        if name == "numpy":
            continue
        for ref_dtype in _reference_dtypes(dtype, dtypes):
            t_np, e_np = results["numpy", ref_dtype, 1]
            diff = np.abs(exps - e_np)
            label = f"dynlab {dtype} (QR every {m:2d}) vs numpy {ref_dtype}"
            print(f"  {label:<46} {t_np / seconds:5.1f}x   "
                  f"{diff.max():.1e} / {diff[:lead].max():.1e}")  # fmt: skip
    return results["numpy", "float32", 1][0] / steps


def _reference_dtypes(dtype: str, dtypes: list[str]) -> list[str]:
    """Compare with NumPy in the same dtype; float32 also with NumPy's default, float64."""
    return [dtype] + (["float64"] if dtype == "float32" and "float64" in dtypes else [])


def cholesky_qr2(z: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""CholeskyQR2 (Yamamoto et al. 2015), the QR evaluated against Householder for the core.

    $R_1 = \operatorname{chol}(Z^\top Z)^\top$, $Q_1 = Z R_1^{-1}$, then the same on $Q_1$:
    $Z = Q R_2 R_1$. Timed only; it is slower than Householder here (module docstring).
    """

    def cholesky_qr(a):
        r = jnp.linalg.cholesky(jnp.matmul(a.T, a, precision=HIGHEST)).T
        return jax.lax.linalg.triangular_solve(r, a, left_side=False, lower=False), r

    q1, r1 = cholesky_qr(z)
    q, r2 = cholesky_qr(q1)
    return q, r2 @ r1


def where_the_time_goes(n: int, k: int, numpy_per_step: float) -> None:
    """One float32 tangent push and one QR, timed alone: the floor of a QR every step."""
    rng = np.random.default_rng(1)
    w, z = (rng.normal(size=shape).astype(np.float32) for shape in ((n, n), (n, k)))
    wj, zj = jnp.asarray(w), jnp.asarray(z)
    push = timed_jit(lambda a, b: jnp.matmul(a, b, precision=HIGHEST), wj, zj)
    householder = timed_jit(jnp.linalg.qr, zj)
    r_only = timed_jit(lambda a: jnp.linalg.qr(a, mode="r"), zj)
    cholesky2 = timed_jit(cholesky_qr2, zj)
    numpy_qr = timed(lambda: np.linalg.qr(z), 20)[0]
    ms = lambda s: f"{s * 1e3:.3f} ms"  # noqa: E731
    gflops = lambda flops, s: f"{flops / s / 1e9:.0f} GFLOP/s"  # noqa: E731
    print(f"where the time goes (float32, parts timed alone, best of 20; numpy "
          f"{ms(numpy_per_step)}/step):")  # fmt: skip
    print(f"  {f'tangent push W Q, {n}x{n}x{k}:':<38}{ms(push)} = "
          f"{gflops(push_flops(n, k), push)}")  # fmt: skip
    print(f"  {f'jnp Householder QR of {n}x{k}:':<38}{ms(householder)} = "
          f"{gflops(qr_flops(n, k), householder)} (R alone, geqrf: {ms(r_only)})")  # fmt: skip
    log_diag = lambda r: np.log(np.abs(np.diagonal(np.asarray(r, np.float64))))  # noqa: E731
    agree = np.max(np.abs(log_diag(cholesky_qr2(zj)[1]) - log_diag(jnp.linalg.qr(zj)[1])))
    print(f"  {'CholeskyQR2 (evaluated, not used):':<38}{ms(cholesky2)} "
          f"(its ln R_ii match Householder's to {agree:.0e})")  # fmt: skip
    print(f"  {'numpy.linalg.qr (runs in float64):':<38}{ms(numpy_qr)}")
    floor = push + householder
    print(f"  {'QR every step, push + QR:':<38}{ms(floor)}/step "
          f"-> at most {numpy_per_step / floor:.1f}x over numpy")  # fmt: skip
    at_push_rate = push * (1 + qr_flops(n, k) / push_flops(n, k))
    print(f"  {'... if the QR ran at the push rate:':<38}{ms(at_push_rate)}/step "
          f"-> at most {numpy_per_step / at_push_rate:.1f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 steps, float32 only")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default 2000)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per figure (best)")
    args = parser.parse_args()
    steps = args.steps or (200 if args.quick else 2000)
    dtypes = ["float32"] if args.quick else ["float32", "float64"]

    blas_threads = os.environ["OPENBLAS_NUM_THREADS"]
    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({os.cpu_count()} cores), "
          f"numpy {np.__version__}, OPENBLAS_NUM_THREADS={blas_threads}")  # fmt: skip
    if hasattr(os, "getloadavg"):
        print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    peak = {}
    for dtype in dtypes:
        with jax.enable_x64(dtype == "float64"):
            peak[dtype] = matmul_gflops(dtype)
        print(f"jnp matmul 1024^3 {dtype}: {peak[dtype]:.1f} GFLOP/s")

    numpy_per_step = compare(256, 256, steps, dtypes, peak, args.repeats, blocked=(2, 3, 4))
    where_the_time_goes(256, 256, numpy_per_step)
    numpy_per_step = compare(1024, 16, steps, dtypes, peak, args.repeats, blocked=(10,))
    where_the_time_goes(1024, 16, numpy_per_step)
    if hasattr(os, "getloadavg"):
        print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()

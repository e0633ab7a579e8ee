"""Lyapunov spectrum: dynlab's JAX core against a straightforward NumPy implementation.

    python benchmarks/lyapunov.py [--quick] [--steps T] [--repeats R]

Both sides run the same QR (Benettin) iteration on the same driven tanh RNN

    h_{t+1} = tanh(W h_t + b + x_t),    W ~ N(0, g^2/N), g = 0.9,

from the same initial state and frame, with a QR every step. NumPy forms the Jacobian
diag(1 - h_{t+1}^2) W explicitly and calls numpy.linalg.qr; dynlab pushes the frame forward by
JVPs inside one jit-compiled lax.scan. A weak, contracting gain keeps the trajectory insensitive
to rounding, so the two implementations must agree to rounding, which is checked (the speed does
not depend on the gain). All figures come from this one process:

- steady-state time (compilation excluded) and the first call (compilation included);
- the speed-up over NumPy in the same dtype, and JAX float32 (dynlab's default) over NumPy
  float64 (NumPy's default);
- the achieved GFLOP/s, counting 2N^2 k for the tangent push and 4Nk^2 - 4k^3/3 for the
  Householder QR and forming Q, against the jnp matmul rate measured here.

OpenBLAS threads: both NumPy and jaxlib's LAPACK kernels (QR) call OpenBLAS. Its worker threads
spin while waiting, and on a machine with few cores they fight XLA's own thread pool (and any
other load): on a shared 2-core machine single QRs inside XLA took up to 0.5 s instead of 1 ms,
and NumPy's loop ran 2-4x slower than single-threaded. So this script sets
OPENBLAS_NUM_THREADS=1 unless you set it yourself (it must be set before NumPy is imported);
XLA's own matmuls still use every core. Run with OPENBLAS_NUM_THREADS=<n> to compare.
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


def flops_per_step(n: int, k: int, reortho_every: int = 1) -> float:
    tangent = 2.0 * n * n * k + 2.0 * n * n  # W Q and W h
    qr = 4.0 * n * k * k - 4.0 * k**3 / 3.0  # geqrf + forming Q (orgqr)
    return tangent + qr / reortho_every


def timed(fn: Callable[[], object], repeats: int = 1) -> tuple[float, object]:
    """Best wall-clock time of `repeats` calls (after any warm-up the caller did), and the output."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best, out


def matmul_gflops(dtype, n: int = 1024, repeats: int = 10) -> float:
    a = jnp.ones((n, n), dtype) / n
    mm = jax.jit(lambda x: x @ x)
    jax.block_until_ready(mm(a))
    return 2.0 * n**3 / timed(lambda: mm(a), repeats)[0] / 1e9


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
    blocked: int = 1,
) -> None:
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

        for m in sorted({1, blocked}) if dtype == "float32" else [1]:
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
    print("speed-up over numpy (QR every step), and max |exponent difference|:")
    for (name, dtype, m), (seconds, exps) in results.items():
        if name == "numpy":
            continue
        for ref_dtype in _reference_dtypes(dtype, dtypes):
            t_np, e_np = results["numpy", ref_dtype, 1]
            label = f"dynlab {dtype} (QR every {m}) vs numpy {ref_dtype}"
            print(f"  {label:<44} {t_np / seconds:5.1f}x   {np.max(np.abs(exps - e_np)):.1e}")


def _reference_dtypes(dtype: str, dtypes: list[str]) -> list[str]:
    """Compare with NumPy in the same dtype; float32 also with NumPy's default, float64."""
    return [dtype] + (["float64"] if dtype == "float32" and "float64" in dtypes else [])


def where_the_time_goes(n: int, k: int) -> None:
    """One QR of an N x k matrix, the step both implementations cannot avoid."""
    z = np.random.default_rng(1).normal(size=(n, k)).astype(np.float32)
    qr = jax.jit(jnp.linalg.qr)
    zj = jnp.asarray(z)
    jax.block_until_ready(qr(zj))
    t_jax = timed(lambda: qr(zj), 20)[0]
    t_np = timed(lambda: np.linalg.qr(z), 20)[0]
    print(f"one float32 QR of {n} x {k}: jnp {t_jax * 1e3:.3f} ms, numpy {t_np * 1e3:.3f} ms")


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
    peak = {}
    for dtype in dtypes:
        with jax.enable_x64(dtype == "float64"):
            peak[dtype] = matmul_gflops(dtype)
        print(f"jnp matmul 1024^3 {dtype}: {peak[dtype]:.1f} GFLOP/s")

    compare(256, 256, steps, dtypes, peak, args.repeats)
    where_the_time_goes(256, 256)
    compare(1024, 16, steps, dtypes, peak, args.repeats, blocked=10)
    where_the_time_goes(1024, 16)


if __name__ == "__main__":
    main()

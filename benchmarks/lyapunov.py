"""Lyapunov spectrum: dynlab's JAX core against lyapax and against a straightforward NumPy loop.

    python benchmarks/lyapunov.py [--quick] [--repeats R] [--rnn-n N] [--systems lorenz,henon,rnn]
                                  [--skip-lyapax | --skip-numpy] [--steps T] [--numpy-repeats R]

`--quick` runs the lyapax comparison only, with 10^4-step maps and a 64-unit RNN: ~30 s of CPU,
35-60 s of wall time on the shared 2-core machine. The full run (lyapax with N = 256, then NumPy)
takes several minutes.

Against lyapax
==============
lyapax (PyPI `lyapax` 0.3.0; bench-only, in the `bench` extra; the comparison is skipped without it)
is a JAX Benettin/QR engine for autonomous maps `state -> state`: a vmapped `jax.jvp` per tangent
column inside `lax.scan`, a QR every `renorm_every` steps (default 1), float64 recommended (it warns on
float32). Both run in this process, jit-compiled (lyapax wrapped in `jax.jit`), on the same maps, from
the same initial state and the same initial frame (lyapax's, seed 0, handed to dynlab as `q0`), with
the same burn-in (lyapax's `t_transient`, QR'd at the same interval) and the same number of steps:

- Lorenz-63, one classical RK4 step of dt = 0.01 per map step (k = N = 3), 10^5 steps;
- the Henon map, a = 1.4, b = 0.3 (k = N = 2), 10^5 steps;
- an autonomous random tanh RNN h -> tanh(W h + b), W ~ N(0, g^2/N), g = 1.5 (weakly chaotic:
  lambda_1 = 0.06, lambda_N = -4.53 per step), full spectrum k = N = 256, 600 steps after 120 of
  burn-in. lyapax takes no inputs, so the driven RNN of the NumPy comparison below cannot be used.

Rows: each library in float64 and float32 with a QR every step and at the same larger intervals
("QR every m"), dynlab's `reortho_every="auto"` (the whole labelled `lyapunov_spectrum` call, its
pilot run over the burn-in included) and, for the RNN, `method="dense"`, one-pass CholeskyQR every
step ("CQR1", `qr=CholeskyQR(passes=1)`) and QR blocks of m with a pivoted LU every p steps inside
("LUp", `reortho_every=m, lu_every=p`; dynlab only, hand-picked). Timing: every call of one
dtype is made once (the "first" column, compilation included), then all are called in turn R times
(default 3), so that load from other processes falls on all of them alike; medians. Speed-ups are
lyapax seconds / dynlab seconds: "x default" against lyapax's default (float64, a QR every step),
"x same" against lyapax at the same dtype and interval, "x m=1" against the same code with a QR every
step.

Accuracy. In one dtype the state trajectory does not depend on the frame, so the two libraries
follow the same trajectory: in float64 with a QR every step they agree to 5e-21 (Lorenz), 0 (Henon)
and 3e-13 (RNN) per step, and a row at a larger interval differs from lyapax's default by its
blocking error alone. The scale is the statistical error of the run, SE_i (batch means of the local
exponents of dynlab's float64 run, `within_run_errors`): a row is at *equal accuracy* when
max_i |lambda_i - lambda_i(lyapax default)| <= 0.1 SE_i (it adds < 0.5% to the error in quadrature).
The blocking error is fixed while SE falls like 1/sqrt(T): longer runs need shorter intervals for the
same criterion. The published values are checked as well: Lorenz 0.9056, 0, -14.5723 per unit time
(Sprott), whose sum is -(sigma + 1 + beta) = -13.6667 exactly (measured: 0.0037 and 1.4e-4 off, the
statistical error and RK4's), Henon lambda_1 = 0.41922 and sum ln 0.3 exactly (0.0012 and 0 off).
float32 rows follow another chaotic trajectory, so they differ from the float64 ones by a statistical
amount (0.3-0.4 SE on the maps, up to 4.7 SE over the RNN's 256 exponents: the largest of 256
differences of two estimates with that error) and never pass the 0.1 SE test, although they are as
close to the published values. float32 blocking fails outright on Henon at m = 8 (both libraries
return lambda_2 = -inf: e^(8 (lambda_1 - lambda_2)) = e^16.3 exceeds 1/eps) and moves lambda_N of the
RNN by 19-60 SE at m = 4-6.

Measured before the changes of items 1-2 below (2-core CPU shared with other jobs, load average 2-10 during the runs, which moves single
figures by up to 2x; ranges over three full runs, R = 3, 5, 5, plus one RNN-only run):

- same settings (dtype and interval): dynlab is never faster. A QR every step: 0.93-0.94x lyapax on
  Lorenz and Henon (float32 0.88-0.92x), 0.80-0.91x on the RNN in float64 (0.84-1.01x in float32);
  at low load (2.5) the RNN's m = 1 was level (1.49 vs 1.47 s). Larger intervals: Lorenz m = 10
  0.65-0.77x (float32 0.41-0.54x), Henon m = 8 0.80-0.99x, RNN m = 2..6 0.6-1.05x (median 0.89x);
- against lyapax's default at equal accuracy: Lorenz 4.8-5.2x (`auto`, which chose m = 50; m = 10:
  3.8-4.1x), Henon 5.6-6.7x (m = 8; `auto` chose 4: 2.7-2.9x with its pilot); RNN, float64 m = 4:
  2.2-2.8x (blocking error 1.3e-6 SE), m = 5: 2.4-3.4x (6.4e-5 SE), m = 6: 1.8-3.7x (0.015 SE), and
  `auto`, which keeps m = 1 there: 0.70-0.89x. So the target of issue 22 (>= 3x) is met on the small
  maps, and on the 256-unit RNN only at hand-picked intervals of 5-6, not reliably; and every
  speed-up comes from the interval: lyapax at the same interval is as fast;
- dynlab's default (float32, a QR every step) against lyapax's default: 0.87-0.96x on Lorenz,
  0.90-1.17x on Henon, 0.92-1.9x on the RNN (not at equal accuracy: another trajectory);
- `method="dense"` (jacfwd, then J Q) on the RNN: 0.85-0.95x lyapax's default, level with dynlab's
  JVPs (1.01-1.08x them): the push is not what costs.

Where the time goes, and what closed the same-interval gap. Per step, timed alone (RNN, float64,
N = 256): the push 0.32 ms, the QR 1.9 ms, so with a QR every step both libraries are LAPACK-QR-bound
and level; everything comes from the interval. At the same interval dynlab used to add, on the RNN
at m = 4 (dynlab 0.706 ms/step, lyapax 0.641), the column renormalisation after every step of a
block (0.044 ms) and the sign flip that made R's diagonal positive (0.019 ms); on Lorenz at m = 10
(0.279 vs 0.218 us/step) the renormalisation alone. Both are now gone where they are not needed
(analyses/lyapunov, issue 22):

1. the core takes log|R_ii| without flipping signs (the same exponents to the bit), and
   renormalises inside a block only if asked (`renormalise`, default True for an integer interval,
   a guard for unknown growth); `auto` drops it when its pilot shows m * max |per-step log growth|
   within a quarter of the dtype's exponent range. The integer-interval rows here pass
   `renormalise=False`, as lyapax has none. Measured after the change (RNN only, load 3.7-4.8):
   dynlab 0.97-1.01x lyapax at every interval m = 1..6 in float64, 0.96-1.05x in float32;
2. `auto` chooses the interval from the statistical error: the predicted blocking error at most
   1% of the pilot's batch-means SE (scaled to the run's length), the frame's mean condition
   number at most eps^(-2/3). On this RNN it then picked m = 4 in float64 (predicted error 4.5e-7
   against a tolerance of 1.3e-5; measured 1.1e-6 SE) and keeps m = 1 in float32. Its labelled
   call is 1.6x lyapax's default, not 3x: its pilot runs the 120-step burn-in with a QR every step
   (0.28 s of 0.86 s), a fifth of this short run at three times the per-step cost, and the bound
   it predicts is ~1000x above the measured error here, so m = 5 (3.1x as a bare core) is refused
   by both the tolerance and the condition cap. The pilot is not reused as the burn-in (it runs
   on one realisation of the ensemble and replicate functions, whose other runs need their own
   burn-in).
   (That was before item 4.) Why 3x was then out of reach for `auto` (push 0.32 ms, QR 1.9 ms,
   lyapax's default 2.22 ms/step): an interval m gives at most 2.22 / (0.32 + 1.9/m) even without a
   pilot (2.8x at m = 4, 3.2x at m = 5), and a pilot measuring the per-step spread with a QR every
   step over the 120-step burn-in costs 0.27 s of lyapax's 1.6 s, capping the speed-up at
   1.6 / (0.27 + 600 x 0.70 ms) = 2.3x at m = 5. Item 4 removes both limits: its pilot costs
   0.86 ms/step and is the burn-in, and the LU keeps the frame conditioned over blocks of 15.
3. float32 does not help the full spectrum of this RNN at m > 1 (blocking error 19-60 SE at
   m = 4-6).
4. Cheaper factorisations (analyses/lyapunov/factorisations.py; the exponents depend only on the
   flag of the frame and the diagonals of the triangular factors, so any flag-preserving triangular
   factorisation gives the same sums, and an orthonormal frame is needed only where a running value
   is read off). Per 256 x 256 frame in float64, timed alone in this script's scans (three runs,
   load 4-7): Householder 1.84-1.96 ms, one-pass CholeskyQR 1.38-1.46 ms, two-pass 3.2-3.4 ms,
   row-pivoted LU (getrf) 0.52-0.54 ms; the push 0.31-0.32 ms.
   - CholeskyQR (Gram matrix, Cholesky, triangular solve; Householder where the Cholesky factor's
     diagonal spread says the frame is too ill-conditioned) every step: 1.06-1.18x lyapax's default
     (CQR1 rows), same exponents (3.8e-11 SE). Two passes cost more than Householder here; not a
     route to 3x.
   - A pivoted LU inside QR blocks (`lu_every=p`): the frame's condition number between
     factorisations is kappa(L) e^(p (l_1 - l_k)) instead of e^(m (l_1 - l_k)), at a quarter of a
     QR's cost, and the block growth is still the QR's exactly. Hand-picked rows (three runs): m = 12,
     p = 2: 2.9-3.1x at 9.5e-9 SE; m = 15, p = 3: 3.3-4.1x at 1.6e-8 SE; m = 12, p = 4: 3.4-4.0x at
     2.2e-5 SE (plain m = 6, for comparison: 3.5x at 0.016 SE). Per-step model from the parts:
     3.14x, 3.73x, 3.88x.
   - `auto` in float64 with k >= 16 now pilots with an LU every step (0.86 ms/step against 2.2 for
     a QR), weighs plain blocks against blocks of min(T'/32, pilot length) with an LU every p steps
     inside, and a single run (`lyapunov_spectrum`) goes on from where the pilot ended instead of
     repeating the burn-in. On this RNN it chooses m = 15, p = 3 (predicted error 8.4e-7 against a
     tolerance of 3.8e-5, reported bound 7.0e-8, measured 2.1e-9 = 8e-8 SE): **2.98-3.37x lyapax's
     default over five runs at load 2.4-7.5 (3.14x and 3.20x in the two full-table runs, 3.37x twice
     in same-process lyapax-against-auto runs; 2.98x before the pilot became the burn-in; 4.12x in a
     later RNN-only run at load 1.3-2.1, `--systems rnn --skip-numpy`, where the hand-picked LU rows
     gave 3.72x, 4.07x and 4.78x)**, at equal
     accuracy by a margin of 10^6. The target of issue 22 is met, narrowly: the pilot is still
     0.10-0.17 s of the call's 0.46-0.73 s. float32 keeps the previous rule (an LU frame's rounding
     moves the smallest exponents of this RNN by 0.17 SE there), so `auto` stays at m = 1 in float32.
   Lorenz and Henon (k = 2, 3) keep the previous rule: `auto` 6.0x and 6.9x in this round's full
   run (load 7.5).

Against NumPy
=============
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
size; that is not attempted. Options measured (the first two are now in the core):

- CholeskyQR (analyses/lyapunov/factorisations.py, `qr=CholeskyQR(passes=1 | 2)`): one pass is
  faster than Householder, two are not. float32, 256 x 256: 0.68 ms one pass, 1.94 ms two (where
  its selector already sends a Gaussian frame to Householder: cond^2 eps is too large in float32),
  Householder 1.33 ms; float64 1.45 ms / 3.4 ms against 1.9 ms; 1024 x 16 float32 0.11 / 0.09 ms
  against 0.07 ms. In float32 it would need its Householder fallback often: cond(J_t) of this RNN
  is ~1.6e3 (up to 5.6e3), so cond^2 eps is 0.15-1.9.
- A pivoted LU inside blocks (`lu_every`, rows "QR every 10, LU every p", float64): 0.42 ms in
  float32 and 0.54 ms in float64 per factorisation, a quarter of Householder's, and it keeps the
  frame conditioned between QRs. Measured (load 7.5): QR every 10 with an LU every 2 or 3 steps,
  3.7x / 3.6x NumPy float64 at 4.9e-10 / 1.1e-10 from it (plain QR every 4: 3.3x at 2.4e-9).
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
import dataclasses  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.tree_util import Partial  # noqa: E402

from dynlab.analyses.lyapunov import lyapunov_core, lyapunov_spectrum, within_run_errors  # noqa: E402
from dynlab.analyses.lyapunov.core import _compensated_cumsum  # noqa: E402
from dynlab.analyses.lyapunov.factorisations import CholeskyQR, PivotedLU  # noqa: E402

try:  # bench-only (the `bench` extra), never a dependency of dynlab itself
    import lyapax  # noqa: E402
except ImportError:
    lyapax = None

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


def lu_flops(n: int, k: int) -> float:
    return n * k * k - k**3 / 3.0  # getrf


def flops_per_step(n: int, k: int, reortho_every: int = 1, lu_every: int = 0) -> float:
    lus = ((reortho_every - 1) // lu_every) / reortho_every if lu_every else 0.0
    return push_flops(n, k) + qr_flops(n, k) / reortho_every + lu_flops(n, k) * lus


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
    lu: tuple[tuple[int, int], ...] = (),
) -> float:
    """Time NumPy and dynlab (QR every step, every m in `blocked`, and in float64 every m with a pivoted LU
    every p steps inside, (m, p) in `lu`) and print the ratios.

    Returns NumPy's float32 seconds per step.
    """
    print(f"\n== k = {k} of N = {n}, {steps} steps (burn-in {BURN_IN}) ==")
    w, b, xs, h0, q0 = problem(n, k, steps)
    results: dict[tuple[str, str, int], tuple[float, np.ndarray]] = {}

    def report(name: str, dtype: str, m: int, seconds: float, extra: str = "", p: int = 0) -> None:
        rate = flops_per_step(n, k, m, p) * steps / seconds / 1e9
        per_step = seconds / steps * 1e3
        lu_text = f", LU every {p}" if p else ""
        print(f"{name:>6} {dtype} QR every {m:2d}{lu_text}: {seconds:7.2f} s {per_step:8.3f} ms/step "
              f"{rate:6.1f} GFLOP/s = {rate / peak[dtype]:4.0%} of jnp matmul{extra}")  # fmt: skip

    for dtype in dtypes:
        arrays = [a.astype(dtype) for a in (w, b, xs, h0, q0)]
        seconds, exps = timed(lambda: numpy_lyapunov(*arrays, BURN_IN), repeats)
        results["numpy", dtype, 1] = seconds, exps
        report("numpy", dtype, 1, seconds)

        settings = [(m, 0) for m in (1, *blocked)] + (list(lu) if dtype == "float64" else [])
        for m, p in settings:
            with jax.enable_x64(dtype == "float64"):
                wj, bj, xj, hj, qj = (jnp.asarray(a) for a in arrays)
                step = Partial(_tanh_rnn, (wj, bj))
                run = lambda: lyapunov_core(  # noqa: E731
                    step, hj, xj, k, burn_in=BURN_IN, reortho_every=m, q0=qj, lu_every=p
                )
                first, _ = timed(run)
                seconds, out = timed(run, repeats)
            results["dynlab", dtype, (m, p) if p else m] = seconds, np.asarray(out.exponents)
            report("dynlab", dtype, m, seconds, f"  (first call {first:.2f} s)", p)

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
            interval = f"QR every {m[0]:2d}, LU every {m[1]}" if isinstance(m, tuple) else f"QR every {m:2d}"
            label = f"dynlab {dtype} ({interval}) vs numpy {ref_dtype}"
            print(f"  {label:<60} {t_np / seconds:5.1f}x   "
                  f"{diff.max():.1e} / {diff[:lead].max():.1e}")  # fmt: skip
    return results["numpy", "float32", 1][0] / steps


def _reference_dtypes(dtype: str, dtypes: list[str]) -> list[str]:
    """Compare with NumPy in the same dtype; float32 also with NumPy's default, float64."""
    return [dtype] + (["float64"] if dtype == "float32" and "float64" in dtypes else [])


def where_the_time_goes(n: int, k: int, numpy_per_step: float) -> None:
    """One float32 tangent push and one factorisation of each kind, timed alone: the floor of a QR every step."""
    rng = np.random.default_rng(1)
    w, z = (rng.normal(size=shape).astype(np.float32) for shape in ((n, n), (n, k)))
    wj, zj = jnp.asarray(w), jnp.asarray(z)
    push = timed_jit(lambda a, b: jnp.matmul(a, b, precision=HIGHEST), wj, zj)
    householder = timed_jit(jnp.linalg.qr, zj)
    r_only = timed_jit(lambda a: jnp.linalg.qr(a, mode="r"), zj)
    cholesky = {passes: timed_jit(CholeskyQR(passes=passes), zj) for passes in (1, 2)}
    lu = timed_jit(PivotedLU(), zj)
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
    agree = np.max(np.abs(log_diag(CholeskyQR().qr(zj)[1]) - log_diag(jnp.linalg.qr(zj)[1])))
    used = bool(CholeskyQR().used_cholesky(zj))
    print(f"  {'CholeskyQR, 1 / 2 passes:':<38}{ms(cholesky[1])} / {ms(cholesky[2])} (selector "
          f"{'takes Cholesky' if used else 'falls back to Householder'} on this Gaussian frame; its ln R_ii match "
          f"Householder's to {agree:.0e})")  # fmt: skip
    print(f"  {'pivoted LU (getrf), inside blocks:':<38}{ms(lu)} = {gflops(lu_flops(n, k), lu)}")
    print(f"  {'numpy.linalg.qr (runs in float64):':<38}{ms(numpy_qr)}")
    floor = push + householder
    print(f"  {'QR every step, push + QR:':<38}{ms(floor)}/step "
          f"-> at most {numpy_per_step / floor:.1f}x over numpy")  # fmt: skip
    at_push_rate = push * (1 + qr_flops(n, k) / push_flops(n, k))
    print(f"  {'... if the QR ran at the push rate:':<38}{ms(at_push_rate)}/step "
          f"-> at most {numpy_per_step / at_push_rate:.1f}x")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# dynlab against lyapax
# ---------------------------------------------------------------------------------------------

LORENZ_DT = 0.01
LORENZ_PUBLISHED = np.array([0.9056, 0.0, -14.5723])  # per unit time (Sprott 2003, Chaos and Time-Series Analysis)
HENON_PUBLISHED = np.array([0.41922, np.log(0.3) - 0.41922])  # lambda_1; lambda_1 + lambda_2 = ln b exactly
EQUAL_ACCURACY = 0.1  # max_i |lambda_i - lambda_i(lyapax default)| / SE_i at "equal accuracy"
TARGET = 3.0  # issue 22: dynlab >= 3x lyapax's default at equal accuracy


def _lorenz_rk4(params, h):
    """One classical RK4 step (dt = 0.01) of the Lorenz-63 flow, params = (sigma, rho, beta)."""
    sigma, rho, beta = params[0], params[1], params[2]

    def f(s):
        x, y, z = s[0], s[1], s[2]
        return jnp.stack([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])

    k1 = f(h)
    k2 = f(h + 0.5 * LORENZ_DT * k1)
    k3 = f(h + 0.5 * LORENZ_DT * k2)
    k4 = f(h + LORENZ_DT * k3)
    return h + (LORENZ_DT / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def _henon(params, h):
    a, b = params[0], params[1]
    return jnp.stack([1.0 - a * h[0] ** 2 + h[1], b * h[0]])


def _tanh_rnn_autonomous(params, h):
    w, b = params
    return jnp.tanh(w @ h + b)


def _with_input(fn):
    """dynlab's step(h, x) for an autonomous lyapax-style fn(params, h): the input (zeros) is ignored."""

    def step(params, h, x):
        return fn(params, h)

    return step


@dataclasses.dataclass
class MapSystem:
    """A map both libraries run: `fn(params, h) -> h_next`, autonomous (lyapax takes no inputs)."""

    name: str
    fn: Callable
    params: object  # NumPy float64 arrays (a PyTree); cast to the run's dtype
    h0: np.ndarray
    burn_in: int
    steps: int
    intervals: tuple[int, ...]  # QR intervals m > 1 run by both libraries ("same settings")
    dt: float = 1.0
    lu: tuple[tuple[int, int], ...] = ()  # dynlab only: (m, p), a QR every m steps, a pivoted LU every p inside  # time per step: exponents are printed per unit time
    published: np.ndarray | None = None
    reference: str = ""

    @property
    def n(self) -> int:
        return int(self.h0.size)


def systems(quick: bool, rnn_n: int | None, names: tuple[str, ...] = ("lorenz", "henon", "rnn")) -> list[MapSystem]:
    steps = 10_000 if quick else 100_000
    n = rnn_n or (64 if quick else 256)
    rng = np.random.default_rng(0)
    gain = 1.5
    w = rng.normal(size=(n, n)) * gain / np.sqrt(n)
    b = rng.normal(size=n) * 0.1
    h0 = rng.normal(size=n) * 0.5
    every = dict(zip(("lorenz", "henon", "rnn"), [
        MapSystem("Lorenz-63 (RK4, dt = 0.01)", _lorenz_rk4, np.array([10.0, 28.0, 8.0 / 3.0]),
                  np.array([1.0, 1.0, 1.0]), 1000, steps, (10,), dt=LORENZ_DT, published=LORENZ_PUBLISHED,
                  reference="published 0.9056, 0, -14.5723 per unit time (Sprott 2003); "
                            "exact sum -(sigma + 1 + beta) = -13.6667 (up to RK4's O(dt^4))"),
        MapSystem("Henon map (a = 1.4, b = 0.3)", _henon, np.array([1.4, 0.3]), np.array([0.1, 0.1]), 1000, steps,
                  (8,), published=HENON_PUBLISHED,
                  reference="published lambda_1 = 0.41922; exact sum ln 0.3 = -1.20397 (det J = -b)"),
        MapSystem(f"random tanh RNN h -> tanh(W h + b), N = {n}, g = {gain}", _tanh_rnn_autonomous, (w, b), h0, 120,
                  240 if quick else 600, (4,) if quick else (2, 4, 5, 6),
                  lu=((12, 2), (15, 3)) if quick else ((12, 2), (15, 3), (12, 4)),
                  reference="lyapax's default run itself (no published values; dynlab float64 with a QR every step "
                            "follows the same trajectory and must agree with it to rounding)"),
    ]))
    unknown = set(names) - set(every)
    if unknown:
        raise SystemExit(f"--systems: unknown {sorted(unknown)}; choose from {', '.join(every)}")
    return [every[name] for name in names]


def _cast(tree, dtype):
    return jax.tree.map(lambda a: jnp.asarray(np.asarray(a, dtype)), tree)


def measure(fns: dict, repeats: int, best: bool = False) -> dict:
    """Time every callable of `fns` (name -> fn): one warm-up call each (compilation included, reported as
    `first`), then `repeats` rounds calling each once in turn, so that load from other processes on a shared
    machine falls on all of them alike. Returns name -> (median seconds, or the least with `best`, first-call
    seconds, last output)."""
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
    pick = np.min if best else np.median
    return {name: (float(pick(times[name])), first[name], out[name]) for name in fns}


@dataclasses.dataclass
class Row:
    code: str
    dtype: str
    m: int  # QR interval; negative: reortho_every="auto", which chose -m
    median: float
    first: float
    exponents: np.ndarray  # per step, descending
    running: np.ndarray | None = None
    note: str = ""


def run_system(system: MapSystem, repeats: int, dtypes: list[str]) -> list[Row]:
    """Both libraries on `system`: each dtype at a QR every step and at every interval of `system.intervals`,
    plus dynlab's reortho_every="auto"; one row per run."""
    n, burn, steps = system.n, system.burn_in, system.steps
    for m in (1, *system.intervals):
        if burn % m or steps % m:
            raise SystemExit(f"{system.name}: burn-in {burn} and steps {steps} must be multiples of {m}")
    rows = []
    for dtype in dtypes:
        x64 = dtype == "float64"
        with jax.enable_x64(x64), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="lyapax: jax_enable_x64 is not set")  # the float32 rows
            params = _cast(system.params, dtype)
            h0 = jnp.asarray(system.h0.astype(dtype))
            # lyapax's initial frame (seed 0), handed to dynlab too: both start from the same frame.
            q0 = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(0), (n, n), dtype=h0.dtype))[0]
            inputs = jnp.zeros((burn + steps, 1), dtype)
            step = Partial(_with_input(system.fn), params)  # one object: dynlab compiles once per interval
            fns = {}
            for m in (1, *system.intervals):

                @jax.jit
                def lyapax_run(params, h0, m=m):
                    out = lyapax.lyapunov_spectrum(Partial(system.fn, params), h0, system.dt, steps, n,
                                                   renorm_every=m, t_transient=burn * system.dt, seed=0)
                    return out.exponents * system.dt, out.history  # per step, like dynlab

                fns["lyapax", m] = lambda run=lyapax_run: run(params, h0)
                # renormalise=False: as lyapax, and as `auto` chooses on these maps (its pilot sees the block
                # growth far inside the dtype's range); the default True is a guard for unknown growth.
                fns["dynlab", m] = lambda m=m: lyapunov_core(step, h0, inputs, n, burn_in=burn, reortho_every=m,
                                                             renormalise=False, q0=q0)
            if n > 16 and x64:  # the dense Jacobian (jacfwd, then J Q) instead of JVPs, for comparison
                fns["dynlab dense", 1] = lambda: lyapunov_core(step, h0, inputs, n, burn_in=burn, reortho_every=1,
                                                               method="dense", q0=q0)
            if n > 16:
                # CholeskyQR (one pass, Householder where its selector refuses) every step, and blocks of m with
                # a pivoted LU every p steps inside (hand-picked (m, p); `auto` chooses its own)
                fns["dynlab CQR1", 1] = lambda: lyapunov_core(step, h0, inputs, n, burn_in=burn, reortho_every=1,
                                                              qr=CholeskyQR(passes=1), q0=q0)
                for m, p in system.lu:
                    fns[f"dynlab LU{p}", m] = lambda m=m, p=p: lyapunov_core(
                        step, h0, inputs, n, burn_in=burn, reortho_every=m, lu_every=p, renormalise=False, q0=q0)
            # reortho_every="auto": the whole labelled call (its pilot over the burn-in included), with float64
            # NumPy parameters that lyapunov_spectrum casts itself.
            step_np = Partial(_with_input(system.fn), system.params)
            q0_np, inputs_np = np.asarray(q0), np.zeros((burn + steps, 1))
            fns["dynlab", "auto"] = lambda: lyapunov_spectrum(step_np, system.h0, inputs_np, n, burn_in=burn,
                                                              reortho_every="auto", x64=x64, q0=q0_np)
            results = measure(fns, repeats)
        for (code, m), (median, first, out) in results.items():
            if m == "auto":
                lu_text = (f", a pivoted LU every {out.attrs['reortho_lu_every']} steps inside"
                           if out.attrs["reortho_lu_every"] else "")
                note = (f"auto chose {out.attrs['reortho_every']}{lu_text} (predicted error "
                        f"{out.attrs['reortho_predicted_error']:.1e} <= tolerance {out.attrs['reortho_tolerance']:.1e} "
                        f"= 1% of the pilot's SE scaled to the run, bound {out.attrs['reortho_error_bound']:.1e}, "
                        f"renormalise {out.attrs['reortho_renormalise']}; timed: the labelled call with its pilot)")
                rows.append(Row(code, dtype, -int(out.attrs["reortho_every"]), median, first,
                                np.asarray(out.exponents.values, np.float64), note=note))
            elif code == "lyapax":
                rows.append(Row(code, dtype, m, median, first, np.asarray(out[0], np.float64)))
            else:
                rows.append(Row(code, dtype, m, median, first, np.asarray(out.exponents, np.float64),
                                np.asarray(out.running, np.float64)))
    return rows


def report_system(system: MapSystem, rows: list[Row]) -> dict[str, float]:
    """Print the table of one system; returns the headline ratios."""
    n, dt = system.n, system.dt
    by = {(r.code, r.dtype, r.m): r for r in rows}
    default = by["lyapax", "float64", 1]  # lyapax's default: a QR every step; float64, which lyapax asks for
    ref64 = by["dynlab", "float64", 1]
    se, batch = within_run_errors(ref64.running, np.arange(1, system.steps + 1))
    se = np.where(se > 0, se, np.nan)
    per_time = (lambda v: v / dt) if dt != 1 else (lambda v: v)
    unit = "per unit time" if dt != 1 else "per step"
    print(f"\n== {system.name}: full spectrum k = N = {n}, {system.burn_in} burn-in + {system.steps} steps ==")
    print(f"reference: {system.reference}")
    shown = per_time(se)
    print(f"statistical error of one run (batch means of the local exponents, batches of {batch} steps, dynlab "
          f"float64, QR every step), {unit}: SE(lambda_1) = {shown[0]:.2g}, median over i {np.nanmedian(shown):.2g}, "
          f"smallest {np.nanmin(shown):.2g}")
    agree = np.max(np.abs(ref64.exponents - default.exponents))
    print(f"dynlab float64 vs lyapax float64, both a QR every step, same initial frame: max |d lambda| = {agree:.1e} "
          "per step")
    print(f"speed-up = lyapax seconds / dynlab seconds (medians; warm-up call excluded); 'same' = lyapax at the same "
          f"dtype and interval; d/SE = max_i |lambda_i - lambda_i(lyapax default)| / SE_i "
          f"(equal accuracy: <= {EQUAL_ACCURACY})")
    has_pub = system.published is not None
    pub_head = " |d pub| |d sum|" if has_pub else ""
    print(f"{'code':<12} {'dtype':<7} {'QR every':>8} {'median s':>9} {'us/step':>9} {'first s':>8} "
          f"{'x default':>9} {'x same':>7} {'x m=1':>6} {'d/SE':>8}  {'lambda_1':>9} {'lambda_N':>9}{pub_head}")
    best = None
    for r in rows:
        same = by.get(("lyapax", r.dtype, abs(r.m)))
        own1 = by.get(("dynlab" if r.code.startswith("dynlab") else r.code, r.dtype, 1))
        d_se = float(np.nanmax(np.abs(r.exponents - default.exponents) / se))
        lam = per_time(r.exponents)
        m_text = f"auto {-r.m}" if r.m < 0 else str(r.m)
        x_same = f"{same.median / r.median:7.2f}" if r.code != "lyapax" and same is not None and r.m > 0 else f"{'':>7}"
        pub = ""
        if has_pub:
            pub = f" {np.max(np.abs(lam - system.published)):7.4f} {abs(lam.sum() - system.published.sum()):7.1e}"
        per_step = r.median / (system.burn_in + system.steps) * 1e6
        print(f"{r.code:<12} {r.dtype:<7} {m_text:>8} {r.median:9.4f} {per_step:9.2f} "
              f"{r.first:8.2f} {default.median / r.median:9.2f} {x_same} {own1.median / r.median:6.2f} {d_se:8.2g}  "
              f"{lam[0]:9.5f} {lam[-1]:9.4f}{pub}")
        if r.note:
            print(f"{'':<30}{r.note}")
        if r.code.startswith("dynlab") and d_se <= EQUAL_ACCURACY and (best is None or r.median < best.median):
            best = r
    dyn_default = by["dynlab", "float32", 1] if ("dynlab", "float32", 1) in by else ref64
    out = {"default": default.median / dyn_default.median}
    print(f"dynlab's default (float32, QR every step) against lyapax's default: {out['default']:.2f}x, "
          f"d/SE = {float(np.nanmax(np.abs(dyn_default.exponents - default.exponents) / se)):.2g}")
    if best is not None:
        out["best"] = default.median / best.median
        m_text = f"reortho_every='auto' (chose {-best.m})" if best.m < 0 else f"QR every {best.m}"
        verdict = "met" if out["best"] >= TARGET else "NOT met"
        print(f"fastest dynlab run at equal accuracy: {best.code} {best.dtype}, {m_text}: "
              f"{out['best']:.2f}x lyapax's "
              f"default (target >= {TARGET:g}x: {verdict})")
    return out


def where_the_time_goes_per_step(system: MapSystem, dtype: str, repeats: int) -> None:
    """The parts of one step of `system`, each timed alone inside a jit-compiled scan (medians): the tangent push
    (both libraries), dynlab's column renormalisation inside a block (m > 1), the QR, the sign flip to a positive
    diagonal that dynlab's core used to make (timed for the record), and the per-QR running sum (dynlab: compensated, a sequential scan; lyapax: jnp.cumsum).
    From them, the per-step cost of each library at an interval m, and the interval 3x lyapax's default needs."""
    n = system.n
    length = 64 if n > 16 else 2048
    with jax.enable_x64(dtype == "float64"):
        params = _cast(system.params, dtype)
        h0 = jnp.asarray(system.h0.astype(dtype))
        z0 = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(1), (n, n), dtype=h0.dtype))[0]
        g = jax.random.normal(jax.random.PRNGKey(2), (length, n), dtype=h0.dtype)
        fn = Partial(system.fn, params)

        def push(c):
            h, z = c
            h_next, jvp = jax.linearize(fn, h)
            return h_next, jax.vmap(jvp, in_axes=1, out_axes=1)(z)

        def renormalised(c):
            h, z = push(c)
            norms = jnp.linalg.norm(z, axis=0)
            return h, z / jnp.where(norms > 0, norms, 1) + 0 * jnp.log(norms)[None]

        def qr_plain(c):
            h, z = c
            q, r = jnp.linalg.qr(z)
            return h, q + 0 * jnp.log(jnp.abs(jnp.diag(r)))[None]

        def qr_flip(c):
            h, z = c
            q, r = jnp.linalg.qr(z)
            d = jnp.diagonal(r)
            return h, q * jnp.where(d < 0, -1, 1).astype(q.dtype) + 0 * jnp.log(jnp.abs(d))[None]

        def factorised(method):
            def body(c):
                h, z = c
                frame, log_diag = method(z)
                return h, frame + 0 * log_diag[None]

            return body

        def scanned(body):
            return jax.jit(lambda c: jax.lax.scan(lambda c, _: (body(c), None), c, None, length=length)[0])

        runs = {name: scanned(body) for name, body in
                (("push", push), ("renorm", renormalised), ("qr", qr_plain), ("flip", qr_flip),
                 ("cqr1", factorised(CholeskyQR(passes=1))), ("cqr2", factorised(CholeskyQR())),
                 ("lu", factorised(PivotedLU())))}
        runs["kahan"] = jax.jit(_compensated_cumsum)  # the core's own running sum
        runs["cumsum"] = jax.jit(lambda x: jnp.cumsum(x, axis=0))
        fns = {name: (lambda run=run, name=name: run(g if name in ("kahan", "cumsum") else (h0, z0)))
               for name, run in runs.items()}
        t = {name: result[0] / length for name, result in measure(fns, repeats, best=True).items()}
    push_t, renorm_t = t["push"], max(t["renorm"] - t["push"], 0.0)
    qr_t, flip_t = t["qr"], max(t["flip"] - t["qr"], 0.0)
    cqr1_t, cqr2_t, lu_t = t["cqr1"], t["cqr2"], t["lu"]  # each timed alone, as the QR
    us = lambda sec: f"{sec * 1e6:.2f} us"  # noqa: E731
    print(f"where a step goes, {system.name}, {dtype} (parts timed alone in scans of {length}, best of {repeats}):")
    print(f"  tangent push (k = {n} JVPs): {us(push_t)}; column renormalisation inside a block (dynlab, only where "
          f"needed): +{us(renorm_t)}; QR: {us(qr_t)}; sign flip (no longer made): +{us(flip_t)}; "
          f"running sum per QR: dynlab (compensated scan) {us(t['kahan'])}, lyapax (cumsum) {us(t['cumsum'])}")
    print(f"  other factorisations of the frame: CholeskyQR 1 pass {us(cqr1_t)}, 2 passes {us(cqr2_t)} (with its "
          f"selector), pivoted LU {us(lu_t)}")
    lyapax_step = lambda m: push_t + (qr_t + t["cumsum"]) / m  # noqa: E731
    # dynlab no longer flips signs, and renormalises inside a block only where the growth nears the range
    dynlab_step = lambda m: push_t + (qr_t + t["kahan"]) / m  # noqa: E731
    default = lyapax_step(1)
    for m in (1, *system.intervals):
        print(f"  QR every {m}: lyapax {us(lyapax_step(m))}/step, dynlab {us(dynlab_step(m))}/step -> dynlab "
              f"{default / dynlab_step(m):.2f}x lyapax's default (lyapax {default / lyapax_step(m):.2f}x; dynlab "
              f"with the renormalisation kept: {default / (dynlab_step(m) + (renorm_t if m > 1 else 0.0)):.2f}x)")
    for m, p in system.lu:
        lu_step = push_t + lu_t * ((m - 1) // p) / m + (qr_t + t["kahan"]) / m
        print(f"  QR every {m}, pivoted LU every {p} inside: dynlab {us(lu_step)}/step -> {default / lu_step:.2f}x "
              "lyapax's default")
    budget = default / TARGET
    for label, fixed, per_qr in (("dynlab, renormalisation dropped", push_t, qr_t + t["kahan"]),
                                 ("dynlab, renormalisation kept", push_t + renorm_t, qr_t + t["kahan"]),
                                 ("lyapax", push_t, qr_t + t["cumsum"])):
        need = per_qr / (budget - fixed) if budget > fixed else np.inf
        print(f"  {TARGET:g}x lyapax's default ({us(budget)}/step) needs a QR at most every {need:.1f} steps "
              f"({label})")


def lyapax_comparison(quick: bool, repeats: int, rnn_n: int | None, names: tuple[str, ...]) -> None:
    if lyapax is None:
        print("\nlyapax is not installed (it is bench-only: pip install -e '.[bench]'); skipping the comparison.")
        return
    print(f"\n#### dynlab against lyapax {lyapax.__version__} (same maps, same process, same initial frame) ####")
    dtypes = ["float64", "float32"]
    for system in systems(quick, rnn_n, names):
        rows = run_system(system, repeats, dtypes)
        report_system(system, rows)
        where_the_time_goes_per_step(system, "float64", 5 if quick else max(repeats, 10))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="lyapax comparison only, shorter runs, a 64-unit RNN (< 1 min)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per lyapax-comparison figure (median)")
    parser.add_argument("--rnn-n", type=int, default=None, help="RNN size in the lyapax comparison (256; quick 64)")
    parser.add_argument("--systems", default="lorenz,henon,rnn", help="lyapax comparison: which maps (comma-separated)")
    parser.add_argument("--skip-lyapax", action="store_true", help="only the NumPy comparison")
    parser.add_argument("--skip-numpy", action="store_true", help="only the lyapax comparison")
    parser.add_argument("--steps", type=int, default=None, help="NumPy comparison: steps per run (default 2000)")
    parser.add_argument("--numpy-repeats", type=int, default=1, help="NumPy comparison: timed runs per figure (best)")
    args = parser.parse_args()

    blas_threads = os.environ["OPENBLAS_NUM_THREADS"]
    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({os.cpu_count()} cores), "
          f"numpy {np.__version__}, OPENBLAS_NUM_THREADS={blas_threads}")  # fmt: skip
    if hasattr(os, "getloadavg"):
        print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    if not args.skip_lyapax:
        lyapax_comparison(args.quick, args.repeats, args.rnn_n, tuple(args.systems.split(",")))
    if not (args.quick or args.skip_numpy):
        numpy_comparison(args.steps or 2000, args.numpy_repeats)
    if hasattr(os, "getloadavg"):
        print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


def numpy_comparison(steps: int, repeats: int) -> None:
    print("\n#### dynlab against the NumPy textbook loop (driven RNN) ####")
    dtypes = ["float32", "float64"]
    peak = {}
    for dtype in dtypes:
        with jax.enable_x64(dtype == "float64"):
            peak[dtype] = matmul_gflops(dtype)
        print(f"jnp matmul 1024^3 {dtype}: {peak[dtype]:.1f} GFLOP/s")

    numpy_per_step = compare(256, 256, steps, dtypes, peak, repeats, blocked=(2, 3, 4), lu=((10, 1), (10, 2), (10, 3)))
    where_the_time_goes(256, 256, numpy_per_step)
    numpy_per_step = compare(1024, 16, steps, dtypes, peak, repeats, blocked=(10,))
    where_the_time_goes(1024, 16, numpy_per_step)


if __name__ == "__main__":
    main()

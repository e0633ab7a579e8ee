"""The teachers at full size, one run each: their ground truth as `dynlab train` students see it.

- **chaotic-rnn** (N = 200, g = 1.5, dt/tau = 1/30; `teacher-chaotic-rnn`'s defaults): the
  fingerprint (fixed points from the visited states, the full Lyapunov spectrum with intervals,
  Kaplan-Yorke dimension), printed per step and per tau. Sompolinsky, Crisanti & Sommers (1988):
  for g > 1 the network is chaotic, lambda_1 > 0; the truth tests use N = 100 and only the top
  exponents (`tests/test_teachers.py`).
- **flipflop** (`teacher-flipflop`'s defaults: a 64-unit GRU, 3 bits, 1,500 steps): trained once into
  the cache, then 2^3 = 8 stable fixed points at zero input are expected (Sussillo & Barak 2013).

Each truth is computed by `teacher_truth` and cached under ``$DYNLAB_CACHE`` (default
``~/.cache/dynlab``); the CPU time of the first computation is printed (``resource.getrusage``).

Measured (2-core CPU shared with other work, 2026-11-27, ``--only chaotic-rnn``, teacher_seed 1):
truth in 71 s CPU; lambda_1 = 0.00054 [-0.00004, 0.00113] per step (lambda_1 tau = 0.016), D_KY = 3.19
[1.65, 4.73]: 5 runs of 2,000 steps leave lambda_1's interval touching 0, so no exponent counts as
positive (the test resolves it above 0 with 3 runs of 6,000 steps of the top exponent). Fixed-point
search from the visited states: 32 slow points, no fixed point below q_tol (the origin, a fixed
point by construction, is far from the chaotic states), about 496 unseen (Chao1). With teacher_seed
0 (before it was changed): lambda_1 = 0.00051 [-0.00030, 0.00131], 96 s CPU.
``--only flipflop`` (2026-11-28, empty cache): truth in 17 s CPU; at zero input **8 stable points
(expected 2^3 = 8)** and 12 saddles, besides 227 marginal points with 63 eigenvalues on the unit
circle (the saturated-gate continuum far from the visited states); lambda_1 = -0.124
[-0.236, -0.011] per step, no positive exponent.

Run: ``python benchmarks/teachers.py [--only chaotic-rnn|flipflop]`` (minutes on 2 cores).
"""

import argparse
import resource

from dynlab import registry
from dynlab.analyses.recovery.fingerprint import FingerprintOptions
from dynlab.analyses.recovery.spectrum_score import positive_exponents
from dynlab.analyses.recovery.truth import teacher_truth


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def report(name: str, task, options: FingerprintOptions) -> None:
    start = cpu()
    fixed, spectrum = teacher_truth(task.teacher, task.length, options)
    print(f"{name}: truth in {cpu() - start:.0f} s CPU")
    print(f"  fixed points: {fixed.attrs['reading']}")
    lam = float(spectrum["largest_mean"])
    print(f"  lambda_1 = {lam:.5f} [{float(spectrum['largest_ci_low']):.5f}, {float(spectrum['largest_ci_high']):.5f}]"
          f" per step; positive exponents {positive_exponents(spectrum)} (interval above 0); "
          f"D_KY = {float(spectrum['ky_dimension_mean']):.2f} [{float(spectrum['ky_dimension_ci_low']):.2f}, "
          f"{float(spectrum['ky_dimension_ci_high']):.2f}]")
    alpha = getattr(getattr(task.teacher, "model", None), "cells", [None])[0]
    if alpha is not None and hasattr(alpha, "alpha"):
        print(f"  lambda_1 tau = {lam / alpha.alpha:.4f}")
    if name == "flipflop":
        stable = int((fixed.stability.values == "stable").sum())
        print(f"  stable points: {stable} (expected {2 ** task.teacher.input_size})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("chaotic-rnn", "flipflop"))
    args = parser.parse_args()
    if args.only in (None, "chaotic-rnn"):
        task = registry.build("task", "teacher-chaotic-rnn")
        report("chaotic-rnn", task, FingerprintOptions(trials=5, realisations=5, burn_in=100, ics=32, steps=2000,
                                                       lyapunov_burn_in=300))
    if args.only in (None, "flipflop"):
        task = registry.build("task", "teacher-flipflop")
        report("flipflop", task, FingerprintOptions(trials=8, realisations=4, burn_in=5, ics=128, steps=300,
                                                    lyapunov_burn_in=50))


if __name__ == "__main__":
    main()

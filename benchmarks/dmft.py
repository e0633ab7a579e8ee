"""The chaotic teacher against dynamical mean-field theory: the largest Lyapunov exponent of the
rate network of gain g = 1.5 (the teacher's map, alpha = dt/tau = 1/30) for growing N, against
[`dmft_lambda_max`][dynlab.teachers.dmft.dmft_lambda_max], the N -> infinity value.

The finite networks are simulated here in NumPy (their own weights; not by dynlab): the map and
its tangent, renormalised every 10 steps (Benettin), 600 tau of which the first 100 are not
accumulated, 4 networks per N; per unit tau (the per-step exponent / alpha).

Measured (2-core CPU, 2026-11-28), DMFT lambda_max(1.5) = 0.0467 (unchanged at half the grid step):

| N | lambda_1 of networks 0-3 | mean |
|---|---|---|
| 200 | 0.0006, 0.0012, 0.0122, 0.0090 | 0.0057 |
| 500 | 0.0395, 0.0219, 0.0215, -0.0163 | 0.0166 |
| 1000 | -0.0022, 0.0437, 0.0328, 0.0407 | 0.0288 |
| 2000 | 0.0424, 0.0454, 0.0454, 0.0423 | 0.0439 |

The finite networks approach the mean-field value from below as N grows, and their spread shrinks
(at N = 2000 all four lie within 0.005 of it). At N = 200, the teacher's size, the finite-size
error is as large as the exponent itself: some networks settle on a limit cycle (lambda_1 near 0)
or a fixed point (below 0). dynlab's own measurement of the teacher (``ChaoticRNNTeacherTask``'s
docstring: 0.026 [0.014, 0.038] for teacher seed 1, and -0.020 to 0.026 over seeds 0-3) lies in
that N = 200 spread.

Run: ``python benchmarks/dmft.py`` (about 2 min on 2 cores; ``--sizes 200 500`` for less).
"""

import argparse
import time

import numpy as np

from dynlab.teachers.dmft import dmft_lambda_max


def lambda1(n, seed, *, g=1.5, alpha=1 / 30, tau=600.0, burn_in=100.0, every=10):
    """The largest exponent (per unit tau) of one network of ``n`` neurons drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    j = rng.normal(0.0, g / np.sqrt(n), (n, n))
    x, v = rng.normal(0.0, 1.0, n), rng.normal(0.0, 1.0, n)
    v /= np.linalg.norm(v)
    steps, burn, total = int(tau / alpha), int(burn_in / alpha), 0.0
    for t in range(steps):
        r = np.tanh(x)
        v = (1 - alpha) * v + alpha * (j @ ((1 - r * r) * v))
        x = (1 - alpha) * x + alpha * (j @ r)
        if t % every == every - 1:
            norm = np.linalg.norm(v)
            v /= norm
            if t >= burn:
                total += np.log(norm)
    return total / ((steps - burn) * alpha)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 500, 1000, 2000])
    parser.add_argument("--networks", type=int, default=4)
    args = parser.parse_args()
    print(f"DMFT lambda_max(g = 1.5) = {dmft_lambda_max(1.5):.4f} per tau")
    for n in args.sizes:
        start = time.perf_counter()
        values = [lambda1(n, seed) for seed in range(args.networks)]
        print(f"N = {n}: " + ", ".join(f"{v:.4f}" for v in values) + f"; mean {np.mean(values):.4f} "
              f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

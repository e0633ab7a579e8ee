"""The chaotic teacher against dynamical mean-field theory (issue #35): the largest Lyapunov exponent
of `teacher-chaotic-rnn` (g = 1.5, alpha = dt/tau = 1/30) for growing N, measured by dynlab's own
analysis, against [`dmft_lambda_max`][dynlab.teachers.dmft.dmft_lambda_max], the N -> infinity value.

Per N, the teachers ``teacher_seed`` = 0, 1, ... are built by the registry (the task's own weights)
and kicked as in their trials (3 kicks); from the state after 50 tau each, the top exponent by
``lyapunov_replicates`` (k = 1, 20 tau of tangent burn-in, 600 tau accumulated): 3 stretches of the
attractor per teacher, per unit tau (the per-step exponent / alpha). A teacher's interval is
dynlab's Student-t interval over its 3 stretches; the mean over teachers gets a Student-t interval
over the teachers (``dynlab.statistics.t_interval``), whose spread is the finite-size error.

``--ode``: the same teachers' weights integrated as the flow dx/dt = -x + W tanh(x) in NumPy (RK4,
dt = 0.05 tau, tangent renormalised every tau, 100 tau not accumulated, 600 tau accumulated), apart
from dynlab: the map is the flow's Euler step, so the two must agree within the time-averaging
error; what they both show about finite N is the network, not the discretisation.

Measured (2-core CPU shared with other work, 2026-11-28, ``taskset -c 1``); DMFT lambda_max(1.5) =
0.046746 per tau (D. G. Clark's independent solution: 0.046746; his Euler maps at dt/tau = 0.25 and
0.5 give 0.046330 and 0.045913, so at the teacher's 1/30 the map's value is the flow's to ~0.1%):

| N | lambda_1 tau of teacher_seed 0-5 (dynlab) | mean [95% over teachers] | median | DMFT |
|---|---|---|---|---|
| 200 | -0.0003, 0.0254, -0.0160, -0.0021, 0.0003, 0.0171 | 0.0041 [-0.0115, 0.0196] | -0.0000 | 0.0467 |
| 500 | -0.0001, 0.0092, 0.0145, -0.0466, 0.0135, 0.0121 | 0.0004 [-0.0244, 0.0253] | 0.0107 | 0.0467 |
| 1000 | 0.0345, 0.0373, 0.0265, 0.0357, 0.0378, 0.0397 | 0.0353 [0.0304, 0.0401] | 0.0365 | 0.0467 |
| 2000 | 0.0443, 0.0452, 0.0398, 0.0311, 0.0326, 0.0394 | 0.0388 [0.0326, 0.0449] | 0.0396 | 0.0467 |
| 4000 | 0.0436, 0.0447, 0.0465 (seeds 0-2) | 0.0449 [0.0413, 0.0485] | 0.0447 | 0.0467 |

(8, 11, 41, 153, 364 s for N = 200 ... 4000.) At N = 200 and 500 the drawn network decides (seeds 6 and 7,
``--first-seed 6 --seeds 2``: -0.0409, -0.0003 at N = 200; 0.0152, 0.0346 at N = 500). At N = 200
half of seeds 0-7 (0, 3, 4, 7) sit on a limit cycle or torus (lambda_1 = 0 within +-0.002), two on a
fixed point (seed 2: -0.016; seed 6: -0.041), two are weakly chaotic (0.017, 0.025); at N = 500 one
sits on a cycle, one on a fixed point (-0.047), six are weakly chaotic (0.009-0.035). None reaches the
mean-field value. From N = 1000 every drawn network is chaotic, and the exponent rises towards
the DMFT value from below while the spread over networks shrinks: the mean lies 0.0114, 0.0079 and
0.0018 below it at N = 1000, 2000 and 4000, and at N = 4000 the DMFT value is inside the interval over
the teachers. D. G. Clark's continuous-time simulations at N = 8192 (two networks, 4,000 tau: 0.0445,
0.0442; github.com/davidclark1/rnn-lyapunov, data/network/flow_g1.5_rk4dt0.1_N8192_k512_seed{0,1}.json)
lie about 0.0024 below it.

``--ode``, the flow with the teachers' weights (3 runs from random states, 600 tau each) against
dynlab's map (3 stretches): N = 200 seed 0: 0.0002, -0.0002, 0.0001 (dynlab 0.0000, -0.0001,
-0.0009); seed 1: 0.0048, 0.0203, 0.0242 (0.0141, 0.0247, 0.0374); seed 6: -0.0424, -0.0386, -0.0416
(-0.0412, -0.0406, -0.0408); seed 7: -0.0004, 0.0004, 0.0002 (0.0020, -0.0003, -0.0026); N = 1000
seed 4: 0.0431, 0.0384, 0.0325 (0.0350, 0.0399, 0.0385; 109 s). ``--numpy`` (networks with their own
NumPy weights, the map, 600 tau after 100; the previous version of this benchmark): N = 200: 0.0006,
0.0012, 0.0122, 0.0090 (mean 0.0057); N = 500: 0.0395, 0.0219, 0.0215, -0.0163 (mean 0.0166), as
that version measured; it also measured, not rerun here, N = 1000: -0.0022, 0.0437, 0.0328, 0.0407
(0.0288) and N = 2000: 0.0424, 0.0454, 0.0454, 0.0423 (0.0439).

So the rate unit and the teacher are the SCS network (W ~ N(0, g^2/N), no bias, the Euler step of
the flow), dynlab's exponent per tau (per step / alpha) is the flow's, and the finite networks
approach the mean-field exponent from below as N grows. At the teacher's N = 200 the finite-size
error is as large as the exponent itself: the default teacher (seed 1) is weakly chaotic, its
600-tau stretches giving 0.014-0.037 (the flow with its weights 0.005-0.024), half the DMFT value.

Run: ``python benchmarks/dmft.py`` (about 4 min on one core; ``--sizes 200 500`` for less; ``--ode``
adds the flow, about 1.5 min per N = 1000 teacher; ``--numpy`` the networks with NumPy weights).
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from dynlab import registry
from dynlab.analyses.lyapunov import lyapunov_replicates
from dynlab.analyses.recovery.fingerprint import of_teacher
from dynlab.statistics import t_interval
from dynlab.teachers.dmft import dmft_lambda_max

WARM, BURN_IN, STEPS, STRETCHES = 1500, 600, 18000, 3  # steps of alpha = 1/30: 50, 20, 600 tau


def teacher_of(n: int, seed: int):
    return registry.build("task", "teacher-chaotic-rnn", n=n, teacher_seed=seed).teacher


def dynlab_lambda1(teacher) -> tuple[float, float, float, np.ndarray]:
    """The teacher's top exponent per unit tau by dynlab's analysis: mean, 95% interval over the
    stretches, and each stretch's value."""
    alpha = teacher.model.cells[0].alpha
    states = of_teacher(teacher).visit(teacher.inputs(jax.random.key(1), STRETCHES, WARM))
    h0s = jnp.asarray(states[:, -1][:, None], jnp.float32)
    ds = lyapunov_replicates(teacher.step, h0s, jnp.zeros((STRETCHES, BURN_IN + STEPS, 1)), 1, burn_in=BURN_IN,
                             key=jax.random.key(0), population="stretches of the attractor")
    return (float(ds["mean"][0]) / alpha, float(ds.ci_low[0]) / alpha, float(ds.ci_high[0]) / alpha,
            np.asarray(ds.realisation_mean[:, 0]) / alpha)


def ode_lambda1(w: np.ndarray, seed: int, *, dt: float = 0.05, burn_in: float = 100.0, tau: float = 700.0) -> float:
    """The top exponent of the flow dx/dt = -x + W tanh(x) (RK4 in NumPy, Benettin), per unit tau."""
    rng = np.random.default_rng(seed)
    x, v = rng.normal(0.0, 1.0, len(w)), rng.normal(0.0, 1.0, len(w))
    v /= np.linalg.norm(v)

    def field(x, v):
        r = np.tanh(x)
        return -x + w @ r, -v + w @ ((1 - r * r) * v)

    every, total, accumulated = round(1 / dt), 0.0, 0.0
    for t in range(round(tau / dt)):
        k1 = field(x, v)
        k2 = field(x + dt / 2 * k1[0], v + dt / 2 * k1[1])
        k3 = field(x + dt / 2 * k2[0], v + dt / 2 * k2[1])
        k4 = field(x + dt * k3[0], v + dt * k3[1])
        x = x + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        v = v + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        if (t + 1) % every == 0:
            norm = np.linalg.norm(v)
            v /= norm
            if (t + 1) * dt > burn_in:
                total, accumulated = total + np.log(norm), accumulated + every * dt
    return total / accumulated


def numpy_lambda1(n: int, seed: int, *, g: float = 1.5, alpha: float = 1 / 30, tau: float = 600.0,
                  burn_in: float = 100.0, every: int = 10) -> float:
    """The top exponent (per unit tau) of the teacher's map with its own weights drawn in NumPy from
    ``seed`` (not dynlab's): the map and its tangent, renormalised every ``every`` steps."""
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
    parser.add_argument("--seeds", type=int, default=6, help="teachers per N: teacher_seed 0 .. seeds-1")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--ode", action="store_true", help="also integrate the flow with each teacher's weights")
    parser.add_argument("--numpy", action="store_true", help="networks with their own NumPy weights instead")
    args = parser.parse_args()
    dmft = dmft_lambda_max(1.5)
    print(f"DMFT lambda_max(g = 1.5) = {dmft:.6f} per tau")
    if args.numpy:
        for n in args.sizes:
            values = [numpy_lambda1(n, seed) for seed in range(args.first_seed, args.first_seed + args.seeds)]
            print(f"N = {n} (NumPy weights): " + ", ".join(f"{v:.4f}" for v in values)
                  + f"; mean {np.mean(values):.4f}")
        return
    for n in args.sizes:
        start, means = time.perf_counter(), []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            teacher = teacher_of(n, seed)
            mean, low, high, stretches = dynlab_lambda1(teacher)
            means.append(mean)
            line = (f"  N = {n} teacher_seed {seed}: {mean:.4f} [{low:.4f}, {high:.4f}], stretches "
                    + ", ".join(f"{s:.4f}" for s in stretches))
            if args.ode:
                w = np.asarray(teacher.model.cells[0].w, np.float64)
                line += "; flow " + ", ".join(f"{ode_lambda1(w, r):.4f}" for r in range(STRETCHES))
            print(line, flush=True)
        ci = t_interval(np.array(means), population="teachers", allow_fewer=True)
        print(f"N = {n}: {', '.join(f'{m:.4f}' for m in means)}; mean {float(ci.estimate):.4f} "
              f"[{float(ci.low):.4f}, {float(ci.high):.4f}], median {np.median(means):.4f}; DMFT {dmft:.4f} "
              f"({time.perf_counter() - start:.0f} s)",
              flush=True)


if __name__ == "__main__":
    main()

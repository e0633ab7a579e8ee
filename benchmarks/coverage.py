"""Do the Lyapunov intervals users see cover the truth as often as they say? (issue 38)

    python benchmarks/coverage.py [--reps 200] [--which fresh-adding,trained-adding,quickstart,rnn-zero]
                                  [--train-steps 1000] [--truth-steps 40000]

Every repetition runs the public path, `lyapunov_analysis` with its defaults (what
`dynlab analyze lyapunov` runs: 16 exponents, 2000 steps, burn-in "auto", 5 realisations x 2
initial conditions, QR interval "auto", float32), through `lyapunov_analysis_seeds`, which runs
many seeds' measurements in one vmapped call and returns for each seed what
`lyapunov_analysis(seed=s)` returns (tests/test_lyapunov_coverage.py checks that identity).
Cases:

- `fresh-adding`: a fresh 64-neuron ARU (seed 0) under the adding task (`--task adding`);
  truth: lambda_1 of long float64 runs (8 independent input sequences of `--truth-steps`
  steps, a quarter burnt, a QR every 25 steps); its own standard error is printed;
- `trained-adding`: the same after `--train-steps` of BPTT on the adding task;
- `quickstart`: `--model aru` under the constant drive 1 (the quick start), one fresh model per
  seed 0..ceil(reps/16)-1, all 16 exponents; truth ln|mu_i(J(h*))|, h* the fixed point the
  float32 trajectory settles to, refined in float64 (the eigenvalue moduli sorted descending);
- `rnn-zero`: `--model rnn --drive 0`: a fresh tanh RNN rests at h = 0, where its orthogonal
  W_hh gives 16 exponents of exactly 0: the `largest` and `sum of positive exponents` lines
  (issue item 8) against 0.

The table: quantity, nominal level, measured coverage with its 95% Clopper-Pearson interval,
median half-width, bias (mean estimate - truth), RMS error and the median of |error| / half-width
(0.34 for normal errors and a calibrated 95% width; well below: wider than needed, e.g. 0.1 is
about 3x too wide). Runs anywhere JAX runs; on a GPU
`--reps 200` of all cases takes a few minutes. Only jax, equinox, numpy, scipy and xarray
(dynlab's own dependencies) are needed.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from dynlab import experiment
from dynlab.analyses.lyapunov import lyapunov_replicates
from dynlab.analyses.lyapunov.model import lyapunov_analysis_seeds
from dynlab.analyses.state_map import protocol_inputs, state_map
from dynlab.analyses.protocol import Drive, TaskStream

CASES = ("fresh-adding", "trained-adding", "quickstart", "rnn-zero")


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    low = scipy.stats.beta.ppf(a, k, n - k + 1) if k > 0 else 0.0
    high = scipy.stats.beta.ppf(1 - a, k + 1, n - k) if k < n else 1.0
    return float(low), float(high)


def row(name: str, estimates, lows, highs, truth, level: float = 0.95) -> dict:
    est, low, high = (np.asarray(v, float).ravel() for v in (estimates, lows, highs))
    truth = np.broadcast_to(np.asarray(truth, float).ravel() if np.ndim(truth) else truth, est.shape)
    covered = (low <= truth) & (truth <= high)
    n, k = covered.size, int(covered.sum())
    half = (high - low) / 2
    err = est - truth
    rms = float(np.sqrt(np.mean(err**2)))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.median(np.abs(err) / half))
    return dict(quantity=name, nominal=level, n=n, coverage=k / n, ci=clopper_pearson(k, n), half=float(np.median(half)),
                bias=float(np.mean(err)), rms=rms, width_ratio=ratio)


def print_table(rows: list[dict]) -> None:
    print(f"\n{'quantity':58s} {'nominal':>7s} {'n':>5s} {'coverage':>8s} {'95% CP interval':>17s} "
          f"{'median half':>11s} {'bias':>10s} {'RMS error':>10s} {'med |err|/half':>14s}")
    for r in rows:
        print(f"{r['quantity']:58s} {r['nominal']:7.2f} {r['n']:5d} {r['coverage']:8.3f} "
              f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]   {r['half']:11.2e} {r['bias']:+10.2e} {r['rms']:10.2e} "
              f"{r['width_ratio']:14.2f}")


def long_float64_lambda(model, task, steps: int, runs: int = 8, seed: int = 12345) -> tuple[np.ndarray, np.ndarray]:
    """The exponents of long float64 runs under independent task inputs: (mean over runs, its SE)."""
    smap = state_map(model)
    key = jax.random.key(seed)
    inputs = [protocol_inputs(model, steps, task=task, key=jax.random.fold_in(key, r)) for r in range(runs)]
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *inputs)
    h0s = jnp.broadcast_to(smap.h0, (runs, 1, smap.dim))
    ds = lyapunov_replicates(smap.step, h0s, stacked, 16, burn_in=steps // 4, reortho_every=25, x64=True,
                             population="long float64 runs", key=key)
    per = ds.realisation_mean.values
    return per.mean(axis=0), per.std(axis=0, ddof=1) / math.sqrt(runs)


def adding_case(name: str, model, task, reps: int, truth_steps: int) -> list[dict]:
    t0 = time.time()
    truth, truth_se = long_float64_lambda(model, task, truth_steps)
    print(f"[{name}] truth lambda_1 = {truth[0]:+.7f} +- {truth_se[0]:.1e} (SE over 8 float64 runs of {truth_steps} "
          f"steps; {time.time() - t0:.0f} s)")
    t0 = time.time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sets = lyapunov_analysis_seeds(model, list(range(reps)), input=TaskStream(task))
    extended = sum(ds.attrs["burn_in_extended"] for ds in sets)
    print(f"[{name}] {reps} analyses in {time.time() - t0:.0f} s; {extended} repeated over twice the steps; "
          f"{sum('still drift' in str(w.message) for w in caught)} drift warnings; burn-in median "
          f"{np.median([ds.attrs['burn_in'] for ds in sets]):.0f} of {np.median([ds.attrs['steps_total'] for ds in sets]):.0f}")
    lam = np.array([ds["mean"].values[0] for ds in sets])
    low = np.array([ds.ci_low.values[0] for ds in sets])
    high = np.array([ds.ci_high.values[0] for ds in sets])
    rows = [row(f"{name}: lambda_1 vs long float64 runs", lam, low, high, truth[0])]
    # the printed `largest` line must be that same interval
    same = all(float(ds.largest_ci_low) == float(ds.ci_low[0]) for ds in sets)
    print(f"[{name}] `largest` line identical to exponent 1's interval in every analysis: {same}")
    return rows


def quickstart_case(reps: int) -> list[dict]:
    n_models = max(1, math.ceil(reps / 16))
    est, lows, highs, truths = [], [], [], []
    t0 = time.time()
    for m in range(n_models):
        exp = experiment.build({**experiment.default_config("aru", "adding"), "seed": m})
        model = exp.model
        (ds,) = lyapunov_analysis_seeds(model, [m], input=Drive(1.0))
        smap = state_map(model)
        with jax.enable_x64(True):
            u = (jnp.zeros((model.input_size,), jnp.float64), jnp.asarray(1.0, jnp.float64))
            step = jax.jit(lambda h: smap.step(h, u).astype(jnp.float64))
            h = jnp.asarray(_settle(smap, model), jnp.float64)
            h = jax.lax.scan(lambda h, _: (step(h), None), h, None, length=5000)[0]
            residual = float(jnp.abs(step(h) - h).max())
            mu = np.sort(np.log(np.abs(np.linalg.eigvals(np.asarray(jax.jacfwd(step)(h))))))[::-1][:16]
        if residual > 1e-10:
            print(f"[quickstart] model {m}: not a fixed point (residual {residual:.1e}); left out")
            continue
        est.append(ds["mean"].values)
        lows.append(ds.ci_low.values)
        highs.append(ds.ci_high.values)
        truths.append(mu)
    print(f"[quickstart] {n_models} models in {time.time() - t0:.0f} s")
    return [row(f"quickstart ({len(est)} models x 16): lambda_i vs ln|mu_i(J(h*))|", est, lows, highs, np.array(truths)),
            row("quickstart: lambda_1 alone", [e[0] for e in est], [v[0] for v in lows], [v[0] for v in highs],
                np.array([t[0] for t in truths]))]


def _settle(smap, model, steps: int = 4000):
    u = (jnp.zeros((steps, model.input_size)), jnp.ones((steps,)))
    return jax.lax.scan(lambda h, x: (smap.step(h, x).astype(h.dtype), None), smap.h0, u)[0]


def rnn_zero_case(reps: int) -> list[dict]:
    model = experiment.build(experiment.default_config("rnn", "adding")).model
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sets = lyapunov_analysis_seeds(model, list(range(reps)), input=Drive(0.0))
    print(f"[rnn-zero] {reps} analyses in {time.time() - t0:.0f} s")
    get = lambda v: np.array([float(ds[v]) for ds in sets])  # noqa: E731
    lam = np.array([ds["mean"].values for ds in sets])
    return [row("rnn at h=0 (exponents 0): all 16 lambda_i vs 0", lam, [ds.ci_low.values for ds in sets],
                [ds.ci_high.values for ds in sets], 0.0),
            row("rnn at h=0: `largest` line vs 0", get("largest_mean"), get("largest_ci_low"), get("largest_ci_high"), 0.0),
            row("rnn at h=0: sum of positive exponents vs 0", get("positive_sum_mean"), get("positive_sum_ci_low"),
                get("positive_sum_ci_high"), 0.0)]


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=200, help="repetitions (analyses) per case")
    parser.add_argument("--which", default=",".join(CASES), help=f"comma-separated subset of {', '.join(CASES)}")
    parser.add_argument("--train-steps", type=int, default=1000, help="BPTT steps for trained-adding")
    parser.add_argument("--truth-steps", type=int, default=40000, help="steps of each long float64 run")
    args = parser.parse_args(argv)
    which = [w.strip() for w in args.which.split(",") if w.strip()]
    unknown = set(which) - set(CASES)
    if unknown:
        parser.error(f"unknown case(s) {sorted(unknown)}; choose from {', '.join(CASES)}")
    print(f"JAX devices: {jax.devices()}")
    rows = []
    if "fresh-adding" in which:
        exp = experiment.build(experiment.default_config("aru", "adding"))
        rows += adding_case("fresh ARU, adding", exp.model, exp.task, args.reps, args.truth_steps)
    if "trained-adding" in which:
        from dynlab.train import train

        exp = experiment.build({**experiment.default_config("aru", "adding"), "train": {"steps": args.train_steps}})
        t0 = time.time()
        trained = train(exp).model
        print(f"[trained] {args.train_steps} BPTT steps in {time.time() - t0:.0f} s")
        rows += adding_case("trained ARU, adding", trained, exp.task, args.reps, args.truth_steps)
    if "quickstart" in which:
        rows += quickstart_case(args.reps)
    if "rnn-zero" in which:
        rows += rnn_zero_case(args.reps)
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()

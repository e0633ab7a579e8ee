"""One PC-through-time inference step against one BPTT forward + backward, timed on this machine.

    python benchmarks/pc_time.py [--units rnn,lstm,gru] [--lengths 100,1000] [--hidden 128] [--batch 16]

For every unit and sequence length T, on the same model and batch (the adding task's inputs,
float32), all jit-compiled and measured in this one process (best of 5 after a warm-up):

* **BPTT**: the loss and its parameter gradient through the model's ``lax.scan`` over time
  ([`dynlab.rules.pc_time.loss`][] — the objective PC's energy shares);
* **PC step (parallel)**: one inference step of [`dynlab.rules.pc_time`][] — the energy and its
  gradient with respect to all activities, one ``vmap`` of ``model.step`` over samples and steps,
  plus the SGD update of the activities;
* **PC step (scan)**: the same step with the predictions computed by a ``lax.scan`` over time
  instead of the ``vmap`` (the comparator for what evaluating all steps in parallel buys).

Prints the times and the ratios PC/BPTT. A PC training step costs one such inference step per
inference iteration plus one weight-gradient evaluation (about one more step), so with K
iterations it costs about (K + 1) x the printed ratio x BPTT.

**Time to convergence** (the table printed first): whole inferences of [`dynlab.rules.pc_inference`][] on the
``cross-pc-alignment`` units ([`dynlab.scenarios.every_unit.model_section`][] at ``--width``), the
adding task at ``--conv-lengths``, batch ``--batch``, float32, all under the same
[`Criterion`][dynlab.rules.pc_inference.Criterion] (rtol 1e-4 of the initial gradient norm, relative
energy change 1e-6): heavy-ball momentum (β = 0.1, at most ``--momentum-steps``) against Gauss–Newton
and Levenberg–Marquardt (at most 100 steps) and L-BFGS (at most 300) in the error coordinates, and
L-BFGS continued over smoothed energies ([`Smoothed`][dynlab.rules.pc_inference.Smoothed], widths
1e-2 then 1e-3, patience 50, at most 300 steps each; the exact attempt first), each the best of 2
compiled runs. Prints the steps, whether each converged, the milliseconds, and
momentum/Gauss–Newton and momentum/L-BFGS where both converged; for units where momentum does not converge (the slow ones) the cost per unit is the
milliseconds of each method's whole budget and per step, with the $g/g_0$ each reached.

Measured (``--tables convergence --conv-units elm,elm-net,sith-rnn,aru --conv-lengths 20,50``, one
run, 2-core CPU with a second job running beside it part of the time):

| unit, T | momentum (3000) | L-BFGS (300) | L-BFGS + smoothing |
|---|---|---|---|
| elm 20 / 50 | no, 416 / 799 ms | no, 263 / 567 ms | **yes**, 131 / 144 steps, 122 / 299 ms |
| elm-net 20 / 50 | no, 6.4 / 18.1 s | no, 3.2 / 10.7 s | **yes**, 139 / 128 steps, 1.6 / 5.6 s |
| sith-rnn 20 / 50 | no, 9.5 / 22.5 s | no / yes (92 steps), 4.6 / 3.3 s | no (g/g0 1e-2 / 6e-3), 7.2 / 9.2 s |
| aru 20 / 50 | yes, 164 / 160 steps, 97 / 333 ms | yes, 7 / 6 steps, 55 / 151 ms | = L-BFGS (exact converges) |

So on the ELM neuron and network, smoothing turns budgets that end unconverged into converged
solves at 0.46-0.53x the unconverged L-BFGS budget's time. On the ARU the ratios momentum / new
method are 1.8 / 2.4 (Gauss–Newton) and 1.8 / 2.2 (L-BFGS) at T = 20 / 50: below the issue's 3x,
because momentum needs only ~160 cheap parallel steps there, while one L-BFGS step (a forward and a
backward scan over time, plus the criterion's own unroll) costs about 13 of them. On SITH-RNN at
T = 50 the exact L-BFGS solve converges (92 steps) where the smoothed one, whose exact attempt gives
up after 50 steps without halving the gradient (``patience``), does not.

Measured on the units where both converge (``--conv-units aru,gru,lstm,blockdiag``, one run, nothing
else running; ratios momentum / new method):

| unit, T | momentum | Gauss–Newton | L-BFGS | momentum/GN | momentum/L-BFGS |
|---|---|---|---|---|---|
| aru 20 / 50 | 164 / 160 steps, 79 / 177 ms | 9 / 8 steps, 42 / 127 ms | 7 / 6 steps, 72 / 131 ms | 1.9 / 1.4 | 1.1 / 1.4 |
| gru 20 / 50 | 167 / 166, 35 / 60 ms | 4 / 4, 8.2 / 26 ms | 4 / 4, 5.0 / 15 ms | 4.2 / 2.3 | 7.0 / 4.1 |
| lstm 20 / 50 | 165 / 163, 50 / 79 ms | 3 / 3, 11 / 29 ms | 3 / 3, 7.8 / 15 ms | 4.5 / 2.7 | 6.4 / 5.4 |
| blockdiag 20 / 50 | 163 / 161, 11 / 52 ms | 4 / 3, 2.5 / 5.3 ms | 4 / 4, 3.4 / 9.2 ms | 4.3 / 9.8 | 3.2 / 5.7 |

So L-BFGS is 3.2-7.0x faster than momentum on the GRU, LSTM and block-diagonal RNN, and only
1.1-1.9x on the ARU. Why the ARU, measured (width 64, T = 50, batch 16): its state per step is
576 numbers (h and the controller's 8 states per neuron) against the GRU's 64, and L-BFGS keeps
2 x ``history_length`` vectors of that size per sample and reads them all in each step's two-loop
recursion. The time of 6 steps grows with the history: 56 / 137 / 314 ms at 2 / 10 / 30, while a
forward and backward scan of the ARU costs 1.7 ms and the parallel energy gradient (momentum's
step) 1.2 ms. Solving all samples as one problem (no ``vmap`` over samples) is no cheaper: 10
steps took 186 ms at T = 50.
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import dynlab
from dynlab import experiment
from dynlab.rules import pc, pc_inference, pc_time
from dynlab.scenarios.every_unit import UNITS, model_section


def best_of(fn, repeats=5):
    jax.block_until_ready(fn())  # warm-up (compile)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return min(times)


def scanned_predictions(model, z, x):
    """The predictions of [`dynlab.rules.pc_time.predictions`][], computed step after step."""
    prev = jax.tree_util.tree_map(lambda l: jnp.swapaxes(l, 0, 1), pc_time.previous_activities(model, z))  # [T, P, ...]
    step = jax.vmap(lambda s, xt: model.step(s, xt))
    pred, ys = jax.lax.map(lambda inputs: step(*inputs), (prev, jnp.swapaxes(x, 0, 1)))
    return jax.tree_util.tree_map(lambda l: jnp.swapaxes(l, 0, 1), pred), jnp.swapaxes(ys, 0, 1)


def scanned_energies(model, z, x, y, mask):
    pred, ys = scanned_predictions(model, z, x)
    errors = jax.tree_util.tree_map(jnp.subtract, z, pred)
    squares = sum(jnp.sum(e**2, axis=tuple(range(1, e.ndim))) for e in jax.tree_util.tree_leaves(errors))
    return 0.5 * squares + pc_time.output_terms(ys, y, mask, "mse")


def inference_step(energies, beta=0.1):
    """One SGD step on the activities of the per-sample energy ``energies(model, z, x, y, mask)``."""
    opt = optax.sgd(beta)

    @eqx.filter_jit
    def step(model, z, x, y, mask):
        _, grad, g = pc.energy_gradient(lambda z: energies(model, z, x, y, mask), z, sample_axis=0)
        updates, _ = opt.update(grad, opt.init(z), z)
        return optax.apply_updates(z, updates), g

    return step


def time_to_convergence(units, width, lengths, batch, momentum_steps):
    """The second table (module docstring)."""
    criterion = dict(rtol=1e-4, ftol=1e-6)
    methods = {
        "momentum": pc_inference.Descent(optax.sgd(0.1, momentum=0.9),
                                         pc_inference.Criterion(max_steps=momentum_steps, **criterion)),
        "gauss-newton": pc_inference.gauss_newton(pc_inference.Criterion(max_steps=100, **criterion)),
        "levenberg-marquardt": pc_inference.levenberg_marquardt(pc_inference.Criterion(max_steps=100, **criterion)),
        "lbfgs": pc_inference.lbfgs(pc_inference.Criterion(max_steps=300, **criterion)),
        "lbfgs+smoothing": pc_inference.Smoothed(pc_inference.lbfgs(pc_inference.Criterion(max_steps=300, **criterion),
                                                                    patience=50)),
    }
    run = eqx.filter_jit(lambda method, model, x, y, mask: method(pc_time.problem(model, x, y, mask)))
    print(f"\ntime to convergence: width {width}, batch {batch}, adding task, float32; criterion g <= 1e-4 g0 and "
          "|dF|/F <= 1e-6 (steps, converged, ms; 'g/g0' where not converged)")
    print(f"{'unit':10s} {'T':>3s} " + " ".join(f"{name:>26s}" for name in methods)
          + f" {'momentum/GN':>12s} {'momentum/L-BFGS':>16s}")
    for unit in units:
        for length in lengths:
            exp = experiment.build({"seed": 0, "model": model_section(unit, width),
                                    "task": {"name": "adding", "length": length}})
            x, y, mask = exp.task.batch(jax.random.key(0), batch, "train")
            cells, ms = [], {}
            for name, method in methods.items():
                inf = run(method, exp.model, x, y, mask)
                ms[name] = 1e3 * best_of(lambda: run(method, exp.model, x, y, mask).z, repeats=2)
                steps, ok = int(inf.steps), bool(inf.converged)
                ratio = float(inf.grad_norm / inf.grad_norm0)
                tag = "yes" if ok else f"no {ratio:.0e}"
                cells.append(f"{steps:5d} {tag:>9s} {ms[name]:8.1f}ms")
                ms[name, "ok"] = ok
            ratios = []
            for name, width_ in (("gauss-newton", 12), ("lbfgs", 16)):
                both = ms["momentum", "ok"] and ms[name, "ok"]
                ratios.append(f"{ms['momentum'] / ms[name]:{width_}.1f}" if both else f"{'-':>{width_}s}")
            print(f"{unit:10s} {length:3d} " + " ".join(f"{c:>26s}" for c in cells) + " " + " ".join(ratios), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", default="rnn,lstm,gru")
    parser.add_argument("--lengths", default="100,1000")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--conv-units", default=",".join(UNITS), help="units of the time-to-convergence table")
    parser.add_argument("--width", type=int, default=64, help="their width (cross-pc-alignment's sizes)")
    parser.add_argument("--conv-lengths", default="20,50")
    parser.add_argument("--momentum-steps", type=int, default=3000)
    parser.add_argument("--tables", default="step,convergence", help="which tables to print")
    args = parser.parse_args()
    tables = args.tables.split(",")
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; float32")
    if "convergence" in tables:
        time_to_convergence(args.conv_units.split(","), args.width, [int(t) for t in args.conv_lengths.split(",")],
                            args.batch, args.momentum_steps)
    if "step" not in tables:
        return
    print(f"\none inference step against BPTT: hidden {args.hidden}, batch {args.batch}")
    print(f"{'unit':6s} {'T':>5s} {'BPTT ms':>9s} {'PC step ms':>11s} {'PC/BPTT':>8s} {'PC scan ms':>11s} "
          f"{'scan/BPTT':>9s} {'scan/parallel':>13s}")
    bptt = eqx.filter_jit(eqx.filter_value_and_grad(pc_time.loss))
    parallel = inference_step(lambda m, z, x, y, mask: pc_time.sample_energies(m, z, x, y, mask, "mse"))
    scanned = inference_step(scanned_energies)
    for unit in args.units.split(","):
        model = dynlab.build("model", unit=unit, input_size=2, output_size=1, key=jax.random.key(0), hidden=args.hidden)
        for length in map(int, args.lengths.split(",")):
            x, y, mask = dynlab.build("task", "adding", length=length).batch(jax.random.key(1), args.batch)
            z = pc_time.initial_activities(model, x)
            z_par, _ = parallel(model, z, x, y, mask)
            z_seq, _ = scanned(model, z, x, y, mask)
            diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree_util.tree_leaves(z_par),
                                                                       jax.tree_util.tree_leaves(z_seq)))
            assert diff < 1e-5, f"the parallel and scanned steps disagree by {diff}"
            t_bptt = best_of(lambda: bptt(model, x, y, mask, "mse"))
            t_par = best_of(lambda: parallel(model, z, x, y, mask))
            t_seq = best_of(lambda: scanned(model, z, x, y, mask))
            print(f"{unit:6s} {length:5d} {1e3 * t_bptt:9.2f} {1e3 * t_par:11.2f} {t_par / t_bptt:8.2f} "
                  f"{1e3 * t_seq:11.2f} {t_seq / t_bptt:9.2f} {t_seq / t_par:13.2f}", flush=True)


if __name__ == "__main__":
    main()

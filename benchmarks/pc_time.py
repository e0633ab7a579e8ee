"""One PC-through-time inference step against one BPTT forward + backward, timed on this machine.

    python benchmarks/pc_time.py [--units rnn,lstm,gru] [--lengths 100,1000] [--hidden 128] [--batch 16]

For every unit and sequence length T, on the same model and batch (the adding task's inputs,
float32), all jit-compiled and measured in this one process (best of 5 after a warm-up):

* **BPTT**: the loss and its parameter gradient through the model's ``lax.scan`` over time
  (:func:`dynlab.rules.pc_time.loss` — the objective PC's energy shares);
* **PC step (parallel)**: one inference step of :mod:`dynlab.rules.pc_time` — the energy and its
  gradient with respect to all activities, one ``vmap`` of ``model.step`` over samples and steps,
  plus the SGD update of the activities;
* **PC step (scan)**: the same step with the predictions computed by a ``lax.scan`` over time
  instead of the ``vmap`` (the comparator for what evaluating all steps in parallel buys).

Prints the times and the ratios PC/BPTT. A PC training step costs one such inference step per
inference iteration plus one weight-gradient evaluation (about one more step), so with K
iterations it costs about (K + 1) x the printed ratio x BPTT.
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import dynlab
from dynlab.rules import pc, pc_time


def best_of(fn, repeats=5):
    jax.block_until_ready(fn())  # warm-up (compile)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return min(times)


def scanned_predictions(model, z, x):
    """The predictions of :func:`dynlab.rules.pc_time.predictions`, computed step after step."""
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", default="rnn,lstm,gru")
    parser.add_argument("--lengths", default="100,1000")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; hidden {args.hidden}, batch {args.batch}, float32")
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

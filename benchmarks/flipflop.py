"""The flip-flop, one run: batched dynlab training against a plain PyTorch loop of the same GRU,
and the fixed points of the trained network (the acceptance form of `tests/test_flipflop_truth.py`).

**Speed.** ``--seeds`` networks of the same size (a GRU of ``--hidden`` units with a linear
read-out, Adam at dynlab's default learning rate, batch 64, trials of 64 steps, 3 bits) are
trained for ``--steps`` steps: dynlab with ``train_seeds`` (one ``jax.vmap``-ed, ``lax.scan``-ned
computation over seeds, chunks of steps compiled once), and PyTorch as its users write it, one
network after another, each step a ``torch.nn.GRU`` forward over the batch (its fused C++
kernel), MSE, backward and ``torch.optim.Adam``, on batches made by the same task definition in
NumPy. Both are timed after one warm-up (compilation) step; PyTorch with its default intra-op
threads and with one (on a busy machine its thread pool's contention can slow small ops ~10x), the
faster counting; the ratio is PyTorch's time per network-step over dynlab's. Needs the ``bench`` extra (torch 2.13.0).

**Truth.** One network of the batch (seed 0, ``--truth-steps`` of dynlab's default training) is
searched for fixed points at zero input: a trained 3-bit flip-flop must have 8 stable points, one
at each corner of the output cube (Sussillo & Barak 2013), which is printed with the saddles.

Measured (2-core CPU, idle but for this, ``--steps 100``, 2026-11-28), per network-step after
compilation: with ``--seeds 4`` dynlab 9.84 ms, PyTorch 12.08 ms (1 thread; 12.66 with 2): **1.23x**
(a second run: 9.56 against 11.78, 1.23x);
with ``--seeds 1`` dynlab 6.75 ms, PyTorch 11.67 ms: **1.73x** (vmapping seeds costs more per
network on 2 CPU cores than it saves). dynlab's first call, compilation included: 0.62x and
0.33x. (An earlier version of this script timed a chunk length that had not been compiled yet and
reported 0.7x: that was compilation.) The ceiling, ``minimal_jax_seconds``: a GRU written for this
benchmark alone (gates fused into one matrix product, the input projection out of the loop,
seeds vmapped, Adam and clipping from optax) takes 9.84 and 10.19 ms per network-step at 4 seeds
in two runs, the same as dynlab's. So what is left is the matrix products themselves: ``torch.nn.GRU`` runs the whole
sequence in one fused C++ kernel, and issue #35's "at least 5x" is not reachable on these cores.
Truth: held-out bit accuracy 1.0000 after 1,500 steps; at zero input 8 stable points,
one at each corner, 7 saddles and 3 marginal points near the visited states, and 233 minima far
beyond them (saturated gates).

Run: ``python benchmarks/flipflop.py`` (a few minutes on 2 cores).
"""

import argparse
import itertools
import time

import jax
import jax.numpy as jnp
import numpy as np

from dynlab import experiment
from dynlab.analyses.fixed_points import fixed_points_analysis
from dynlab.train import train_seeds
from dynlab.analyses.protocol import TaskStream


def config(seed, hidden, steps):
    return {"seed": seed, "model": {"unit": "gru", "hidden": hidden}, "task": {"name": "flipflop"},
            "rule": {"name": "bptt"}, "train": {"steps": steps, "eval_every": steps, "log_every": steps}}


def dynlab_seconds(seeds, hidden, steps):
    """``(seconds of the first call, seconds of a second, its results)``: the first compiles the
    chunk of ``steps`` steps (its length is part of the program), the second only runs it."""
    times = []
    for _ in range(2):
        runs = [experiment.build(config(s, hidden, steps)) for s in range(seeds)]
        start = time.perf_counter()
        results = train_seeds(runs)
        times.append(time.perf_counter() - start)
    return times[0], times[1], results


def minimal_jax_seconds(seeds, hidden, steps, task):
    """Seconds (after compilation) of ``steps`` Adam steps of ``seeds`` GRUs written for this
    benchmark alone: the ceiling of JAX on these cores (module docstring)."""
    import optax

    batches = [task.batch(jax.random.key(i), 64)[:2] for i in range(steps)]
    xs, ys = jnp.stack([b[0] for b in batches]), jnp.stack([b[1] for b in batches])

    def init(key):
        k, s = jax.random.split(key, 3), 1 / np.sqrt(hidden)
        return {"wi": jax.random.uniform(k[0], (3, 3 * hidden), minval=-s, maxval=s), "b": jnp.zeros(3 * hidden),
                "wh": jax.random.uniform(k[1], (hidden, 3 * hidden), minval=-s, maxval=s),
                "wo": jax.random.uniform(k[2], (hidden, 3), minval=-s, maxval=s), "bo": jnp.zeros(3)}

    def loss(p, x, y):
        def step(h, u):
            hh = h @ p["wh"]
            r, z = jax.nn.sigmoid(u[:, :hidden] + hh[:, :hidden]), jax.nn.sigmoid(u[:, hidden:-hidden] + hh[:, hidden:-hidden])
            h = (1 - z) * jnp.tanh(u[:, -hidden:] + r * hh[:, -hidden:]) + z * h
            return h, h
        _, hs = jax.lax.scan(step, jnp.zeros((x.shape[0], hidden)), jnp.swapaxes(x @ p["wi"] + p["b"], 0, 1))
        return jnp.mean((jnp.swapaxes(hs, 0, 1) @ p["wo"] + p["bo"] - y) ** 2)

    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(3e-3))

    def one(p, s, x, y):
        updates, s = opt.update(jax.grad(loss)(p, x, y), s, p)
        return optax.apply_updates(p, updates), s

    @jax.jit
    def run(ps, ss):
        body = lambda c, xy: (jax.vmap(one, in_axes=(0, 0, None, None))(*c, *xy), None)  # noqa: E731
        return jax.lax.scan(body, (ps, ss), (xs, ys))[0]

    ps = jax.vmap(init)(jax.random.split(jax.random.key(0), seeds))
    ss = jax.vmap(opt.init)(ps)
    jax.block_until_ready(run(ps, ss))                           # compiles
    start = time.perf_counter()
    jax.block_until_ready(run(ps, ss))
    return time.perf_counter() - start


def torch_seconds(seeds, hidden, steps, task, threads=None):
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    batches = [tuple(np.asarray(a) for a in task.batch(jax.random.key(i), 64)[:2]) for i in range(steps + 1)]
    total = 0.0
    for seed in range(seeds):
        torch.manual_seed(seed)
        gru, readout = torch.nn.GRU(3, hidden, batch_first=True), torch.nn.Linear(hidden, 3)
        params = list(gru.parameters()) + list(readout.parameters())
        opt = torch.optim.Adam(params, lr=3e-3)

        def step(x, y):
            opt.zero_grad()
            out, _ = gru(torch.from_numpy(x.copy()))
            loss = torch.mean((readout(out) - torch.from_numpy(y.copy())) ** 2)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            return loss.item()

        step(*batches[0])                                        # warm-up
        start = time.perf_counter()
        for x, y in batches[1:]:
            loss = step(x, y)
        total += time.perf_counter() - start
    return total, loss


def truth(model, task):
    ds = fixed_points_analysis(model, steps=1000, burn_in=100, ics=128, input=TaskStream(task), at="zero")
    classes = ds.stability.values
    stable = ds.points.values[(classes == "stable") & ~ds.beyond_visited.values]
    readouts = np.array([np.asarray(model.readout(jnp.asarray(p, jnp.float32))) for p in stable])
    corners = {tuple(np.sign(r).astype(int)) for r in readouts if np.all(np.abs(np.abs(r) - 1) < 0.2)}
    beyond = ds.beyond_visited.values
    print(f"fixed points at zero input near the visited states: {int((classes[~beyond] == 'stable').sum())} stable, "
          f"{int((classes[~beyond] == 'saddle').sum())} saddle(s), {int((classes[~beyond] == 'marginal').sum())} "
          f"marginal; {int(beyond.sum())} more far beyond the visited states")
    print(f"corners of the output cube with a stable point: {len(corners)} of 8"
          f"{' (all)' if corners == set(itertools.product((-1, 1), repeat=3)) else ''}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--truth-steps", type=int, default=1500)
    args = parser.parse_args()
    task = experiment.build(config(0, args.hidden, 1)).task
    t_first, t_jax, _ = dynlab_seconds(args.seeds, args.hidden, args.steps)
    import torch

    default_threads = torch.get_num_threads()
    t_default, _ = torch_seconds(args.seeds, args.hidden, args.steps, task)
    t_one, _ = torch_seconds(args.seeds, args.hidden, args.steps, task, threads=1)
    torch.set_num_threads(default_threads)
    t_torch = min(t_default, t_one)
    t_min = minimal_jax_seconds(args.seeds, args.hidden, args.steps, task)
    per = lambda t: 1e3 * t / (args.seeds * args.steps)  # noqa: E731
    print(f"{args.seeds} GRU-{args.hidden} networks x {args.steps} steps (batch 64, T = 64, 3 bits)")
    print(f"PyTorch loop: {per(t_default):.2f} ms per network-step with {default_threads} threads, {per(t_one):.2f} ms with 1")
    print(f"dynlab train_seeds: {per(t_jax):.2f} ms per network-step; PyTorch (the faster): {per(t_torch):.2f} ms; "
          f"ratio {t_torch / t_jax:.2f}x (dynlab's first call, compilation included: {per(t_first):.2f} ms, "
          f"ratio {t_torch / t_first:.2f}x)")
    print(f"the ceiling, a minimal JAX GRU written for this benchmark: {per(t_min):.2f} ms per network-step")
    result = train_seeds([experiment.build(config(0, args.hidden, args.truth_steps))])[0]
    print(f"seed 0 after {args.truth_steps} steps: held-out bit accuracy "
          f"{float(result.metrics['eval_sign_accuracy'].values[-1]):.4f}")
    truth(result.model, task)


if __name__ == "__main__":
    main()

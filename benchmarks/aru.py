r"""ARUN training throughput at the paper's size, against a static RNN+γ of the same width.

Paper scale (Geadah et al.; notes §1): psMNIST $T = 784$, $N_h = 400$, $N_g = 50$, batch 64. One
training step is BPTT through the whole sequence plus an Adam update (gradient clipping 1), the
trainer's work per step; inputs are random pixels (throughput does not depend on the data, and
the benchmark needs no data files). Comparator, same process: ``rnn-gamma`` (heterogeneous
static $(n, s)$) with the same $N_h$ — the ARUN minus its controllers.

Expected cost ratio from FLOPs per time step and sample (multiply–add = 2 FLOPs, forward; the
backward pass scales both alike):

$$ \text{RNN}+\gamma:\ 2N_h^2 + 2N_h N_x, \qquad
   \text{ARUN}:\ 2N_h^2 + 2N_h N_x + \underbrace{2N_h N_g^2 + N_h N_g + 4 N_h N_g}_{\text{controllers}} $$

i.e. about $1 + N_g^2/N_h$, 7.5 at the paper's size. The controllers' $N_h N_g$ tanh evaluations
per step come on top, and on a CPU one tanh costs as much time as tens of FLOPs of a matmul; so the
script also measures, in the same process, the time of one tanh and of one $\gamma$ (softplus +
sigmoid) per element in units of the matmul's time per FLOP, and prints the cost ratio with those
elementwise costs counted (tanh: $N_h N_g$ per step for the ARUN; $\gamma$: $N_h$ for both). Memory and remat: storing every step's controller intermediates for BPTT takes a few times
$T B N_h N_g \cdot 4$ bytes (~15 GB at batch 64), and the step is then bound by writing and
re-reading them. The ARU's BPTT is therefore checkpointed by default (``model.remat``,
[`dynlab.models.checkpointed_scan`][]: the state every $\sqrt T$ steps, each segment recomputed
in the backward pass; well under 1 GB); the row "ARUN, no remat" times plain BPTT in the same run.

Measured (2-core CPU, batch 64, paper size): RNN+γ 1.01 s/step, ARUN 12.7 s/step checkpointed
and 18.0 s/step plain; ratio 12.6x against 7.55x from FLOPs and 10.4x with the elementwise costs
counted (tanh = 94 matmul FLOPs here). The controllers' work is elementwise passes over
$[B, N_h, N_g]$ arrays (tanh and its derivative, the read-outs' outer products) and matmuls with
inner dimension $N_g = 50$, which is why the ratio exceeds the FLOP count.

Where the time goes (2026-11-23, T = 196, same sizes otherwise): ratio 11.5x (7.55x FLOPs, 12.3x
with tanh = 140 matmul FLOPs). The ARUN's throughput per sample hardly depends on the batch
(25.6 / 25.0 / 23.6 samples/s at batch 8 / 16 / 64) while the RNN+γ's grows with it
(237 / 201 / 273), so the ratio is 9.3x / 8.0x / 11.5x: the controllers' per-step state,
$B N_h N_g$ floats (5 MB at batch 64), does not fit in a core's 1 MB L2 cache, the RNN+γ's does.
In a controller-only scan the backward pass costs 10x the forward (13.4 vs 1.3 ms per time
step); a hand-written VJP of the controller step saves 8% (12.3 ms), the weight-gradient
$g^\top \delta$ (contraction over $B N_h = 25{,}600$) runs at ~70 GFLOP/s, and neither XLA's
XNNPACK/oneDNN paths nor keeping freed memory mapped (glibc ``MALLOC_*``) changed the train
step. Run: ``python benchmarks/aru.py [--steps 3] [--batch 64] [--hidden 400] [--n-g 50]``.
"""

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp


def train_step_time(unit: str, hidden: int, length: int, batch: int, steps: int, **config) -> tuple[float, float]:
    """``(compile + 2 warm-up steps seconds, mean seconds per later step)`` of BPTT + Adam on ``unit``."""
    import dynlab
    from dynlab.train import TrainConfig

    model = dynlab.build("model", unit=unit, input_size=1, output_size=10, key=jax.random.key(0), hidden=hidden, **config)
    rule = dynlab.build("rule", "bptt", loss="ce_last")
    optimizer = TrainConfig(lr=1e-4).optimizer_fn()
    params, static = eqx.partition(model, eqx.is_inexact_array)
    opt_state = optimizer.init(params)

    @eqx.filter_jit
    def step(params, opt_state, key):
        k_x, k_y = jax.random.split(key)
        x = jax.random.uniform(k_x, (batch, length, 1))
        y = jax.random.randint(k_y, (batch,), 0, 10)
        mask = jnp.zeros((batch, length)).at[:, -1].set(1.0)
        grads, metrics = rule.grads(eqx.combine(params, static), (x, y, mask), key)
        updates, opt_state = optimizer.update(eqx.filter(grads, eqx.is_inexact_array), opt_state, params)
        return eqx.apply_updates(params, updates), opt_state, metrics["loss"]

    t0 = time.perf_counter()
    for i in range(2):  # the first compiles; the second would expose a retrace (e.g. a weak-typed leaf)
        params, opt_state, loss = step(params, opt_state, jax.random.key(1000 + i))
    loss.block_until_ready()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(steps):
        params, opt_state, loss = step(params, opt_state, jax.random.key(i + 1))
    loss.block_until_ready()
    return first, (time.perf_counter() - t0) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per model (after the compiling one)")
    parser.add_argument("--hidden", type=int, default=400)
    parser.add_argument("--n-g", type=int, default=50)
    parser.add_argument("--length", type=int, default=784)
    parser.add_argument("--batch", type=int, default=64)
    a = parser.parse_args()
    H, G, T, B = a.hidden, a.n_g, a.length, a.batch
    print(f"T = {T}, N_h = {H}, N_g = {G}, batch {B}, {a.steps} timed steps each, on {jax.devices()[0].platform}")
    rows = {}
    for name, unit, config in (("RNN+gamma", "rnn-gamma", {}), ("ARUN", "aru", {"n_g": G}),
                               ("ARUN, no remat", "aru", {"n_g": G, "remat": False})):
        first, per = train_step_time(unit, H, T, B, a.steps, **config)
        rows[name] = per
        print(f"{name:<15} compile + 2 steps {first:7.1f} s   {per:8.3f} s/step   {B / per:8.1f} samples/s")
    flops_static = 2 * H * H + 2 * H
    flops_aru = flops_static + 2 * H * G * G + H * G + 4 * H * G
    measured = rows["ARUN"] / rows["RNN+gamma"]
    print(f"ARUN / RNN+gamma time per step: measured {measured:.2f}x, "
          f"expected from FLOPs {flops_aru / flops_static:.2f}x "
          f"({flops_aru / 1e6:.2f} vs {flops_static / 1e6:.2f} MFLOP per time step and sample, forward)")
    c_tanh, c_gamma = elementwise_costs(B * H, G)
    cost_static = flops_static + H * c_gamma
    cost_aru = flops_aru + H * c_gamma + H * G * c_tanh
    print(f"elementwise cost measured here: one tanh = {c_tanh:.0f} matmul FLOPs, one gamma = {c_gamma:.0f}; "
          f"expected ratio with them counted {cost_aru / cost_static:.2f}x (measured {measured:.2f}x)")


def elementwise_costs(rows: int, width: int, reps: int = 20) -> tuple[float, float]:
    """Time per element of ``tanh`` and of ``gamma`` in units of the time per FLOP of the
    controller-shaped matmul ``[rows, width] @ [width, width]``, all measured here."""
    from dynlab.units.aru import gamma

    key = jax.random.key(0)
    z = jax.random.normal(key, (rows, width))
    w = jax.random.normal(key, (width, width)) / width**0.5
    n, s = 5.0 + jnp.zeros_like(z), jnp.zeros_like(z)

    def seconds(f, x):
        f = jax.jit(f)
        f(x).block_until_ready()
        t0 = time.perf_counter()
        for _ in range(reps):
            out = f(x)
        out.block_until_ready()
        return (time.perf_counter() - t0) / reps

    per_flop = seconds(lambda y: y @ w, z) / (2 * rows * width * width)
    per_tanh = seconds(jnp.tanh, z) / z.size
    per_gamma = seconds(lambda y: gamma(y, n, s), z) / z.size
    return per_tanh / per_flop, per_gamma / per_flop


if __name__ == "__main__":
    main()

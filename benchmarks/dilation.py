"""Evaluation of the diagonal networks on the 9 sequences at dilation 3^6 (59,049 steps).

Three implementations in the same run, final logits compared:

* loop (the straightforward comparator): a Python loop over the 9 sequences, each a jitted
  ``lax.scan`` of the one-step Cell over all 59,049 steps;
* batched scan (what ``accuracy_vs_dilation`` uses by default): the same scan with the 9
  sequences batched by ``vmap`` (Toeplitz read-out as a 7-tap band);
* time-parallel: the layer-stack ``sequence`` path (chunked diagonal scans with
  ``lax.associative_scan`` over chunk ends, feature mixing moved to the layer input, one GEMM
  read-out), one sequence at a time — meant for accelerators.

Measured (2 cores, 2026-11-23, two runs, τ windows shifted so ``n_taus`` stays 50): Nets 3/4 loop
5.8–6.1 s, batched scan 3.4–3.6 s, time-parallel 2.4–2.5 s; SITH-RNN loop 3.1 s, batched scan
4.3–4.4 s, time-parallel 2.5–2.6 s. All under the 10 s target; the time-parallel path is the fastest
here for the diagonal nets.

Run: ``python benchmarks/dilation.py``.
"""

import time

import jax
import jax.numpy as jnp

import dynlab
from dynlab.analyses.trw import extended_model, final_logits
from dynlab.tasks.hierarchical import HierarchicalLanguageTask


def timed(f, *args):
    jax.block_until_ready(f(*args))  # compile
    t0 = time.perf_counter()
    out = jax.block_until_ready(f(*args))
    return time.perf_counter() - t0, out


def main(m: int = 6):
    xs = jnp.asarray(HierarchicalLanguageTask().inputs(m))
    print(f"inputs: 9 sequences x {xs.shape[1]:,} steps (dilation 3^{m}, pulse mode)")
    one = jax.jit(lambda mod, x: final_logits(mod, x, "scan"))
    batched = jax.jit(lambda mod, xs: jax.vmap(lambda x: final_logits(mod, x, "scan"))(xs))
    parallel = jax.jit(lambda mod, xs: jax.lax.map(lambda x: final_logits(mod, x, "sequence"), xs))
    for unit in ("rnn-diag-uniform", "rnn-diag-geometric", "sith-rnn"):
        model = dynlab.build("model", unit=unit, input_size=9, output_size=9, key=jax.random.key(0))
        if unit == "sith-rnn":
            model = extended_model(model, 3**m)
        jax.block_until_ready(one(model, xs[0]))
        t0 = time.perf_counter()
        y_loop = jnp.stack([jax.block_until_ready(one(model, x)) for x in xs])
        t_loop = time.perf_counter() - t0
        t_b, y_b = timed(batched, model, xs)
        t_p, y_p = timed(parallel, model, xs)
        scale = float(jnp.abs(y_loop).max())
        print(f"{unit:<19} n_taus {model.cells[0].n_taus:>3}: loop {t_loop:6.2f} s | batched scan {t_b:6.2f} s "
              f"({t_loop / t_b:4.1f}x) | time-parallel {t_p:6.2f} s ({t_loop / t_p:4.1f}x) | max rel. diff "
              f"{float(jnp.abs(y_b - y_loop).max()) / scale:.1e}, {float(jnp.abs(y_p - y_loop).max()) / scale:.1e}")


if __name__ == "__main__":
    main()

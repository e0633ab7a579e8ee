"""Full TRW analysis (200 shuffles x 7 scales x 4 layers) of a trained SITH-RNN.

Fast path: ``trw_analysis`` (all shuffles batched under ``vmap`` with a scan of the Cell's
step, recurrence-matrix correlations by the Gram identity, one compilation for all scales).
Comparator, same run: the straightforward implementation — a Python loop over scales and
shuffles, each running the jitted model on the scrambled stream (after the intact stream as
warm-up, like the analysis' default) and correlating the explicit 729 x 729 recurrence
matrices with NumPy; it is timed on ``LOOP_SHUFFLES`` shuffles per scale and
extrapolated linearly to 200 (printed as such). Run: ``python benchmarks/trw.py``.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

LOOP_SHUFFLES = 5

def main():
    from dynlab.analyses import trw
    from dynlab.scenarios.sith_trw import build
    from dynlab.tasks.hierarchical import HierarchicalLanguageTask
    from dynlab.train import train

    t0 = time.perf_counter()
    model = train(build("sith-rnn", 0, 200)).model
    print(f"trained SITH-RNN (200 steps) in {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    ds = trw.trw_analysis(model, n_shuffle=200)
    t_fast = time.perf_counter() - t0
    print(f"fast TRW: 200 shuffles x 7 scales x 4 layers in {t_fast:.1f} s (compilation included); "
          f"log3 s50 per layer {np.round(ds.log3_s50.values, 2)}")

    x = jnp.asarray(HierarchicalLanguageTask().stream())
    run = jax.jit(trw.model_layers(model))

    def layers(xs):  # warm-up: the intact stream first, its outputs dropped
        return [np.asarray(o)[729:] for o in run(jnp.concatenate([x, xs]))]

    ref = layers(x)

    def rho(o):
        z = o - o.mean(1, keepdims=True)
        n = np.linalg.norm(z, axis=1, keepdims=True)
        z = np.where(n > 1e-12, z / np.where(n > 1e-12, n, 1), 0)
        return z @ z.T

    off = ~np.eye(729, dtype=bool)
    ref_rho = [rho(o)[off] for o in ref]
    key = jax.random.key(0)
    t0 = time.perf_counter()
    for s in [3**i for i in range(7)]:
        for i in range(LOOP_SHUFFLES):
            idx = np.asarray(trw.block_permutation(jax.random.fold_in(key, 100 * s + i), 729, s))
            inv = np.argsort(idx)
            outs = layers(x[idx])
            for r, o in zip(ref_rho, outs):
                np.corrcoef(r, rho(o[inv])[off])
    t_loop = (time.perf_counter() - t0) * 200 / LOOP_SHUFFLES
    print(f"loop TRW: {t_loop:.1f} s extrapolated to 200 shuffles (measured on {LOOP_SHUFFLES} per scale)")
    print(f"ratio loop / fast: {t_loop / t_fast:.1f}x")

if __name__ == "__main__":
    main()

"""Dynamical similarity analysis: dynlab's core against the authors' package ``dsa-metric``.

    python benchmarks/dsa.py [--systems 8] [--rank 10] [--delays 10] [--iters 1500] [--quick]

Needs the ``bench`` extra (``pip install -e '.[bench]'``: torch 2.13.0 CPU and dsa-metric 2.0.2).
Both sides get the same trajectories and the same options and compute the same quantity, the
angular DSA distance between HAVOK-DMD operators (n_delays, rank) after the best orthogonal
alignment, in one process:

- **dsa-metric** (``DSA.DSA(X, n_delays, rank, score_method="angular", iters, lr)``): operators
  by its HAVOK DMD (PyTorch, float32), then for every unordered pair two Adam runs of ``iters``
  steps (its default 1500, lr 5e-3) on a Cayley parameterisation, from the identity and from a
  row swap, keeping the better;
- **dynlab** (``dynlab.analyses.dsa``: ``havok_dmd`` + ``dsa_distances``): the same operators
  (float64, column signs fixed), then Riemannian descent on O(r) with Cayley steps,
  Barzilai-Borwein lengths and Armijo backtracking, both orders of every pair and 4 restarts
  (identity, reflection, 2 random), all pairs batched under one compilation, until the Riemannian
  gradient norm is below 1e-6 (at most 2000 steps).

The systems: ``systems / 2`` stable linear systems x' = M x + noise (2x2 rotation-and-decay blocks,
different spectra, observed through a random orthogonal mixing), each also seen through a second
random orthogonal change of coordinates. Truths: a pair (system, rotated copy) has distance 0; for
two symmetric matrices the minimum over O(r) is known in closed form (Hoffman-Wielandt: sorted
eigenvalues aligned), which times both optimisers on one pair against the exact value.
Each side is timed once after a warm-up call of the same size (JAX compilation excluded and
reported). Both are upper bounds of the true minimum (each angle is attained by an orthogonal C),
so on every pair the smaller angle is the more accurate; the differences are printed.

Measured (2-core CPU under a load of ~4 from other work, so timings +-30%; 8 systems, rank 10,
10 delays, 4 trials x 300 steps, 16 observed dimensions, dsa-metric at its defaults):

- distance matrix (28 pairs): dsa-metric 62.2 s, dynlab 7.7 s (13.3 s on the first call, with
  compilation): 8.1x; all 28 alignments converged (|W| <= 1e-6, median 616 steps);
- the truth "a system and its rotated copy are at distance 0": dynlab 2e-14 rad; dsa-metric up
  to 0.56 rad (its DMD leaves the signs of the SVD's columns free, which makes the operators of
  the two copies differ by a diagonal sign matrix, and its two Adam starts do not find it);
- the alignment alone, on dynlab's sign-fixed operators: dsa-metric 57.4 s, dynlab 4.9 s (11.6x),
  and dsa-metric's angle is larger on every pair (by 1e-4 to 2e-3 rad);
- one symmetric pair against its exact distance: dsa-metric's error -2e-7 rad (float32 arccos)
  in 1.25 s; dynlab's spectral start is the exact optimum (error 2e-16, 0 steps, 0.01 s), and
  its Riemannian descent alone, from the identity and a reflection, reaches it in 414 steps
  (error 2e-14, 0.01 s).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402
import numpy as np  # noqa: E402

from dynlab.analyses.dsa import dsa_distances, havok_dmd, procrustes_vector_fields  # noqa: E402


def _block(omega: float, decay: float) -> np.ndarray:
    c, s = np.cos(omega), np.sin(omega)
    return decay * np.array([[c, -s], [s, c]])


def problem(systems: int, n: int, trials: int, steps: int, seed: int = 0) -> list[np.ndarray]:
    """``systems`` trajectories ``[trials, steps, n]``: pairs (system, orthogonally rotated copy)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(systems // 2):
        m = np.zeros((n, n))
        for i in range(n // 2):
            m[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = _block(rng.uniform(0.05, 2.5), rng.uniform(0.6, 0.97))
        mix = np.linalg.qr(rng.standard_normal((n, n)))[0]
        m = mix @ m @ mix.T
        x = np.zeros((trials, steps, n))
        x[:, 0] = rng.standard_normal((trials, n))
        for t in range(1, steps):
            x[:, t] = x[:, t - 1] @ m.T + 0.1 * rng.standard_normal((trials, n))
        q = np.linalg.qr(rng.standard_normal((n, n)))[0]
        out += [x, x @ q.T]
    return out


def timed(fn):
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - start, out


def dynlab_dsa(data, n_delays, rank, iterations=2000, restarts=4, tol=1e-6):
    ops = np.stack([havok_dmd(x, n_delays=n_delays, rank=rank).operator for x in data])
    return dsa_distances(ops, iterations=iterations, restarts=restarts, tol=tol)


def metric_dsa(data, n_delays, rank, iters, lr):
    from DSA import DSA

    return np.asarray(DSA([x.astype(np.float32) for x in data], n_delays=n_delays, rank=rank,
                          score_method="angular", iters=iters, lr=lr).fit_score())


def symmetric_truth(r: int, seed: int = 1):
    """Two random symmetric matrices and their exact distance (Hoffman-Wielandt)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((r, r))
    b = rng.standard_normal((r, r))
    a, b = (a + a.T) / 2, (b + b.T) / 2
    la = np.sort(np.linalg.eigvalsh(a / np.linalg.norm(a)))
    lb = np.sort(np.linalg.eigvalsh(b / np.linalg.norm(b)))
    return a, b, 2 * np.arcsin(np.linalg.norm(la - lb) / 2)


def metric_pair(a, b, iters, lr):
    import torch
    from DSA.simdist import SimilarityTransformDist

    sim = SimilarityTransformDist(iters=iters, score_method="angular", lr=lr)
    return float(sim.fit_score(torch.from_numpy(a).float(), torch.from_numpy(b).float()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=8, help="even: systems/2 systems and their rotated copies")
    parser.add_argument("--n", type=int, default=16, help="observed dimensions")
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--delays", type=int, default=10)
    parser.add_argument("--rank", type=int, default=10)
    parser.add_argument("--iters", type=int, default=1500, help="dsa-metric's Adam steps (its default)")
    parser.add_argument("--lr", type=float, default=5e-3, help="dsa-metric's learning rate (its default)")
    parser.add_argument("--quick", action="store_true", help="4 systems, 300 Adam steps")
    args = parser.parse_args()
    if args.quick:
        args.systems, args.iters = 4, 300
    try:
        import DSA  # noqa: F401
        import torch
    except ImportError:
        raise SystemExit("dsa-metric is not installed (it is bench-only: pip install -e '.[bench]')") from None
    torch.set_num_threads(int(os.environ.get("OPENBLAS_NUM_THREADS", "1")))
    print(f"DSA: {args.systems} systems ({args.systems // 2} + rotated copies), {args.trials} trials x {args.steps} "
          f"steps x {args.n} dims, {args.delays} delays, rank {args.rank}; jax {jax.__version__}, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads)")
    data = problem(args.systems, args.n, args.trials, args.steps)
    m = len(data)

    first, _ = timed(lambda: dynlab_dsa(data, args.delays, args.rank))
    t_ours, ours = timed(lambda: dynlab_dsa(data, args.delays, args.rank))
    t_theirs, theirs = timed(lambda: metric_dsa(data, args.delays, args.rank, args.iters, args.lr))
    iu = np.triu_indices(m, 1)
    copies = np.array([(i, i + 1) for i in range(0, m, 2)])
    others = np.array([(i, j) for i, j in zip(*iu) if not (i % 2 == 0 and j == i + 1)])
    diff = theirs[iu] - ours.angle[iu]
    print(f"\ndistance matrix ({m * (m - 1) // 2} pairs)")
    print(f"dsa-metric {t_theirs:7.2f} s   ({args.iters} Adam steps x 2 starts per pair)")
    print(f"dynlab     {t_ours:7.2f} s   (first call {first:.2f} s with compilation; "
          f"{int((ours.gradient_norm[iu] <= 1e-6).sum())}/{iu[0].size} pairs converged, median "
          f"{int(np.median(ours.iterations[iu]))} steps)   ratio {t_theirs / t_ours:5.1f}x")
    print(f"truth: (system, rotated copy) pairs have distance 0: dynlab max {ours.angle[tuple(copies.T)].max():.1e}, "
          f"dsa-metric max {theirs[tuple(copies.T)].max():.1e} rad")
    print(f"other pairs: dsa-metric minus dynlab angle: mean {diff.mean():+.2e}, min {diff.min():+.2e}, "
          f"max {diff.max():+.2e} rad (positive: dynlab found the closer alignment); "
          f"median distance {np.median(ours.angle[tuple(others.T)]):.3f} rad")

    ops = np.stack([havok_dmd(x, n_delays=args.delays, rank=args.rank).operator for x in data])
    t_opt, theirs_opt = timed(lambda: np.array([metric_pair(ops[i], ops[j], args.iters, args.lr) for i, j in zip(*iu)]))
    t_mine, mine = timed(lambda: dsa_distances(ops))
    d_opt = theirs_opt - mine.angle[iu]
    print(f"\nthe alignment alone, on dynlab's (sign-fixed) operators ({iu[0].size} pairs)")
    print(f"dsa-metric {t_opt:7.2f} s   dynlab {t_mine:7.2f} s   ratio {t_opt / t_mine:5.1f}x;   dsa-metric minus "
          f"dynlab angle: mean {d_opt.mean():+.2e}, min {d_opt.min():+.2e}, max {d_opt.max():+.2e} rad")

    a, b, exact = symmetric_truth(args.rank)
    print(f"\none pair of symmetric {args.rank}x{args.rank} matrices, exact distance {exact:.6f} rad (Hoffman-Wielandt)")
    for iters in (args.iters, 4 * args.iters):
        t, got = timed(lambda: metric_pair(a, b, iters, args.lr))
        print(f"dsa-metric {iters:>5} Adam steps  {t:6.2f} s   error {got - exact:+.2e} rad")
    plain = np.stack([np.eye(args.rank), np.diag([-1.0] + [1.0] * (args.rank - 1))])
    for label, starts in (("default starts", None), ("descent only, from I and a reflection", plain)):
        procrustes_vector_fields(a, b, starts=starts, tol=1e-9)
        t, res = timed(lambda: procrustes_vector_fields(a, b, starts=starts, tol=1e-9))
        print(f"dynlab     {int(res.iterations):>5} steps       {t:6.2f} s   error {float(res.angle) - exact:+.2e} rad "
              f"(|W| {float(res.gradient_norm):.1e}; {label})")


if __name__ == "__main__":
    main()

"""How much TRW s50 moves between grammar seeds, against what one analysis' shuffles say (issue 38, item 10).

    python benchmarks/trw_spread.py [--unit sith-rnn] [--train-steps 0] [--grammar-seeds 10] [--n-shuffle 200]

One network (``--unit``, seed 0; fresh, or trained ``--train-steps`` steps on the hierarchical language of grammar
seed 0 as ``sith-trw`` trains it) is analysed by `trw_analysis` (the public path, its defaults) on the streams
of ``--grammar-seeds`` grammar seeds. Printed per layer: log3 s50 for each grammar seed, their sd (ddof 1:
the spread a user's one number has across streams) and how many were censored. This is what the s50 note
of `dynlab.analyses.trw` reports.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None) -> dict:
    from dynlab.analyses.trw import trw_analysis
    from dynlab.scenarios.sith_trw import build
    from dynlab.tasks.hierarchical import HierarchicalLanguageTask
    from dynlab.train import train

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--unit", default="sith-rnn")
    parser.add_argument("--train-steps", type=int, default=0)
    parser.add_argument("--grammar-seeds", type=int, default=10)
    parser.add_argument("--n-shuffle", type=int, default=200)
    args = parser.parse_args(argv)
    t0 = time.time()
    exp = build(args.unit, 0, max(1, args.train_steps))
    model = train(exp).model if args.train_steps else exp.model
    s50, censored = [], []
    for g in range(args.grammar_seeds):
        ds = trw_analysis(model, task=HierarchicalLanguageTask(grammar_seed=g), n_shuffle=args.n_shuffle)
        s50.append(ds.log3_s50.values)
        censored.append(ds.s50_censored.values)
    s50, censored = np.array(s50), np.array(censored)
    sd = s50.std(axis=0, ddof=1)
    state = f"trained {args.train_steps} steps" if args.train_steps else "fresh"
    print(f"{args.unit} ({state}, seed 0), {args.grammar_seeds} grammar seeds, {args.n_shuffle} shuffles per scale "
          f"({time.time() - t0:.0f} s)")
    print(f"{'layer':>5} {'log3 s50 per grammar seed':<60} {'sd':>6} {'censored':>8}")
    for layer in range(s50.shape[1]):
        print(f"{layer:5d} {' '.join(f'{v:.2f}' for v in s50[:, layer]):<60} {sd[layer]:6.3f} "
              f"{int(censored[:, layer].sum()):8d}")
    print(f"sd over grammar seeds, per layer: {sd.min():.2f}-{sd.max():.2f} log3 steps")
    return dict(s50=s50, sd=sd, censored=censored)


if __name__ == "__main__":
    main()

"""How much the printed minimum CLV angle moves between stretches of one attractor (issue 38, item 10).

    python benchmarks/clv_angle.py [--hidden 32] [--gain 2.5] [--k 4] [--steps 2000] [--stretches 8]

A tanh RNN (``unit="rnn"``, its orthogonal W_hh scaled by ``--gain``, so chaotic) runs under a constant
``--drive`` (autonomous, it would stay at its fixed point h = 0);
`clv_analysis` (the public path, what `dynlab analyze clv` runs) measures ``--stretches`` stretches of
``--steps`` steps of the same trajectory, stretch j after a forward transient of ``1000 + j * steps`` steps.
Printed per stretch: the stretch's minimum angle between CLV 1 and the span of the rest (what was printed
bare before), the median and range of the minima of its 10 parts (``min_angle_parts``, printed beside it
now) and the median angle. Then: the spread of the stretch minima (max / min), and how many of the other
stretches' minima fall inside each stretch's range of part minima (the range is what a user reads as
"another stretch gives something in here").

Measured (``--hidden 16 --steps 1000 --stretches 6``, drive 0.5, 2 shared cores, 132 s): lambda_1 0.148-0.173;
the stretch minima 0.114-1.15 deg (a factor 10 between stretches of one attractor), each stretch's part
minima spanning e.g. 0.114-7.39 deg (median 1.42), median angle 19.6-31.2 deg. The range of a stretch's part
minima held 15 of the 30 other stretches' minima: the stretch minimum is the lower end of its own range and
another stretch can go lower, which is what the printed "another stretch gives another min" says.
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import numpy as np

import dynlab
from dynlab.analyses.clv import clv_analysis
from dynlab.analyses.protocol import Drive
from dynlab.analyses.qr_settings import QRSettings


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--gain", type=float, default=2.5)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--stretches", type=int, default=8)
    parser.add_argument("--drive", type=float, default=0.5, help="constant drive (0 leaves the RNN at its fixed point h = 0)")
    args = parser.parse_args(argv)
    model = dynlab.build("model", unit="rnn", input_size=2, output_size=2, key=jax.random.key(0), hidden=args.hidden)
    model = eqx.tree_at(lambda m: m.cells[0].w_hh, model, model.cells[0].w_hh * args.gain)
    rows, t0 = [], time.time()
    for j in range(args.stretches):
        ds = clv_analysis(model, qr=QRSettings(k=args.k, reortho_every=1), steps=args.steps,
                          window=min(args.steps, 1000), transient_forward=1000 + j * args.steps,
                          transient_backward=500, snapshots=0, input=Drive(args.drive))
        parts = np.degrees(ds.min_angle_parts.values)
        rows.append(dict(stretch=j, minimum=float(np.degrees(ds.min_angle_rest)), parts_median=float(np.median(parts)),
                         parts_low=float(parts.min()), parts_high=float(parts.max()),
                         median=float(np.degrees(ds.median_angle_rest)), lambda1=float(ds.qr_exponent[0])))
    print(f"tanh RNN N = {args.hidden}, W_hh x {args.gain}, drive {args.drive:g}; k = {args.k}; {args.stretches} stretches of "
          f"{args.steps} steps ({time.time() - t0:.0f} s)")
    print(f"{'stretch':>7} {'lambda_1':>9} {'min (deg)':>10} {'parts: median':>14} {'range':>22} {'median angle':>12}")
    for r in rows:
        print(f"{r['stretch']:7d} {r['lambda1']:9.4f} {r['minimum']:10.3g} {r['parts_median']:14.3g} "
              f"   [{r['parts_low']:8.3g}, {r['parts_high']:8.3g}] {r['median']:12.3g}")
    minima = np.array([r["minimum"] for r in rows])
    inside = [sum(r["parts_low"] <= m <= r["parts_high"] for i, m in enumerate(minima) if i != r["stretch"]) for r in rows]
    print(f"stretch minima: {minima.min():.3g}-{minima.max():.3g} deg (max / min = {minima.max() / minima.min():.3g}); "
          f"other stretches' minima inside a stretch's part range: {sum(inside)} of {len(rows) * (len(rows) - 1)}")
    return rows


if __name__ == "__main__":
    main()

"""A network trained on context-dependent integration has the solution Mante, Sussillo, Shenoy & Newsome
(2013) found: in each context, slow points along the read-out's choice axis whose Jacobian has one
eigenvalue near 1, and a left eigenvector that selects the cued stream. The truth is the paper's, not the
code's: the task cannot be solved without integrating the cued stream over the 750 ms stimulus and
ignoring the other.

The full acceptance form (64 units, 10 ms steps, 3,000 training steps) is `benchmarks/context_integration.py`,
whose functions this runs cut down: 32 units, 20 ms steps (alpha = 0.2: the same tau = 100 ms). About 45 s of
CPU time (measured 34-46 s on the loaded 2-core machine).

FRAGILE, measured: the cut-down network does not find Mante's solution for every seed. Under the suite's XLA flags
(-O0), seed 0 passes; seeds 1 and 2 reach 93% accuracy with a faster mode in context 0 (|mu_1| = 0.93, 0.92 at
20 ms steps: a memory of about 260 ms, not a line), and with sigma = 3, 2 of 3 seeds miss one check in one context; at 10 ms steps (32 units, 41-44 s of training
alone under -O0) seed 1's context-0 mode is off the read-out (|cos| 0.39) and seed 2's selects the wrong stream.
The full form (64 units, 10 ms) passes every check for seeds 0, 1 and 2.
The numbers also differ between -O0 and the default optimisation (rounding changes the trained network): seed 0
at 2,000 steps passed under one and missed the selection margin (ratio 1.995 < 2) under the other. A failure here
therefore says "this network found another solution" before it says "the analysis is wrong"; the analysis's own
truths are in `tests/test_integration_modes.py`.
"""

import pathlib
import runpy

import pytest

BENCH = runpy.run_path(str(pathlib.Path(__file__).parents[1] / "benchmarks" / "context_integration.py"))


@pytest.fixture(scope="module")
def trained():
    return BENCH["run"](0, dt=20, hidden=32, steps=3000, ics=32)


def test_context_integration_network_is_a_line_attractor_selected_by_context(trained):
    accuracy, summaries, _ = trained
    assert accuracy > 0.8          # chance 0.5; the cue ignored: at most 0.75
    for context, s in summaries.items():
        failed = [k for k, ok in BENCH["checks"](s).items() if not ok]
        assert not failed, f"context {context}: {failed} ({s})"

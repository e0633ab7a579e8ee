r"""Dynamics of networks of Adaptive Recurrent Units (Geadah et al. §2.4, §5.4, App. A, C.5, D).

The paper's stability analyses all look at the *static* $\gamma$ network of a layer,

$$ F_{n,s}(h;\, \xi) = \gamma(W_{hh} h + b_h + \xi;\; n, s), \qquad
   D_h F = \operatorname{diag}\!\big(\gamma'(W_{hh} h + b_h + \xi;\, n, s)\big)\, W_{hh}, $$

with zero input ($x_t = 0$, App. D.4) and the activation parameters $(n, s)$ held constant —
either a homogeneous pair from a grid, or the per-neuron values an ARU's controllers set. The
weights $W_{hh}, b_h$ come from layer 0 of any model of the ARU family (``rnn``, ``rnn-gamma``,
``aru``; the isolated, diagonal variant included); $\xi$ is the constant drive.

One module per registered analysis (``dynlab analyze NAME``), each with its figure:

* [`jacobian_grid`][dynlab.analyses.aru.jacobian_grid] — ``jacobian-grid``: mean Jacobian norm over the
  $(n, s)$ grid, $h \sim U(-5, 5)^N$ (App. Fig. 6A);
* [`lyapunov_grid`][dynlab.analyses.aru.lyapunov_grid] — ``lyapunov-grid``: $\lambda_1$ over the $(n, s)$
  grid, one vmapped QR run (App. Fig. 6B);
* [`adaptation`][dynlab.analyses.aru.adaptation] — ``adaptation``: the Fig. 5c/d protocol, $\lambda_1$ with
  $(n, s)$ frozen at the values the ARU sets $\hat t$ steps after the onset of a drive $\xi$, at
  steady state ("adapted") or without drive ("fixed"), from initial conditions on the driven
  stationary distribution;
* [`controller`][dynlab.analyses.aru.controller] — ``controller``: controller states under constant
  drives in their first principal components with their limit points, and the $(n_t, s_t)$ paths
  over the $\gamma' = 1 - \epsilon$ level curves (Fig. 5a/b);
* [`gradients`][dynlab.analyses.aru.gradients] — ``gradient-by-position``: gradient norms by input
  position (App. C.5, Fig. 18);
* [`weight_eigs`][dynlab.analyses.aru.weight_eigs] — ``weight-eigs``: eigenvalues of $W_{hh}$ against the
  unit circle (Fig. 5e).

What they share: [`frozen_map`][dynlab.analyses.aru.frozen_map] (the layer, the frozen map, $\lambda_1$
of frozen maps), [`traces`][dynlab.analyses.aru.traces] (an ARU run under step drives) and
[`plotting`][dynlab.analyses.aru.plotting] (figure helpers). The ARU's ``gain-scaling`` and
``fractional-order`` analyses are [`dynlab.analyses.gain_scaling`][] and
[`dynlab.analyses.fractional`][].

Confidence intervals are Student-t intervals of the mean over independent realisations,
$\bar\lambda \pm t_{(1+c)/2,\,m-1}\, s/\sqrt{m}$, with diverged runs left out.
"""

from dynlab.analyses.aru.frozen_map import (
    ARU_FAMILY,
    PAPER_N,
    PAPER_S,
    GammaMap,
    aru_layer,
    escape_rate,
    frozen_gamma_cell,
    frozen_lambda1,
    number_grid,
    recurrent_layer,
)
from dynlab.analyses.aru.traces import aru_traces
from dynlab.analyses.aru.jacobian_grid import jacobian_grid_analysis, jacobian_norm, plot_jacobian_grid
from dynlab.analyses.aru.lyapunov_grid import lyapunov_grid_analysis, plot_lyapunov_grid
from dynlab.analyses.aru.adaptation import adaptation_analysis, plot_adaptation
from dynlab.analyses.aru.controller import controller_analysis, plot_controller
from dynlab.analyses.aru.gradients import gradient_by_position_analysis, plot_gradient_by_position
from dynlab.analyses.aru.weight_eigs import plot_weight_eigs, weight_eigs_analysis

__all__ = [
    "ARU_FAMILY",
    "GammaMap",
    "PAPER_N",
    "PAPER_S",
    "adaptation_analysis",
    "aru_layer",
    "aru_traces",
    "controller_analysis",
    "escape_rate",
    "frozen_gamma_cell",
    "frozen_lambda1",
    "gradient_by_position_analysis",
    "jacobian_grid_analysis",
    "jacobian_norm",
    "lyapunov_grid_analysis",
    "number_grid",
    "plot_adaptation",
    "plot_controller",
    "plot_gradient_by_position",
    "plot_jacobian_grid",
    "plot_lyapunov_grid",
    "plot_weight_eigs",
    "recurrent_layer",
    "weight_eigs_analysis",
]

r"""Lyapunov spectra of discrete-time maps by the QR (Benettin) method, and of dynlab models.

For a map $h_{t+1} = F(h_t, x_t)$ on $\mathbb{R}^N$ with Jacobians
$J_t = \partial F / \partial h\,(h_t, x_t)$, the Lyapunov exponents are the growth rates

$$\lambda_i = \lim_{t\to\infty} \frac{1}{t} \ln \sigma_i\!\left(J_{t-1} \cdots J_1 J_0\right),$$

with $\sigma_i$ the $i$-th singular value. The product is never formed: starting from an
orthonormal frame $Q_0 \in \mathbb{R}^{N\times k}$, each step pushes the frame forward and
re-orthonormalises it with a QR decomposition whose $R$ has a positive diagonal,

$$Z_{s} = J_{s-1} Q_{s-1} = Q_{s} R_{s}, \qquad
  \lambda_i \approx \frac{1}{t} \sum_{s=1}^{t} \ln (R_s)_{ii}, \qquad i = 1, \dots, k,$$

which gives the $k$ largest exponents (Benettin et al. 1980; Geadah et al., App. D).

The package, from low to high level (every public name is importable from here,
``from dynlab.analyses.lyapunov import lyapunov_spectrum``):

- [`core`][dynlab.analyses.lyapunov.core] — [`flatten_step`][] turns a step map on a PyTree state
  into a map on a flat vector; [`lyapunov_core`][] is the jit-compiled numerical core on any map;
  it returns JAX arrays and can be `jax.vmap`-ed over initial conditions;
- [`factorisations`][dynlab.analyses.lyapunov.factorisations] — how the frame is re-factorised:
  [`Householder`][] (LAPACK, the default), [`CholeskyQR`][] (matmul + Cholesky, with a run-time
  fallback to Householder for ill-conditioned frames) and [`PivotedLU`][] (used inside blocks,
  `lu_every`): the exponents depend only on the flag of the frame and the triangular factors'
  diagonals, so any flag-preserving triangular factorisation gives the same sums;
- [`reortho`][dynlab.analyses.lyapunov.reortho] — `reortho_every="auto"` chooses the
  re-orthonormalisation interval from a pilot over the burn-in: the longest interval whose
  predicted blocking error ([`blocking_error_bound`][], from the spread $\lambda_1 - \lambda_k$)
  stays below 1% of the pilot's statistical error of the exponents (and the frame's condition
  number below $\varepsilon^{-2/3}$); in float64 with $k \ge 16$ it weighs blocks with a pivoted LU
  every few steps inside against plain blocks, from a pilot that itself uses the LU; it reports the
  bound, the tolerance and the rule in attrs;
- [`spectrum`][dynlab.analyses.lyapunov.spectrum] — [`lyapunov_spectrum`][] wraps the core into a
  labelled `xr.Dataset`;
- [`replicates`][dynlab.analyses.lyapunov.replicates] — [`lyapunov_ensemble`][] (initial conditions under
  one input) and [`lyapunov_replicates`][], which repeats the measurement over independent
  realisations (inputs, noise seeds, stretches of an attractor) and reports the mean with a
  Student-t interval over them, each run's batch-means standard error ([`within_run_errors`][])
  and the spread over initial conditions under one input (multistability), each named as what
  it is;
- [`summaries`][dynlab.analyses.lyapunov.summaries] — [`largest_exponent`][],
  [`sum_positive_exponents`][], [`kaplan_yorke_dimension`][], [`count_positive_exponents`][] and
  [`count_zero_exponents`][] summarise a spectrum, and [`interpret_spectrum`][] says in one line
  what a measured spectrum means (stable, chaotic or marginal, from $\lambda_1$'s interval);
- [`model`][dynlab.analyses.lyapunov.model] — the registered analysis ``lyapunov``
  ([`lyapunov_analysis`][]): a dynlab model's full state map under the autonomous, constant-drive
  or task protocol, replicated over independent realisations;
- [`figure`][dynlab.analyses.lyapunov.figure] — its figure ([`plot_lyapunov`][]).

Exponents are per step of the map (natural logarithm), not per unit of time: divide by the
step size of a discretised flow to get rates per unit of time.
"""

from dynlab.analyses.lyapunov.core import LyapunovResult, Method, StepFn, flatten_step, lyapunov_core, num_steps
from dynlab.analyses.lyapunov.factorisations import CholeskyQR, Householder, PivotedLU, QRMethod
from dynlab.analyses.lyapunov.reortho import (
    AUTO_ERROR_FACTOR,
    AUTO_LU_COST,
    AUTO_LU_ERROR_FACTOR,
    AUTO_LU_MIN_K,
    AUTO_MIN_BLOCKS,
    AUTO_MIN_BURN_IN,
    auto_condition_bound,
    blocking_error_bound,
    unit_roundoff,
)
from dynlab.analyses.lyapunov.spectrum import lyapunov_spectrum
from dynlab.analyses.lyapunov.replicates import lyapunov_ensemble, lyapunov_replicates, replicate_groups
from dynlab.analyses.lyapunov.within_run import block_growth, rounding_se, se_of_realisation_mean, within_run_errors
from dynlab.analyses.lyapunov.summaries import (
    count_positive_exponents,
    count_zero_exponents,
    interpret_spectrum,
    kaplan_yorke_dimension,
    largest_exponent,
    lyapunov_summary,
    sum_positive_exponents,
)
from dynlab.analyses.lyapunov.figure import plot_lyapunov
from dynlab.analyses.lyapunov.model import DEFAULT_DRIVE, check_lyapunov, lyapunov_analysis, lyapunov_analysis_seeds

__all__ = [
    "DEFAULT_DRIVE",
    "AUTO_ERROR_FACTOR",
    "AUTO_LU_COST",
    "AUTO_LU_ERROR_FACTOR",
    "AUTO_LU_MIN_K",
    "AUTO_MIN_BLOCKS",
    "AUTO_MIN_BURN_IN",
    "CholeskyQR",
    "Householder",
    "LyapunovResult",
    "Method",
    "PivotedLU",
    "QRMethod",
    "StepFn",
    "auto_condition_bound",
    "block_growth",
    "blocking_error_bound",
    "check_lyapunov",
    "count_positive_exponents",
    "count_zero_exponents",
    "flatten_step",
    "interpret_spectrum",
    "lyapunov_summary",
    "kaplan_yorke_dimension",
    "largest_exponent",
    "lyapunov_analysis",
    "lyapunov_core",
    "lyapunov_ensemble",
    "lyapunov_replicates",
    "replicate_groups",
    "lyapunov_analysis_seeds",
    "lyapunov_spectrum",
    "num_steps",
    "plot_lyapunov",
    "rounding_se",
    "se_of_realisation_mean",
    "sum_positive_exponents",
    "unit_roundoff",
    "within_run_errors",
]

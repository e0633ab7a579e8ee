r"""Spectra of recurrent networks: weights, state Jacobians and activity covariance.

Three views of the same question, "which directions does the network amplify or keep?":

- [`weight_eigenvalues`][]: the eigenvalues $\mu_i$ of a recurrent weight matrix $W$. For a
  linear recurrence $h_{t+1} = W h_t$ a mode with eigenvalue $\mu$ decays (or grows) as
  $|\mu|^t$ and rotates by $\arg\mu$ per step; the spectral radius
  $\rho(W) = \max_i |\mu_i|$ decides stability.
- [`jacobian_spectra`][]: the eigenvalues and singular values of the state Jacobian
  $J_t = \partial F / \partial h\,(h_t, x_t)$ along a trajectory
  $h_{t+1} = F(h_t, x_t)$ of any map, i.e. the local linearisation the network actually
  applies at each step (for $F(h, x) = \tanh(W h + U x)$,
  $J_t = \operatorname{diag}(1 - h_{t+1}^2)\, W$).
- [`covariance_spectrum`][]: the eigenvalues $\lambda_1 \ge \lambda_2 \ge \dots$ of the
  covariance of recorded activity and the power-law exponent $\alpha$ of their decay,
  $\lambda_n \propto n^{-\alpha}$ (Stringer et al. 2019), with a bootstrap confidence
  interval, and a truncated power law $\lambda_n \propto n^{-\alpha} e^{-n / n_c}$.
  The fits themselves are [`power_law_exponent`][] and [`truncated_power_law_fit`][].

Eigen- and singular values are computed on the host in float64 (numpy) from the matrices
JAX produces; complex eigenvalues are stored as real, imaginary part and modulus, so the
datasets write to netCDF as they are. Every list of eigenvalues is sorted by modulus,
descending (ties, such as a complex-conjugate pair, by imaginary part, then real part,
descending, so $r e^{+i\theta}$ comes before $r e^{-i\theta}$).

The package: the numerical cores on any map or array in
[`eigenvalues`][dynlab.analyses.spectra.eigenvalues] (weights, Jacobians),
[`power_law`][dynlab.analyses.spectra.power_law] (the fits) and
[`covariance`][dynlab.analyses.spectra.covariance]; the registered analysis ``spectra`` of a dynlab
model in [`model`][dynlab.analyses.spectra.model] ([`spectra_analysis`][]) and its figure in
[`figure`][dynlab.analyses.spectra.figure] ([`plot_spectra`][]). Every public name is importable
from here.

Bad arguments raise a ConfigError with a message saying what is valid.
"""

from dynlab.analyses.spectra.eigenvalues import StepFn, jacobian_spectra, weight_eigenvalues
from dynlab.analyses.spectra.power_law import (
    PowerLawFit, TruncatedPowerLawFit, power_law_exponent, truncated_power_law_fit,
)
from dynlab.analyses.spectra.covariance import FIT_RANK_FACTOR, covariance_spectrum, effective_samples
from dynlab.analyses.spectra.figure import plot_spectra
from dynlab.analyses.spectra.model import spectra_analysis

__all__ = [
    "FIT_RANK_FACTOR",
    "PowerLawFit",
    "StepFn",
    "TruncatedPowerLawFit",
    "covariance_spectrum",
    "effective_samples",
    "jacobian_spectra",
    "plot_spectra",
    "power_law_exponent",
    "spectra_analysis",
    "truncated_power_law_fit",
    "weight_eigenvalues",
]

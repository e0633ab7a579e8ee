r"""Spectrum agreement: the student's Lyapunov spectrum against the teacher's, with intervals.

From the two datasets of [`lyapunov_replicates`][dynlab.analyses.lyapunov.lyapunov_replicates]
(each with intervals over its realisations): $\lambda_1$ and the Kaplan–Yorke dimension of each
with its interval, and whether the two intervals overlap (the student's value is not
distinguishable from the teacher's at the intervals' level); the number of positive exponents of
each ([`positive_exponents`][]) and whether they are equal.
"""

from __future__ import annotations

import xarray as xr


def _overlap(a_low, a_high, b_low, b_high) -> bool:
    return bool(max(a_low, b_low) <= min(a_high, b_high))


def positive_exponents(spectrum: xr.Dataset) -> int:
    """The exponents whose interval lies above 0. A fixed threshold on the estimates would not do:
    a flow sampled at a small step has small exponents per step (the chaotic teacher's $\\lambda_1$ is
    below $10^{-3}$ per step), and a zero exponent's estimate is positive half of the time."""
    return int((spectrum["ci_low"].values > 0).sum())


def spectrum_agreement(teacher: xr.Dataset, student: xr.Dataset) -> dict[str, float]:
    """The agreement of the module docstring."""
    out: dict[str, float] = {}
    for name, var in (("lambda1", "largest"), ("ky", "ky_dimension")):
        for who, ds in (("teacher", teacher), ("student", student)):
            for part in ("mean", "ci_low", "ci_high"):
                out[f"{name}_{who}{'' if part == 'mean' else '_' + part[3:]}"] = float(ds[f"{var}_{part}"])
        out[f"{name}_agree"] = _overlap(out[f"{name}_teacher_low"], out[f"{name}_teacher_high"],
                                        out[f"{name}_student_low"], out[f"{name}_student_high"])
    for who, ds in (("teacher", teacher), ("student", student)):
        out[f"n_positive_{who}"] = positive_exponents(ds)
    out["n_positive_agree"] = out["n_positive_teacher"] == out["n_positive_student"]
    return out

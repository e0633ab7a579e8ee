r"""Dynamical similarity analysis (Ostrow et al. 2023): the numerical core on any trajectories
([`core`][dynlab.analyses.dsa.core]: delay embedding, HAVOK-DMD, Procrustes over vector fields
on $O(r)$), its application to trained dynlab models and run directories, registered as the
analysis ``dsa`` ([`model`][dynlab.analyses.dsa.model]), its yardsticks (a model's distance from
itself under other input draws, the test's power, and seeds against units: [`null`][dynlab.analyses.dsa.null]), and
its figure and summary ([`figure`][dynlab.analyses.dsa.figure])."""

from dynlab.analyses.dsa.core import (
    DMDFit,
    DistanceMatrix,
    ProcrustesResult,
    delay_embed,
    dsa_distances,
    havok_dmd,
    procrustes_vector_fields,
    spectral_start,
)
from dynlab.analyses.dsa.figure import dsa_figure, dsa_summary
from dynlab.analyses.dsa.model import check_dsa, comparable_runs, dsa_analysis, dsa_models, observed_trajectories
from dynlab.analyses.dsa.null import PairNull, detectable, group_permutation, mean_p_value, null_level, null_p_value, pair_null

__all__ = [
    "DMDFit",
    "DistanceMatrix",
    "PairNull",
    "ProcrustesResult",
    "check_dsa",
    "comparable_runs",
    "delay_embed",
    "detectable",
    "dsa_analysis",
    "dsa_distances",
    "dsa_figure",
    "dsa_models",
    "dsa_summary",
    "group_permutation",
    "havok_dmd",
    "mean_p_value",
    "null_level",
    "null_p_value",
    "observed_trajectories",
    "pair_null",
    "procrustes_vector_fields",
    "spectral_start",
]

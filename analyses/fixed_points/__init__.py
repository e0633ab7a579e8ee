r"""Fixed and slow points (Sussillo & Barak 2013): the numerical core on any map
([`core`][dynlab.analyses.fixed_points.core]), where its minimisations start and how many points
they likely missed ([`coverage`][dynlab.analyses.fixed_points.coverage]), the second sampling that
confirms a count ([`confirmation`][dynlab.analyses.fixed_points.confirmation]), the reading line
([`reading`][dynlab.analyses.fixed_points.reading]), its application to dynlab models, registered as the
analysis ``fixed-points`` ([`model`][dynlab.analyses.fixed_points.model]), its figure and
summary ([`figure`][dynlab.analyses.fixed_points.figure]), and the integrating mode of slow points:
what a line attractor integrates ([`integration`][dynlab.analyses.fixed_points.integration]), read in
each context of a network trained on context-dependent integration, registered as ``context-modes``
([`context`][dynlab.analyses.fixed_points.context])."""

from dynlab.analyses.fixed_points.core import (
    STABILITY_CLASSES,
    SpeedMinima,
    discarded_minimum,
    fixed_points,
    fixed_points_from_visited,
    jacobian_eigenvalues,
    minimise_speed,
    speed,
    stability,
    unique_points,
)
from dynlab.analyses.fixed_points.context import choice_axis, context_modes
from dynlab.analyses.fixed_points.coverage import initial_states, unseen_points
from dynlab.analyses.fixed_points.figure import fixed_points_figure, fixed_points_summary
from dynlab.analyses.fixed_points.integration import integration_modes
from dynlab.analyses.fixed_points.model import check_fixed_points, fixed_points_analysis, principal_components
from dynlab.analyses.fixed_points.reading import fixed_points_reading

__all__ = [
    "STABILITY_CLASSES",
    "SpeedMinima",
    "check_fixed_points",
    "choice_axis",
    "context_modes",
    "discarded_minimum",
    "fixed_points",
    "fixed_points_analysis",
    "fixed_points_figure",
    "fixed_points_from_visited",
    "fixed_points_reading",
    "fixed_points_summary",
    "initial_states",
    "integration_modes",
    "jacobian_eigenvalues",
    "minimise_speed",
    "principal_components",
    "speed",
    "stability",
    "unique_points",
    "unseen_points",
]

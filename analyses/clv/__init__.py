r"""Covariant Lyapunov vectors (Ginelli et al. 2007): the numerical core on any map
([`core`][dynlab.analyses.clv.core]), its application to dynlab models, registered as the analysis
``clv`` ([`model`][dynlab.analyses.clv.model]), and its figure and summary
([`figure`][dynlab.analyses.clv.figure])."""

from dynlab.analyses.clv.core import CLVResult, clv_core, ginelli_backward_step, qr_step, readout_basis
from dynlab.analyses.clv.figure import clv_figure, clv_summary
from dynlab.analyses.clv.model import check_clv, clv_analysis, clv_dataset, readout_matrix

__all__ = [
    "CLVResult",
    "check_clv",
    "clv_analysis",
    "clv_core",
    "clv_dataset",
    "clv_figure",
    "clv_summary",
    "ginelli_backward_step",
    "qr_step",
    "readout_basis",
    "readout_matrix",
]

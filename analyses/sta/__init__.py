r"""Receptive fields by spike-triggered averaging (the SITH paper's Fig. 4d and S2): the numerical
core on any stimulus and responses ([`core`][dynlab.analyses.sta.core]), its application to every
layer and neuron of a dynlab model at every level of the hierarchical language or on any task's
inputs, registered as the analysis ``sta`` ([`model`][dynlab.analyses.sta.model]), and its figure
and summary ([`figure`][dynlab.analyses.sta.figure])."""

from dynlab.analyses.sta.core import STAResult, spike_triggered_average
from dynlab.analyses.sta.figure import representative_neurons, sta_figure, sta_summary
from dynlab.analyses.sta.model import Level, check_sta, hierarchy_levels, level_receptive_fields, sta_analysis

__all__ = [
    "Level",
    "STAResult",
    "check_sta",
    "hierarchy_levels",
    "level_receptive_fields",
    "representative_neurons",
    "spike_triggered_average",
    "sta_analysis",
    "sta_figure",
    "sta_summary",
]

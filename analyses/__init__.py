"""Analyses (installed as ``dynlab.analyses``), each returning a labelled ``xr.Dataset``.

A concept that has a numerical core, model glue and a figure is one package:
[`lyapunov`][dynlab.analyses.lyapunov] (the QR engine on any map, ensembles and replicates, summaries;
the registered ``lyapunov`` analysis of a model and its figure) and [`spectra`][dynlab.analyses.spectra]
(weight and Jacobian eigenvalues, covariance spectra and their power-law fits; the ``spectra``
analysis and its figure), both on the state maps of [`state_map`][dynlab.analyses.state_map] (and, in
the rules layer, [`pc_closed_form`][dynlab.rules.pc_closed_form]). [`aru`][dynlab.analyses.aru] holds the ARU
paper's analyses of frozen gamma networks and controllers, one module per analysis with its
figure. A single-file analysis keeps its figure in its module (``activity``, ``perturb``,
``fractional-order``, ``gain-scaling``) or, for a module whose datasets have several figures, in
``<module>_figures.py`` beside it ([`trw`][dynlab.analyses.trw] with ``trw_figures``,
[`elm_scaling`][dynlab.analyses.elm_scaling] with ``elm_scaling_figures``, [`pc_bp`][dynlab.analyses.pc_bp]
with ``pc_bp_figures``).
"""

from dynlab.analyses import lyapunov, pc_bp, spectra, trw  # noqa: F401  (registers the analyses)
from dynlab.analyses import aru, fractional, gain_scaling  # noqa: F401  (ARU paper analyses)
from dynlab.analyses import activity  # noqa: F401  (ELM paper: activity statistics)
from dynlab.analyses import perturb  # noqa: F401  (accuracy under a perturbation)
from dynlab.analyses import clv, fixed_points  # noqa: F401  (issue 19: covariant Lyapunov vectors; fixed and slow points)
from dynlab.analyses import dsa, sta  # noqa: F401  (issue 19: dynamical similarity; receptive fields by spike-triggered averaging)
from dynlab.analyses import grad_compare  # noqa: F401  (issue 34: rules compared on one model)
from dynlab.analyses import recovery  # noqa: F401  (issue 35: recovery of a teacher's dynamics by a student)
from dynlab.analyses.continuation import flip_threshold  # noqa: F401  (issue 49: the sustained input that flips a held bit)
from dynlab.analyses.continuation import model as _continuation  # noqa: F401  (issue 49: continuation and bifurcations)

"""Analyses (installed as ``dynlab.analyses``), each returning a labelled ``xr.Dataset``.

Numerical cores on any map or array: :mod:`~dynlab.analyses.lyapunov`,
:mod:`~dynlab.analyses.spectra` (and, in the rules layer, :mod:`~dynlab.rules.pc_closed_form`). Their application to
dynlab models, registered as analyses: :mod:`~dynlab.analyses.model_dynamics` (``lyapunov``,
``spectra``, on the state maps of :mod:`~dynlab.analyses.state_map`),
:mod:`~dynlab.analyses.trw` (``trw``), :mod:`~dynlab.analyses.pc_bp` (``pc-bp``).
"""

from dynlab.analyses import model_dynamics, pc_bp, trw  # noqa: F401  (registers the analyses)
from dynlab.analyses import aru_dynamics, fractional, gain_scaling  # noqa: F401  (ARU paper analyses)
from dynlab.analyses import activity  # noqa: F401  (ELM paper: activity statistics)
from dynlab.analyses import perturb  # noqa: F401  (accuracy under a perturbation)

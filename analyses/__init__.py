"""Analyses (installed as ``dynlab.analyses``), each returning a labelled ``xr.Dataset``.

Numerical cores on any map or array: :mod:`~dynlab.analyses.lyapunov`,
:mod:`~dynlab.analyses.spectra`. Their application to dynlab models (registered as the
analyses ``lyapunov`` and ``spectra``): :mod:`~dynlab.analyses.model_dynamics`, on the state
maps of :mod:`~dynlab.analyses.state_map`.
"""

from dynlab.analyses import model_dynamics  # noqa: F401  (registers the analyses)

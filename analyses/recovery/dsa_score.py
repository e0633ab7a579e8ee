r"""DSA distance from a student to its teacher, against the teacher's own variability.

Both systems are driven by one draw of the teacher's inputs; each trajectory (all steps of all
trials) is centred and projected on its top ``pcs`` principal components, its HAVOK-DMD operator
fitted ([`havok_dmd`][dynlab.analyses.dsa.core.havok_dmd]) and the angular Procrustes distance
between the two operators computed ([`dsa_distances`][dynlab.analyses.dsa.core.dsa_distances]).
The **null** is the teacher's noise-to-noise distance: the teacher alone under ``null_draws``
further draws of its inputs, taken in disjoint pairs, gives ``null_draws / 2`` independent
distances of the teacher from itself ([`dynlab.analyses.dsa.null`][]). The student is **inside the
teacher's variability** when the rank p-value of its distance against them is above
``ALPHA`` (0.05), i.e. its distance is not beyond the null level; with fewer than 19 null values
no distance reaches the level (the null level is infinite) and every student is inside.
"""

from __future__ import annotations

import jax
import numpy as np

from dynlab.analyses.dsa.core import dsa_distances, havok_dmd
from dynlab.analyses.dsa.null import ALPHA, null_level, null_p_value
from dynlab.errors import ConfigError


def _operator(states: np.ndarray, pcs: int, n_delays: int, rank: int):
    """HAVOK-DMD operator of ``states`` ``[trials, T, N]`` on its top ``pcs`` centred components."""
    trials, steps, n = states.shape
    flat = states.reshape(-1, n) - states.reshape(-1, n).mean(axis=0)
    if pcs < n:
        flat = flat @ np.linalg.svd(flat, full_matrices=False)[2][:pcs].T
    return havok_dmd(flat.reshape(trials, steps, -1), n_delays=n_delays, rank=rank).operator


def dsa_to_teacher(student_states, teacher_runs, *, pcs: int = 8, n_delays: int = 10, rank: int = 6,
                   seed: int = 0) -> tuple[dict[str, float], np.ndarray]:
    """``student_states`` ``[trials, T, N_S]`` under draw 0; ``teacher_runs`` ``[draws, trials, T, N_T]``
    the teacher's latents under draw 0 and its null draws (module docstring). Returns the distance,
    the null's size, median and level, the p-value and ``dsa_inside_null``; and the null's values."""
    teacher_runs = np.asarray(teacher_runs, np.float64)
    if teacher_runs.ndim != 4 or teacher_runs.shape[0] < 1:
        raise ConfigError(f"teacher_runs must be [draws, trials, T, N], got shape {teacher_runs.shape}")
    ops = [_operator(np.asarray(student_states, np.float64), pcs, n_delays, rank)]
    ops += [_operator(run, pcs, n_delays, rank) for run in teacher_runs]
    pairs = [(0, 1)] + [(a, a + 1) for a in range(2, len(ops) - 1, 2)]
    d = dsa_distances(np.stack(ops), key=jax.random.key(seed), pairs=pairs).angle
    null = np.array([d[a, b] for a, b in pairs[1:]])
    distance = float(d[0, 1])
    return {"dsa_distance": distance, "dsa_null_size": len(null), "dsa_null_level": null_level(null, ALPHA),
            "dsa_null_median": float(np.median(null)) if len(null) else float("nan"),
            "dsa_p_value": null_p_value(distance, null), "dsa_inside_null": null_p_value(distance, null) > ALPHA}, null

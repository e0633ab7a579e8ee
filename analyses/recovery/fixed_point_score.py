r"""Fixed-point agreement: the teacher's fixed points that the student has too, with their stability.

The student's points (fixed and slow) are mapped into the teacher's state space by the best linear
map between the spaces ([`fit_map`][dynlab.analyses.recovery.state_r2.fit_map], fitted on the
states both visit under the same inputs). Pairs (teacher point, mapped student point) are matched
one to one, nearest first, while their distance is at most ``tol`` times the root mean square
size of the teacher's visited states. Reported: the teacher's and the student's counts, the
matched count, how many matched pairs share their stability class (stable, marginal, saddle,
unstable; [`stability`][dynlab.analyses.fixed_points.stability]), and the fraction of the
teacher's points recovered (matched). A continuum of points (a line attractor) is sampled by the
search, so its fraction says how many of the teacher's samples lie near one of the student's.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.analyses.recovery.state_r2 import LinearMap


def fixed_point_agreement(teacher: xr.Dataset, student: xr.Dataset, to_teacher: LinearMap, scale: float,
                          *, tol: float = 0.05) -> dict[str, float]:
    """The agreement of the module docstring between two datasets of
    [`fixed_points`][dynlab.analyses.fixed_points.fixed_points]; ``scale`` the teacher's state size."""
    t_points = np.asarray(teacher["points"].values, np.float64)
    s_points = to_teacher(student["points"].values) if student.sizes["point"] else np.zeros((0, t_points.shape[1]))
    t_class, s_class = teacher["stability"].values.astype(str), student["stability"].values.astype(str)
    matched, same = 0, 0
    if len(t_points) and len(s_points):
        d = np.linalg.norm(t_points[:, None] - s_points[None], axis=-1)
        free_t, free_s = np.ones(len(t_points), bool), np.ones(len(s_points), bool)
        for flat in np.argsort(d, axis=None, kind="stable"):
            i, j = np.unravel_index(flat, d.shape)
            if d[i, j] > tol * scale:
                break
            if free_t[i] and free_s[j]:
                free_t[i] = free_s[j] = False
                matched += 1
                same += int(t_class[i] == s_class[j])
    n_teacher = len(t_points)
    return {"fp_teacher_points": n_teacher, "fp_student_points": len(s_points), "fp_matched": matched,
            "fp_same_class": same, "fp_recovered_fraction": matched / n_teacher if n_teacher else float("nan")}

"""The figure and the printed summary of the ``recovery`` analysis."""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.figures import subplots


def recovery_summary(ds: xr.Dataset) -> str:
    """The four scores in five lines."""
    v = {k: ds[k].item() for k in ds.data_vars if ds[k].ndim == 0}
    inside = "inside" if v["dsa_inside_null"] else "outside"
    return "\n".join([
        f"recovery of {ds.attrs.get('teacher', 'the teacher')} by the student:",
        f"  DSA distance {v['dsa_distance']:.4g} rad: {inside} the teacher's variability "
        f"(null level {v['dsa_null_level']:.4g}, median {v['dsa_null_median']:.4g}, p = {v['dsa_p_value']:.3g})",
        f"  fixed points: {v['fp_matched']} of the teacher's {v['fp_teacher_points']} matched "
        f"({100 * v['fp_recovered_fraction']:.0f}%), {v['fp_same_class']} with the same stability; "
        f"student has {v['fp_student_points']}",
        f"  lambda_1 {v['lambda1_student']:.4g} [{v['lambda1_student_low']:.4g}, {v['lambda1_student_high']:.4g}] vs "
        f"{v['lambda1_teacher']:.4g} [{v['lambda1_teacher_low']:.4g}, {v['lambda1_teacher_high']:.4g}] "
        f"({'agree' if v['lambda1_agree'] else 'differ'}); positive exponents {v['n_positive_student']} vs "
        f"{v['n_positive_teacher']}; D_KY {v['ky_student']:.3g} vs {v['ky_teacher']:.3g} "
        f"({'agree' if v['ky_agree'] else 'differ'})",
        f"  held-out state R^2 {v['r2']:.4f}",
    ])


def recovery_figure(ds: xr.Dataset):
    """Four panels: the DSA distance against the teacher's null, fixed points matched, lambda_1 and
    D_KY with their intervals (teacher and student), and the held-out R^2."""

    fig, axes = subplots(1, 4, figsize=(13, 3.2))
    ax = axes[0]
    null = np.asarray(ds["dsa_null"].values)
    ax.plot(np.zeros_like(null), null, "o", color="0.6", label="teacher vs itself")
    ax.plot([1], [float(ds["dsa_distance"])], "o", color="C3", label="student vs teacher")
    ax.set_xticks([0, 1], ["null", "student"])
    ax.set_ylabel("DSA distance (rad)")
    ax.legend(fontsize=7)
    ax = axes[1]
    names = ["teacher", "student", "matched", "same class"]
    ax.bar(names, [int(ds[k]) for k in ("fp_teacher_points", "fp_student_points", "fp_matched", "fp_same_class")])
    ax.set_ylabel("fixed and slow points")
    ax.tick_params(axis="x", labelsize=7)
    for ax, name, label in ((axes[2], "lambda1", "lambda_1 (per step)"), (axes[3], "ky", "Kaplan-Yorke dimension")):
        for x, who in enumerate(("teacher", "student")):
            mid = float(ds[f"{name}_{who}"])
            err = [[mid - float(ds[f"{name}_{who}_low"])], [float(ds[f"{name}_{who}_high"]) - mid]]
            ax.errorbar([x], [mid], yerr=err, fmt="o", capsize=4, color=f"C{x}")
        ax.set_xticks([0, 1], ["teacher", "student"])
        ax.set_ylabel(label)
    axes[3].set_title(f"held-out R^2 = {float(ds['r2']):.3f}", fontsize=9)
    fig.tight_layout()
    return fig

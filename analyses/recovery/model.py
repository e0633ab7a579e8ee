r"""The registered analysis ``recovery``: how much of its teacher's dynamics a student recovered.

The student is a dynlab model trained on a teacher task ([`dynlab.tasks.teachers`][]); ``task``
(default: the model's own) must be one, and the teacher is the task's. Both are driven by the
teacher's inputs ([`teacher_inputs`][dynlab.analyses.recovery.truth.teacher_inputs]); the
teacher's fingerprint is its cached ground truth
([`teacher_truth`][dynlab.analyses.recovery.truth.teacher_truth]), the student's is measured the same
way ([`fingerprint`][dynlab.analyses.recovery.fingerprint.fingerprint]).
Four scores:

1. **DSA** distance to the teacher against the teacher's noise-to-noise null: inside the
   teacher's variability or not ([`dsa_score`][dynlab.analyses.recovery.dsa_score]);
2. **fixed points**: matched count, same stability class, fraction of the teacher's points
   recovered, after the best linear map between the state spaces
   ([`fixed_point_score`][dynlab.analyses.recovery.fixed_point_score]);
3. **spectrum**: $\lambda_1$, the number of positive exponents and the Kaplan–Yorke dimension with
   intervals ([`spectrum_score`][dynlab.analyses.recovery.spectrum_score]);
4. **state $R^2$** of the teacher's latents from the student's states, held out
   ([`state_r2`][dynlab.analyses.recovery.state_r2]).
"""

from __future__ import annotations

import math
from typing import Annotated

import jax
import numpy as np
import xarray as xr

from dynlab.analyses.recovery.dsa_score import dsa_to_teacher
from dynlab.analyses.recovery.figure import recovery_figure, recovery_summary
from dynlab.analyses.recovery.fingerprint import FingerprintOptions, fingerprint, of_model, of_teacher
from dynlab.analyses.recovery.fixed_point_score import fixed_point_agreement
from dynlab.analyses.recovery.spectrum_score import spectrum_agreement
from dynlab.analyses.recovery.state_r2 import state_r2
from dynlab.analyses.recovery.truth import teacher_inputs, teacher_truth
from dynlab.config import Range
from dynlab.errors import ConfigError, require_positive
from dynlab.provenance import stamp
from dynlab.outputs import Output
from dynlab.registry import register
from dynlab.tasks.teachers import TeacherTask
from dynlab.teachers.cache import require_writable

def teacher_of(task):
    """The teacher of ``task``; a one-line ConfigError naming the teacher tasks when it has none."""
    if not isinstance(task, TeacherTask):
        from dynlab import registry

        name = "none" if task is None else type(task).__name__
        teachers = [e.name for e in registry.entries("task") if isinstance(e.obj, type) and issubclass(e.obj, TeacherTask)]
        raise ConfigError(f"recovery scores compare a student with its teacher, and its task ({name}) has no teacher: "
                          f"train on (or give --task) one of {', '.join(teachers)}")
    return task.teacher


def _task_name(task, teacher) -> str:
    """The registered name of the teacher's task (``teacher-line-attractor``), as users type it."""
    from dynlab import registry

    return next((e.name for e in registry.entries("task") if e.obj is type(task)), type(teacher).__name__)


@register("analysis", "recovery", "recovery of a teacher's dynamics by its student: DSA vs the teacher's null, "
          "fixed points, Lyapunov spectrum, held-out state R^2", figure=recovery_figure, summary=recovery_summary,
          headline=(("dsa_distance", "DSA distance to the teacher (rad)"),
                    ("fp_recovered_fraction", "teacher's fixed points recovered"),
                    ("lambda1_student", "student's λ₁"),
                    ("r2", "held-out R² of the teacher's latents")),
          outputs=(*Output.each("fp_teacher_points fp_student_points fp_matched fp_same_class n_positive_teacher "
                                "n_positive_student", "count"),
                   *Output.each("fp_recovered_fraction lambda1_agree ky_agree n_positive_agree dsa_inside_null "
                                "dsa_p_value", "fraction"),
                   *Output.each("lambda1_teacher lambda1_teacher_low lambda1_teacher_high lambda1_student "
                                "lambda1_student_low lambda1_student_high ky_teacher ky_teacher_low ky_teacher_high "
                                "ky_student ky_student_low ky_student_high dsa_null_level dsa_null_median"),
                   Output("dsa_distance", "real", bounds=(0.0, math.pi), description="DSA distance to the teacher (rad)"),
                   Output("dsa_null_size", "exact"), Output("r2", "real", bounds=(-math.inf, 1.0)),
                   Output("dsa_null", "field", ("null_pair",))),
          check=lambda model, **options: check_recovery(model, **options) and None)
def recovery_analysis(model, *, task="train", trials: int = 8, burn_in: int = 0, ics: int = 64,
                      realisations: Annotated[int, Range(minimum=2)] = 5,
                      steps: int = 2000, lyapunov_burn_in: int = 200, null_draws: int = 40, pcs: int = 8,
                      n_delays: int = 10, rank: int = 6, match_tol: float = 0.05, held_out: float = 0.5,
                      seed: int = 0) -> xr.Dataset:
    r"""The four recovery scores of a student ``model`` against the teacher of ``task`` (module docstring).

    Args:
        task: a teacher task (default: the model's own).
        trials: trials of the teacher's inputs (drawn from ``seed``) that drive both systems.
        burn_in: steps at the start of each trial left out of the states the fixed-point search starts from.
        ics: initial states of the fixed-point search.
        realisations: initial states (the last states of the first trials) of the Lyapunov spectrum.
        steps: steps of each spectrum run at zero input, of which ``lyapunov_burn_in`` are not accumulated.
        lyapunov_burn_in: first steps of each spectrum run that are not accumulated.
        null_draws: further input draws of the teacher, in pairs, for the DSA null (38 or more for a test at 5%).
        pcs: principal components each trajectory is observed on (DSA).
        n_delays: delays of the HAVOK embedding (DSA).
        rank: rank of the HAVOK operator (DSA).
        match_tol: largest distance of matched fixed points, in units of the teacher's state size.
        held_out: fraction of the trials the $R^2$ is scored on (the map is fitted on the others).
        seed: the inputs, the null draws and the searches.

    **Returns** a dataset of scalars: ``dsa_distance``, ``dsa_null_level``, ``dsa_null_median``,
    ``dsa_p_value``, ``dsa_inside_null`` and ``dsa_null`` (`null_pair`); ``fp_teacher_points``,
    ``fp_student_points``, ``fp_matched``, ``fp_same_class``, ``fp_recovered_fraction``;
    ``lambda1_{teacher,student}`` and ``ky_{teacher,student}`` with ``_low``/``_high`` interval
    bounds and ``lambda1_agree``, ``ky_agree`` (the intervals overlap); ``n_positive_{teacher,student}``
    and ``n_positive_agree``; ``r2``. Attrs: the teacher's digest and the options.
    """
    teacher = teacher_of(None if isinstance(task, str) else task)
    if model.input_size != teacher.input_size:
        raise ConfigError(f"the student reads {model.input_size} inputs per step but its teacher gives "
                          f"{teacher.input_size}")
    options = check_recovery(model, trials=trials, burn_in=burn_in, ics=ics, realisations=realisations, steps=steps,
                             lyapunov_burn_in=lyapunov_burn_in, null_draws=null_draws, pcs=pcs, n_delays=n_delays,
                             rank=rank, match_tol=match_tol, seed=seed, cache=False)
    length = task.length
    t_fixed, t_spectrum = teacher_truth(teacher, length, options)
    xs = teacher_inputs(teacher, length, options)
    teacher_system, student = of_teacher(teacher), of_model(model)
    latents, states = teacher_system.visit(xs), student.visit(xs)
    r2, to_teacher = state_r2(states, latents, held_out=held_out)
    s_fixed, s_spectrum = fingerprint(student, xs, options)
    flat = latents.reshape(-1, latents.shape[-1])
    scale = float(np.sqrt(np.mean(np.sum((flat - flat.mean(axis=0)) ** 2, axis=-1))))
    scores = fixed_point_agreement(t_fixed, s_fixed, to_teacher, scale, tol=match_tol)
    scores.update(spectrum_agreement(t_spectrum, s_spectrum))
    null_key = jax.random.fold_in(jax.random.key(seed), 1)
    draws = [teacher.inputs(jax.random.fold_in(null_key, k), trials, length) for k in range(null_draws)]
    runs = latents[None] if not draws else np.concatenate([  # one compiled run for every draw
        latents[None], teacher_system.visit(np.concatenate(draws)).reshape(null_draws, *latents.shape)])
    dsa, null = dsa_to_teacher(states, runs, pcs=min(pcs, states.shape[-1], latents.shape[-1]),
                               n_delays=n_delays, rank=rank, seed=seed)
    scores.update(dsa)
    scores["r2"] = r2
    data = {name: ((), value) for name, value in scores.items()}
    data["dsa_null"] = (("null_pair",), null, {"units": "rad", "long_name": "DSA distance of the teacher from itself "
                                                                          "between two input draws"})
    ds = xr.Dataset(data)
    ds["r2"].attrs["long_name"] = "held-out R^2 of the teacher's latents from the student's states"
    ds["dsa_distance"].attrs.update(units="rad", long_name="DSA distance of the student from the teacher")
    return stamp(ds, analysis="recovery", seed=seed, config={
        "teacher": _task_name(task, teacher), "teacher_digest": teacher.digest(), "trials": trials, "burn_in": burn_in,
        "ics": ics, "realisations": realisations, "steps": steps, "lyapunov_burn_in": lyapunov_burn_in,
        "null_draws": null_draws, "pcs": pcs, "n_delays": n_delays, "rank": rank, "match_tol": match_tol,
        "held_out": held_out, "state_scale": scale})


def check_recovery(model, *, trials: int, burn_in: int, ics: int, realisations: int, steps: int,
                   lyapunov_burn_in: int, null_draws: int, pcs: int, n_delays: int, rank: int, match_tol: float,
                   seed: int, cache: bool = True, **_) -> FingerprintOptions:
    """The options of [`recovery_analysis`][] as its fingerprint's options, or a one-line
    [`ConfigError`][]; with ``cache``, the teacher cache must be writable too
    ([`require_writable`][dynlab.teachers.cache.require_writable]: the teacher's ground truth is kept
    there).

    Enforces, in one place: recovery's options are valid (``realisations`` >= 2 and <= ``trials``,
    an even ``null_draws``, ...). Called by the analysis itself and, as its registered ``check``, by
    scenario validation before any cell trains ([`dynlab.scenarios.spec.check_cells`][]); a study
    with a read-only ``$DYNLAB_CACHE`` is refused there, even one whose truths are all cached."""
    if isinstance(null_draws, bool) or not isinstance(null_draws, int) or null_draws < 0 or null_draws % 2:
        raise ConfigError(f"null_draws must be an even integer >= 0 (the draws are used in pairs), got {null_draws!r}")
    for name, value in (("pcs", pcs), ("n_delays", n_delays), ("rank", rank)):
        require_positive(name, value)
    if isinstance(match_tol, bool) or not isinstance(match_tol, (int, float)) or not 0 < match_tol < np.inf:
        raise ConfigError(f"match_tol must be a positive finite number, got {match_tol!r}")
    options = FingerprintOptions(trials=trials, burn_in=burn_in, ics=ics, realisations=realisations, steps=steps,
                                 lyapunov_burn_in=lyapunov_burn_in, seed=seed)
    if cache:
        require_writable()
    return options

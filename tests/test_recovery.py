"""Recovery scores against their acceptance (issue 35): a student that IS its teacher (the teacher's
own arrays) scores a DSA distance inside the teacher's null, 100% of the fixed points recovered
with the same classes, spectrum agreement within the intervals and a held-out R^2 of 1; a student
with shuffled recurrent weights scores outside the null. And a score asked without a teacher is
one line."""

import equinox as eqx
import matplotlib.pyplot as plt
import jax
import numpy as np
import pytest

from dynlab import registry
from dynlab.analyses.recovery import recovery_analysis
from dynlab.analyses.recovery.dsa_score import dsa_to_teacher
from dynlab.analyses.recovery.figure import recovery_figure, recovery_summary
from dynlab.analyses.recovery.fingerprint import of_model, of_teacher
from dynlab.analyses.recovery.state_r2 import state_r2
from dynlab.analyses.recovery.truth import FingerprintOptions, teacher_inputs, teacher_truth, truth_dir
from cli_runner import invoke, one_line_error

ALPHA = 0.1
OPTIONS = dict(steps=300, lyapunov_burn_in=50, ics=16, trials=4, realisations=2, null_draws=38)


@pytest.fixture(scope="module")
def copied(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DYNLAB_CACHE", str(tmp_path_factory.mktemp("cache")))
        task = registry.build("task", "teacher-line-attractor", n=8, alpha=ALPHA, length=100)
        yield task, recovery_analysis(task.teacher.model, task=task, **OPTIONS)


def test_the_line_attractor_truth_has_exactly_one_marginal_direction(copied):
    task, _ = copied
    options = FingerprintOptions(**{k: v for k, v in OPTIONS.items() if k != "null_draws"})
    where = truth_dir(task.teacher, task.length, options)
    assert sorted(p.name for p in where.iterdir()) == ["fixed-points.nc", "lyapunov.nc"]  # computed once, stored
    fixed, spectrum = teacher_truth(task.teacher, task.length, options)  # read back
    assert fixed.sizes["point"] >= 4 and set(fixed.stability.values) == {"marginal"}
    assert (fixed.n_marginal.values == 1).all()
    # closed form: eigenvalue 1 along u, 1 - alpha in the 7 other directions, at every point
    assert np.allclose(fixed.eig_abs.values[:, 0], 1, atol=1e-9)
    assert np.allclose(fixed.eig_abs.values[:, 1:], 1 - ALPHA, atol=1e-9)
    u = np.asarray(task.teacher.model.readout.weight[0], np.float64)
    assert np.allclose(fixed.points.values, np.outer(fixed.points.values @ u, u), atol=1e-6)  # on the line c u
    assert spectrum.ci_low.values[0] <= 0 <= spectrum.ci_high.values[0]
    assert np.allclose(spectrum["mean"].values[1:], np.log(1 - ALPHA), atol=1e-6)


def test_a_student_that_is_the_teacher_recovers_everything(copied):
    _, ds = copied
    assert bool(ds.dsa_inside_null) and int(ds.dsa_null_size) == 19 and np.isfinite(float(ds.dsa_null_level))
    assert int(ds.fp_teacher_points) > 0
    assert float(ds.fp_recovered_fraction) == 1.0 and int(ds.fp_same_class) == int(ds.fp_teacher_points)
    assert bool(ds.lambda1_agree) and bool(ds.ky_agree) and bool(ds.n_positive_agree)
    assert float(ds.r2) == pytest.approx(1.0, abs=1e-9)


def test_the_summary_and_figure_say_so(copied):
    _, ds = copied
    text = recovery_summary(ds)
    assert "inside the teacher's variability" in text and "(100%)" in text and "R^2 1.0000" in text
    fig = recovery_figure(ds)
    assert len(fig.axes) == 4
    plt.close(fig)


def test_a_student_with_shuffled_recurrent_weights_is_outside_the_null(copied):
    task, ds = copied
    teacher = task.teacher
    w = teacher.model.cells[0].w
    shuffled = eqx.tree_at(lambda m: m.cells[0].w, teacher.model,
                           jax.random.permutation(jax.random.key(5), w.reshape(-1)).reshape(w.shape))
    options = FingerprintOptions(trials=OPTIONS["trials"], realisations=2)
    xs = teacher_inputs(teacher, task.length, options)
    null_key = jax.random.fold_in(jax.random.key(0), 1)  # the analysis's own null draws
    draws = np.concatenate([xs] + [teacher.inputs(jax.random.fold_in(null_key, k), xs.shape[0], task.length)
                                   for k in range(OPTIONS["null_draws"])])
    runs = of_teacher(teacher).visit(draws).reshape(-1, *xs.shape[:2], teacher.state_size)
    scores, null = dsa_to_teacher(of_model(shuffled).visit(xs), runs)
    assert np.allclose(null, ds.dsa_null.values)  # the null the copied student was judged against
    assert not scores["dsa_inside_null"] and scores["dsa_distance"] > float(ds.dsa_null_level)


def test_held_out_r2_is_one_for_an_invertible_linear_image_and_low_for_noise():
    rng = np.random.default_rng(0)
    latents = rng.normal(size=(6, 50, 4))
    image = latents @ rng.normal(size=(4, 7)) + 3.0  # an injective affine image in a larger space
    assert state_r2(image, latents)[0] == pytest.approx(1.0, abs=1e-10)
    assert state_r2(rng.normal(size=(6, 50, 7)), latents)[0] < 0.2


def test_a_recovery_score_without_a_teacher_is_one_line(tmp_path):
    result = invoke(["analyze", "recovery", "--model", "rnn", "--task", "adding", "--set", "model.hidden=4"], tmp_path)
    one_line_error(result, "no teacher", "teacher-lorenz")

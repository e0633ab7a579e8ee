"""Model regularisers in training: SequenceModel.penalty over a layer stack, and BPTT adding it."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import dynlab
from dynlab import experiment

NET = {"hidden": 5, "d_m": 3, "d_tree": 2, "d_branch": 3, "rho_rec": 0.5, "tau_min": 1.0, "tau_max": 50.0,
       "readout_neurons": 2, "readout_d_m": 2, "readout_d_tree": 2, "readout_d_branch": 2}


def test_stack_penalty_sums_each_layers_penalty_on_its_own_inputs():
    """Layer 1's inputs are layer 0's outputs; the model rebuilds them from the stored states without
    a scan. Truth: each layer run on its own by an explicit step loop, its penalty taken directly."""
    model = dynlab.build("model", unit="elm-net", input_size=3, output_size=2, layers=2, key=jax.random.key(0), **NET)
    xs = jax.random.normal(jax.random.key(1), (12, 3))

    @eqx.filter_jit
    def layer_by_layer(model, xs):
        expected, us = 0.0, xs
        for cell in model.cells:  # each layer alone, scanned over its own inputs
            traj, outs = jax.lax.scan(lambda s, u, cell=cell: (lambda s2, o: (s2, (s2, o)))(*cell(s, u)),
                                      cell.init_state(), us)[1]
            expected, us = expected + cell.penalty(us, traj), outs
        return expected

    expected = layer_by_layer(model, xs)
    assert model.penalised and expected > 0
    np.testing.assert_allclose(eqx.filter_jit(lambda m, xs: m.penalty(xs, m.trajectory(xs)[1]))(model, xs), expected,
                               rtol=1e-5)


def test_bptt_adds_the_penalty_and_reports_the_task_loss():
    def config(l1):
        return {"seed": 0, "model": {"unit": "elm-net", **NET, "mlp_l2": 0.0 if l1 == 0 else 0.1, "activity_l1": l1},
                "task": {"name": "adding", "length": 8}}

    plain, penalised = experiment.build(config(0.0)), experiment.build(config(2.0))
    assert not plain.model.penalised and penalised.model.penalised
    batch = plain.task.batch(jax.random.key(5), 8)
    # same initial weights: the penalised gradient is the plain one plus the penalty's gradient
    g_plain, m_plain = eqx.filter_jit(plain.rule.grads)(plain.model, batch, None)
    g_pen, m_pen = eqx.filter_jit(penalised.rule.grads)(penalised.model, batch, None)
    np.testing.assert_allclose(m_pen["loss"], m_plain["loss"], rtol=1e-6)  # the task loss, penalty left out

    def mean_penalty(m):
        _, states = jax.vmap(m.trajectory)(batch[0])
        return jnp.mean(jax.vmap(m.penalty)(batch[0], states))

    g_reg = eqx.filter_jit(eqx.filter_grad(mean_penalty))(penalised.model)
    for a, b, c in zip(*(jax.tree_util.tree_leaves(g) for g in (g_pen, g_plain, g_reg))):
        np.testing.assert_allclose(a, b + c, rtol=1e-4, atol=1e-6)

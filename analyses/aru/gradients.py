r"""``gradient-by-position`` (ARU App. C.5, Fig. 18): how much each input position contributes to the
gradient of the task loss, with its figure."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import Array

from dynlab.analyses.aru.frozen_map import recurrent_layer
from dynlab.analyses.aru.plotting import title
from dynlab.config import Count
from dynlab.errors import ConfigError, require_positive
from dynlab.figures import subplots
from dynlab.losses import get_loss
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register


def plot_gradient_by_position(ds: xr.Dataset):
    """Fig. 18: gradient norms by input position (mean ± std over samples) and the batch W_hh gradient."""
    fig, (ax_s, ax_w) = subplots(1, 2, figsize=(11, 4))
    t = ds.time.values
    for name, label in (("input_grad", "|∂L/∂x_t|"), ("preact_grad", "|∂L/∂a_t|"), ("w_hh_grad", "|δ_t h_{t-1}ᵀ|_F")):
        m, sd = ds[f"{name}_mean"].values, ds[f"{name}_std"].values
        line, = ax_s.plot(t, m, lw=1, label=label)
        ax_s.fill_between(t, np.maximum(m - sd, m * 1e-3), m + sd, color=line.get_color(), alpha=0.15)
    ax_s.set(yscale="log", xlabel="input position t", ylabel="norm", title=f"per sample (mean ± std over {ds.sizes['sample']})")
    ax_s.legend(fontsize=7)
    ax_w.plot(t, ds.w_hh_grad_batch, lw=1, label="contribution of position t")
    ax_w.plot(t, ds.w_hh_grad_from, lw=1, label="accumulated from t to the end")
    ax_w.set(yscale="log", xlabel="input position t", ylabel="|·|_F", title="∂L/∂W_hh of the batch-mean loss")
    ax_w.legend(fontsize=7)
    title(fig, ds, f"gradient by position, {ds.attrs.get('task', '')}")
    return fig


def _activity(state):
    return state.h if hasattr(state, "h") else state


@eqx.filter_jit
def _position_grads(model, xs: Array, ys: Array, masks: Array, loss_name: str):
    r"""Per sample: $\partial L/\partial x_t$ ``[B, T, D]``, $\delta_t = \partial L/\partial a_t$ ``[B, T, H]``
    (through a zero per-neuron drive, which enters $a_t$ exactly where $W_{hh} h_{t-1}$ does) and
    the activities $h_t$ ``[B, T, H]``."""
    loss = get_loss(loss_name).loss
    H = model.cells[0].hidden

    def sample_loss(x, delta, y, mask):
        return loss(model(x, delta)[None], y[None], mask[None])

    def one(x, y, mask):
        gx, gd = jax.grad(sample_loss, argnums=(0, 1))(x, jnp.zeros((x.shape[0], H), x.dtype), y, mask)
        _, (state,) = model.trajectory(x)
        return gx, gd, _activity(state)

    return jax.vmap(one)(xs, ys, masks)


def gradient_by_position_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze gradient-by-position`` prints: the gradient norms at the first and
    last position and their maximum, and the whole sequence's |dL/dW_hh|."""
    lines = []
    for name in ("input_grad", "preact_grad", "w_hh_grad"):
        m = ds[f"{name}_mean"].values
        lines.append(f"{name:<12} mean over samples: first position {m[0]:.3g}, last {m[-1]:.3g}, "
                     f"max {m.max():.3g} at t = {int(m.argmax())}")
    lines.append(f"|dL/dW_hh| of the batch-mean loss, whole sequence: {float(ds.w_hh_grad_from[0]):.4g}")
    return "\n".join(lines)


@register(
    "analysis",
    "gradient-by-position",
    "ARU Fig. 18: gradient norms by input position",
    figure=plot_gradient_by_position,
    summary=gradient_by_position_summary,
    outputs=(
        *Output.each("input_grad preact_grad w_hh_grad", "field", ("sample", "time")),
        *Output.each("input_grad_mean input_grad_std preact_grad_mean preact_grad_std w_hh_grad_mean w_hh_grad_std "
                     "w_hh_grad_batch w_hh_grad_from", "field", ("time",)),
    ),
)
def gradient_by_position_analysis(model, *, task="train", batch: Count = 16, seed: int = 0) -> xr.Dataset:
    r"""How much each input position contributes to the gradient of the task loss (App. C.5, Fig. 18).

    For a one-layer model of the ARU family, ``batch`` held-out samples of ``task`` (required) and
    each sample's loss $L$:

    * ``input_grad`` (``sample``, ``time``): $\lVert \partial L/\partial x_t\rVert$;
    * ``preact_grad``: $\lVert\delta_t\rVert$, $\delta_t = \partial L/\partial a_t$ the gradient at the
      pre-activation of step $t$ — the signal backpropagated through time;
    * ``w_hh_grad``: the Frobenius norm of step $t$'s contribution to $\partial L/\partial W_{hh}$,
      $\lVert \delta_t h_{t-1}^\top\rVert_F = \lVert\delta_t\rVert\,\lVert h_{t-1}\rVert$
      ($\lVert\delta_t \odot h_{t-1}\rVert$ for an isolated, diagonal $W_{hh}$); $W_{hh}$ enters the
      step only through $a_t$, so $\partial L/\partial W_{hh} = \sum_t \delta_t h_{t-1}^\top$;
    * for the batch-mean loss (what a training step sees): ``w_hh_grad_batch`` (``time``), the norm
      of $C_t = \frac1B\sum_b \delta^b_t h^{b\top}_{t-1}$, and ``w_hh_grad_from`` (``time``), the norm
      of $\sum_{t' \ge t} C_{t'}$ — the gradient accumulated from position $t$ to the end, the
      paper's other reading ("starting the gradient accumulation at different points").

    Each per-sample variable also comes as ``<name>_mean`` and ``<name>_std`` over samples.

    Args:
        task: the task whose samples and loss are used (default: the model's own task).
        batch: held-out samples.
        seed: seed of the samples.
    """
    if task is None or isinstance(task, str):
        raise ConfigError("gradient-by-position needs a task (its inputs and loss), e.g. --task adding")
    require_positive("batch", batch)
    cell = recurrent_layer(model)
    if task.input_size != model.input_size:
        raise ConfigError(f"task inputs have {task.input_size} features but the model expects {model.input_size}")
    x, y, mask = task.batch(jax.random.key(seed), batch, split="test")
    gx, gd, h = _position_grads(model, x, y, mask, task.loss)
    h_prev = jnp.concatenate([jnp.broadcast_to(_activity(cell.init_state()), (batch, 1, cell.hidden)), h[:, :-1]], 1)
    if cell.isolated:
        per_sample = jnp.linalg.norm(gd * h_prev, axis=-1)
        contributions = jnp.mean(gd * h_prev, axis=0)  # [T, H]
    else:
        per_sample = jnp.linalg.norm(gd, axis=-1) * jnp.linalg.norm(h_prev, axis=-1)
        contributions = jnp.einsum("bti,btj->tij", gd, h_prev) / batch  # [T, H, H]
    cumulative = jnp.cumsum(contributions[::-1], axis=0)[::-1]
    frob = lambda c: np.asarray(jnp.sqrt(jnp.sum(c**2, axis=tuple(range(1, c.ndim)))))  # noqa: E731

    data = {}
    for name, values, long in (
        ("input_grad", jnp.linalg.norm(gx, axis=-1), "|dL/dx_t|"),
        ("preact_grad", jnp.linalg.norm(gd, axis=-1), "|dL/da_t|"),
        ("w_hh_grad", per_sample, "|contribution of step t to dL/dW_hh|_F"),
    ):
        values = np.asarray(values)
        data[name] = (("sample", "time"), values, {"long_name": long})
        data[f"{name}_mean"] = ("time", values.mean(0), {"long_name": f"mean {long} over samples"})
        data[f"{name}_std"] = ("time", values.std(0), {"long_name": f"std of {long} over samples"})
    data["w_hh_grad_batch"] = ("time", frob(contributions), {"long_name": "|C_t|_F, batch-mean loss"})
    data["w_hh_grad_from"] = ("time", frob(cumulative), {"long_name": "|sum_{t'>=t} C_t'|_F, batch-mean loss"})
    ds = xr.Dataset(
        data,
        coords={"time": ("time", np.arange(x.shape[1]), {"long_name": "input position", "units": "steps"}),
                "sample": ("sample", np.arange(batch))},
    )
    return stamp(ds, analysis="gradient-by-position", seed=seed, config=dict(task=task.describe(), loss=task.loss,
        batch=batch, isolated=cell.isolated))

r"""Rules compared on one model: the gradients that each of a config's rules gives on the same model
and the same batch.

A rule is a value that turns ``(model, batch)`` into gradients ([`dynlab.rules.base.Rule.grads`][]),
so comparing two learning rules needs no program: a cell whose ``[rule]`` names several
(``name = ["pc-time", "bptt"]``, [`dynlab.experiment.rule_names`][]) runs ``grad-compare`` at any of
its stages, and PC through time against BPTT, PC against BP, or one inference method against
another is a choice of rules and their configs. For every pair of rules $(a, b)$, in the order
named:

$$ \cos(g_a, g_b) = \frac{\langle g_a, g_b\rangle}{\|g_a\|\,\|g_b\|}, \qquad
   \rho = \frac{\|g_a\|}{\|g_b\|}, $$

over all trainable parameters (``cosine``, ``norm_ratio``) and over each parameter array on its
own (``group_cosine``, ``group_norm_ratio`` along ``group``, named by its path in the model, e.g.
``.cells[0].weight_hh``). The cosine is 0 where the product of the norms is below
[`COSINE_EPS`][dynlab.analyses.pc_bp.COSINE_EPS] (the convention of the PC–BP comparison). Each rule's own
metrics (``loss``, and for predictive coding ``energy``, ``converged``, ``inference_steps``,
``activity_grad_ratio``, ``smoothing``, …) are recorded along ``rule`` (NaN for a rule that has no
such metric), and ``cosine`` is NaN where a rule's inference did not converge (``converged`` 0);
``cosine_unconverged`` keeps every value, and ``inference_converged`` is 1 where every rule's
did. With two rules there is one pair, and its variables are scalars (the ``pair`` coordinate
says which), so that a claim selects them without naming the pair.

The norm ratio compares the rules' objectives as they are: ``pc-time``'s energy sums its output
term over the scored steps, while ``bptt`` trains the task's loss, a mean; the cosine does not
depend on that scale.

``s_minus_1``: the energy rescaling of PC through time linearised at the forward pass
([`dynlab.rules.pc_time.rescaling`][]), which sets the size of the equilibrium's errors
($s - 1 \to 0$: PC → BPTT), with ``readout_width``, the read-out's fan-in $N$ that the law
$s - 1 \propto T/N$ is about ([`dynlab.time_residual`][]).
"""

from __future__ import annotations

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.analyses.pc_bp import cosine as total_cosine
from dynlab.errors import ConfigError, require_positive
from dynlab.figures import subplots
from dynlab.outputs import Output, metric_outputs
from dynlab.registry import register

VARIABLES = {
    "cosine": "cosine of the two rules' gradients (NaN where a rule's inference did not converge)",
    "cosine_unconverged": "cosine of the two rules' gradients, converged or not",
    "norm_ratio": "|g_a| / |g_b| of the two rules' gradients",
    "group_cosine": "cosine of the two rules' gradients of one parameter array",
    "group_norm_ratio": "|g_a| / |g_b| of one parameter array",
    "grad_norm": "norm of the rule's gradient over all trainable parameters",
}


@eqx.filter_jit
def _grads(rule, model, batch, key):
    """A rule's gradients and metrics on the batch, compiled once per rule and model structure (a
    lambda made at each call compiled at each call)."""
    return rule.grads(model, batch, key)


def _leaves(grads) -> list[tuple[str, jax.Array]]:
    """``(path, array)`` of every trainable leaf of a gradient PyTree."""
    flat = jax.tree_util.tree_flatten_with_path(eqx.filter(grads, eqx.is_inexact_array))[0]
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in flat]


def figure(ds: xr.Dataset):
    """Per pair of rules: the cosine of their gradients of each parameter array (bars) and over all
    parameters (the line), and the norm ratio of each array (dots, right axis)."""

    pairs = ds["pair"].values.reshape(-1)
    fig, axes = subplots(len(pairs), 1, figsize=(max(5.0, 0.5 * ds.sizes["group"] + 2), 3.2 * len(pairs)),
                             squeeze=False)
    for ax, pair in zip(axes[:, 0], pairs):
        one = ds if "pair" not in ds.dims else ds.sel(pair=pair)
        x = np.arange(ds.sizes["group"])
        total = float(one.cosine_unconverged)
        ax.bar(x, one.group_cosine.values, color="C0")
        ax.axhline(total, color="k", lw=1, label=f"all parameters: {total:.4f}")
        ax.set(ylim=(min(0.0, float(np.nanmin(one.group_cosine.values))), 1.02), ylabel="cosine", title=str(pair))
        ax.set_xticks(x, [str(g) for g in ds.group.values], rotation=30, ha="right", fontsize=7)
        right = ax.twinx()
        right.plot(x, one.group_norm_ratio.values, "o", color="C1", ms=4)
        right.set_ylabel("norm ratio |g_a| / |g_b|", color="C1")
        ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def _ratio(a, b) -> float:
    return float(a / b) if b > 0 else float("nan")


@register("analysis", "grad-compare", "the gradients of a cell's rules on one model and batch: cosine, norm ratio, "
                                      "per parameter array", takes="rules", figure=figure,
          outputs=(*Output.each("cosine cosine_unconverged norm_ratio inference_converged", leading=("pair",)),
                   *Output.each("group_cosine group_norm_ratio", dims=("group",), leading=("pair",)),
                   *Output.each("activity_grad_norm activity_grad_ratio converged energy energy_change "
                                "inference_steps loss", dims=("rule",), optional=True),
                   Output("grad_norm", "real", ("rule",)), *metric_outputs(("rule",)),
                   Output("s_minus_1", optional=True), Output("readout_width", "exact", optional=True)))
def grad_compare(model, rules: dict, task="train", *, batch_size: int = 16, batch_seed: int = 0,
                 s_minus_1: bool = False) -> xr.Dataset:
    """The rules' gradients of ``model`` on one batch of ``task`` (``batch_size`` samples of its
    training split, drawn with key ``batch_seed``), compared pair by pair (module docstring).

    Args:
        model: the model every rule differentiates (the same arrays for each).
        rules: name -> rule, at least two ([`dynlab.experiment.Experiment`][] ``rules``).
        task: the task whose batch they see; ``"train"`` (the default, resolved by the command line
            and the scenario runner): the model's own.
        batch_size, batch_seed: the batch.
        s_minus_1: also record PC through time's energy rescaling $s - 1$ at the forward pass
            and the read-out's fan-in (one VJP per read-out entry of a sample).
    """
    require_positive("batch_size", batch_size)
    names = list(rules)
    if len(names) < 2:
        raise ConfigError(f"grad-compare compares the rules a config names, and it names {len(names)} "
                          f"({', '.join(names)}); name two or more, e.g. rule.name = [\"pc-time\", \"bptt\"]")
    if task is None or isinstance(task, str):
        raise ConfigError("grad-compare draws its batch from a task: give one (--task NAME; in a scenario "
                          "task = \"train\", the cell's own)")
    batch = task.batch(jax.random.key(batch_seed), batch_size, "train")
    key = jax.random.key(0)  # the rules compared here are deterministic; one key for all
    grads, metrics = {}, {}
    for name in names:
        g, m = _grads(rules[name], model, batch, key)
        grads[name], metrics[name] = g, {k: float(v) for k, v in jax.device_get(m).items() if np.ndim(v) == 0}
    converged = {n: metrics[n].get("converged", 1.0) > 0 for n in names}  # rules without inference: converged
    pairs = list(itertools.combinations(names, 2))
    groups = [path for path, _ in _leaves(grads[names[0]])]
    norms = {n: float(jnp.sqrt(sum(jnp.vdot(x, x) for _, x in _leaves(grads[n])))) for n in names}
    cos, cos_all, ratio, g_cos, g_ratio = [], [], [], [], []
    for a, b in pairs:
        c = float(total_cosine(grads[a], grads[b]))
        cos_all.append(c)
        cos.append(c if converged[a] and converged[b] else float("nan"))
        ratio.append(_ratio(norms[a], norms[b]))
        la, lb = dict(_leaves(grads[a])), dict(_leaves(grads[b]))
        g_cos.append([float(total_cosine(la[p], lb[p])) for p in groups])
        g_ratio.append([_ratio(float(jnp.linalg.norm(la[p])), float(jnp.linalg.norm(lb[p]))) for p in groups])
    labels = [f"{a} vs {b}" for a, b in pairs]
    ds = xr.Dataset(
        {
            "cosine": ("pair", np.asarray(cos)),
            "cosine_unconverged": ("pair", np.asarray(cos_all)),
            "norm_ratio": ("pair", np.asarray(ratio)),
            "group_cosine": (("pair", "group"), np.asarray(g_cos)),
            "group_norm_ratio": (("pair", "group"), np.asarray(g_ratio)),
            "grad_norm": ("rule", np.asarray([norms[n] for n in names])),
        },
        coords={"pair": labels, "rule_a": ("pair", [a for a, _ in pairs]), "rule_b": ("pair", [b for _, b in pairs]),
                "group": groups, "rule": names},
    )
    for name, text in VARIABLES.items():
        ds[name].attrs["long_name"] = text
    for metric in sorted({k for m in metrics.values() for k in m}):
        if metric not in ds:
            ds[metric] = ("rule", np.asarray([metrics[n].get(metric, np.nan) for n in names]),
                          {"long_name": f"the rule's {metric} on the batch"})
    if s_minus_1:
        from dynlab.rules.pc_time import rescaling

        x, _, mask = batch
        ds["s_minus_1"] = ((), float(eqx.filter_jit(rescaling)(model, x, mask)),
                           {"long_name": "energy rescaling s - 1 of PC through time, linearised at the forward pass"})
        ds["readout_width"] = ((), int(model.readout.in_features), {"long_name": "the read-out's fan-in N"})
    ds["inference_converged"] = ((), float(all(converged.values())),
                                 {"long_name": "1 where every rule's inference converged (a rule without one counts)"})
    if len(pairs) == 1:  # two rules: one comparison, scalars a claim selects without naming the pair
        ds = ds.squeeze("pair")
    ds.attrs.update(analysis="grad-compare", rules=", ".join(names), batch_size=batch_size, batch_seed=batch_seed)
    return ds

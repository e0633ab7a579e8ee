r"""The ELM neuron and Branch-ELM of the authors' code (AaronSpieler/elmneuron, ``src/``), as the
unit ``elm`` ([`dynlab.units.elm.ELMCell`][]) with the code's conventions selected.

A state dict of the code's ``ELM`` module (v1, ``expressive_leaky_memory_neuron.py``, the format of
the 14 published NeuronIO models ``models/*/neuronio_best_model_state.pt``; or v2,
``expressive_leaky_memory_neuron_v2.py``) has

| key | shape | dynlab |
|---|---|---|
| ``mlp.network.{2i}.weight``, ``.bias`` | $[d_{out}, d_{in}]$, $[d_{out}]$ | ``mlp.weights[i]`` (transposed), ``mlp.biases[i]`` |
| ``_proto_w_s`` | $[d_s]$ | ``w_s_raw`` ($w_s = \mathrm{ReLU}$ of it in both) |
| ``w_y.weight``, ``.bias`` | $[n_{out}, d_m]$, $[n_{out}]$ | the model's read-out |
| ``tau_s`` (v1, per synapse) / ``tau_b`` (v2, per branch) | $[d_s]$ / $[d_{tree}]$ | ``tau_s`` (one value: all must be equal) |
| ``_proto_tau_m`` | $[d_m]$ | ``theta_tau`` when learned; else checked against the fixed grid |
| ``input_to_synapse_indices``, ``valid_indices_mask`` | $[d_s]$ (or $[0]$: no routing) | ``synapse_index`` (masked slots read nothing) |

The code routes $x_t$ to synapses as ``x[:, input_to_synapse_indices] * valid_indices_mask``.
The mask is bool for ``neuronio_routing`` (``index < num_input``: the last window's slots past the
last input, whose index is clamped to ``num_input - 1``, read zero; the published models store it
so) and integer ones for ``random_routing``; both are taken.

and these conventions of the code, each a dynlab value: ``activation = "scaled-tanh"``
($1.7159\tanh(2x/3)$), ``learn_w_s = true`` (also for the vanilla ELM), ``tau_inset = 1e-6`` (its
$\tau_m$ grid is log-spaced in $[\tau_{min} + 10^{-6}, \tau_{max} - 10^{-6}]$), ``tau_bounds =
[memory_tau_min, memory_tau_max]``, ``memory_update = "lambda"`` (v1) or ``"kappa_lambda"`` (v2),
and the ``mlp_activation`` the file was trained with (``"relu"`` or ``"silu"``; a state dict does
not say which: give it). The trace is kept per branch in dynlab and per synapse in v1: the same
function (the trace is linear with one $\tau_s$).

The options are the code's own ``model_config.json`` keys, with the code's defaults, so a
published model's config can be passed as it is; what the weights' shapes say is checked
against them. The parameter count equals the code's ``sum(p.numel() for p in
model.parameters() if p.requires_grad)`` (tested; 54,002 for ``models/best_elm_neuron``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from dynlab.errors import ConfigError, DataError
from dynlab.imports.run import imported
from dynlab.imports.weights import Keys
from dynlab.registry import register
from dynlab.units.elm import neuronio_routing

__all__ = ["elm_neuron"]

INSET = 1e-6  # the code's inset of the tau_m grid and its sigmoid bounds


def _scaled_sigmoid(x, lo, hi):
    return lo + (hi - lo) / (1.0 + np.exp(-x))


@register("format", "elm-neuron", "the ELM neuron / Branch-ELM of AaronSpieler/elmneuron (v1, v2; the published NeuronIO models)")
def elm_neuron(weights: dict[str, np.ndarray], *, num_input: int | None = None, num_output: int | None = None,
               num_memory: int | None = None, lambda_value: float = 5.0, mlp_num_layers: int | None = None,
               mlp_hidden_size: int | None = None, mlp_activation: Literal["relu", "silu"] = "relu",
               tau_s_value: float | None = None, tau_b_value: float | None = None, memory_tau_min: float = 1.0,
               memory_tau_max: float = 1000.0, learn_memory_tau: bool = False, w_s_value: float = 0.5,
               num_branch: int | None = None, num_synapse_per_branch: int = 1,
               input_to_synapse_routing: Literal["random_routing", "neuronio_routing"] | None = None,
               delta_t: float = 1.0, prefix: str = "") -> tuple[dict, object]:
    """The authors' ``ELM`` (v1 or v2) as a [`SequenceModel`][dynlab.models.SequenceModel] of one
    ``elm`` cell; options: the code's ``model_config.json`` keys (module doc) and ``prefix``
    (where the module's keys start in the file)."""
    sd = Keys(weights, prefix, what="ELM neuron", within="prefix")
    version = 2 if sd.has("tau_b") else 1
    if mlp_activation not in ("relu", "silu"):
        raise ConfigError(f"mlp_activation must be 'relu' or 'silu' (the code's MLP activations), got {mlp_activation!r}")
    if input_to_synapse_routing not in (None, "random_routing", "neuronio_routing"):
        raise ConfigError("input_to_synapse_routing must be None, 'random_routing' or 'neuronio_routing', "
                          f"got {input_to_synapse_routing!r}")
    w_y = sd.shape("w_y.weight")
    if w_y is None or len(w_y) != 2:
        raise DataError(f"ELM neuron: missing or malformed key {prefix + 'w_y.weight'!r} ([num_output, num_memory]); "
                        "is this the state dict of the authors' ELM?")
    n_out, d_m = w_y
    for name, given, found in (("num_output", num_output, n_out), ("num_memory", num_memory, d_m)):
        if given is not None and given != found:
            raise DataError(f"ELM neuron: {name} = {given}, but w_y.weight has shape {list(w_y)}")
    layers = 0
    while sd.has(f"mlp.network.{2 * (layers + 1)}.weight"):
        layers += 1
    if mlp_num_layers is not None and mlp_num_layers != layers:
        raise DataError(f"ELM neuron: mlp_num_layers = {mlp_num_layers}, but the file's MLP has {layers} hidden layers")
    first = sd.shape("mlp.network.0.weight")
    if first is None or len(first) != 2:
        raise DataError(f"ELM neuron: missing key {prefix + 'mlp.network.0.weight'!r}")
    d_mlp = first[0] if layers else 2 * d_m
    if mlp_hidden_size is not None and layers and mlp_hidden_size != d_mlp:
        raise DataError(f"ELM neuron: mlp_hidden_size = {mlp_hidden_size}, but mlp.network.0.weight has shape {list(first)}")
    n_branch = first[1] - d_m
    if n_branch < 1:
        raise DataError(f"ELM neuron: mlp.network.0.weight has {first[1]} inputs, fewer than num_memory + 1 = {d_m + 1}")
    if num_branch is not None and num_branch != n_branch:
        raise DataError(f"ELM neuron: num_branch = {num_branch}, but the MLP reads {n_branch} branches (+ {d_m} memories)")
    n_syn = n_branch * num_synapse_per_branch
    routed = input_to_synapse_routing is not None
    routing_shape = sd.shape("input_to_synapse_indices")
    if not routed and routing_shape not in (None, (0,)):
        # the state dict routes inputs, but not how many there are or by which rule: its config does
        raise DataError(f"ELM neuron: the file routes inputs to {routing_shape[0]} synapses "
                        f"('input_to_synapse_indices' {list(routing_shape)}), so it needs input_to_synapse_routing, num_input and "
                        "num_synapse_per_branch: pass the model's model_config.json with --options-file")
    if num_input is None:
        if routed:
            raise ConfigError("num_input must be given for a routed ELM (its state dict does not hold it)")
        num_input = n_syn
    if input_to_synapse_routing == "neuronio_routing" and not 1 <= num_input <= n_syn:
        # the code asserts ceil(num_input / num_branch) <= num_synapse_per_branch; checked before
        # the routing is built, whose arrays have num_input entries
        raise DataError(f"ELM neuron: neuronio_routing spreads num_input inputs over windows of {num_synapse_per_branch} "
                        f"synapses on each of {n_branch} branches, so num_input must lie in [1, {n_branch} * "
                        f"{num_synapse_per_branch} = {n_syn}], got {num_input}")
    if not routed and n_syn != num_input:
        raise DataError(f"ELM neuron without routing needs num_branch * num_synapse_per_branch = num_input, "
                        f"got {n_branch} * {num_synapse_per_branch} != {num_input}")

    arrays = {}
    sizes = [n_branch + d_m] + [d_mlp] * layers + [d_m]
    for i, (fi, fo) in enumerate(zip(sizes[:-1], sizes[1:])):
        arrays[f"cells.0.mlp.weights.{i}"] = sd.take(f"mlp.network.{2 * i}.weight", (fo, fi)).T
        arrays[f"cells.0.mlp.biases.{i}"] = sd.take(f"mlp.network.{2 * i}.bias", (fo,))
    per_synapse = f" = [num_branch * num_synapse_per_branch = {n_branch} * {num_synapse_per_branch}]"
    arrays["cells.0.w_s_raw"] = sd.take("_proto_w_s", (n_syn,), per_synapse)
    arrays["readout.weight"] = sd.take("w_y.weight", (n_out, d_m))
    arrays["readout.bias"] = sd.take("w_y.bias", (n_out,))
    trace = sd.take("tau_b", (n_branch,), " = [num_branch]") if version == 2 else sd.take("tau_s", (n_syn,), per_synapse)
    if np.ptp(trace) != 0:
        raise DataError(f"ELM neuron: the synaptic time constants differ ({trace.min()} .. {trace.max()}); "
                        "dynlab's ELM has one tau_s")
    given = tau_b_value if version == 2 else tau_s_value
    if given is not None and given != trace[0]:
        raise DataError(f"ELM neuron: {'tau_b' if version == 2 else 'tau_s'}_value = {given}, but the file's "
                        f"synaptic time constants are {trace[0]}")
    proto = sd.take("_proto_tau_m", (d_m,), " = [num_memory]")
    lo, hi = float(memory_tau_min), max(float(memory_tau_max), float(memory_tau_min) + 3 * INSET)
    if not learn_memory_tau:
        grid = np.logspace(np.log10(lo + INSET), np.log10(hi - INSET), d_m)
        if not np.allclose(_scaled_sigmoid(proto.astype(np.float64), lo, hi), grid, rtol=1e-5, atol=0):
            raise DataError("ELM neuron: _proto_tau_m is not the code's fixed log-spaced tau_m grid on "
                            f"[{lo}, {hi}]: give learn_memory_tau = true (or the memory_tau_min/max it was built with)")
    else:
        arrays["cells.0.theta_tau"] = proto
    if routed:
        index = sd.take("input_to_synapse_indices", (n_syn,), " = [num_synapse]", integer=True)
        mask = sd.take_mask("valid_indices_mask", (n_syn,), " = [num_synapse]")
        if index.min() < 0 or index.max() >= num_input:
            raise DataError(f"ELM neuron: input_to_synapse_indices must lie in [0, num_input = {num_input})")
        # the code reads x[index] * mask: a masked slot (the neuronio windows' overhang past the
        # last input, its index clamped to num_input - 1) reads nothing, dynlab's index num_input
        arrays["cells.0.synapse_index"] = np.where(mask, index, num_input).astype(np.int32)
    else:
        for name in ("input_to_synapse_indices", "valid_indices_mask"):
            if sd.has(name):
                if sd.shape(name) != (0,):
                    raise DataError(f"ELM neuron: {prefix + name!r} is given, but input_to_synapse_routing is None")
                sd.taken.add(prefix + name)
    sd.finish()

    branched = routed or num_synapse_per_branch != 1
    model_cfg = {"unit": "elm", "d_m": int(d_m), "d_mlp": int(d_mlp), "l_mlp": layers, "lam": float(lambda_value),
                 "memory_update": "lambda" if version == 1 else "kappa_lambda", "tau_min": lo, "tau_max": hi,
                 "tau_bounds": [lo, hi], "learn_tau": bool(learn_memory_tau), "tau_inset": INSET,
                 "tau_s": float(trace[0]), "dt": float(delta_t), "w_s_init": float(w_s_value), "learn_w_s": True,
                 "activation": "scaled-tanh", "mlp_activation": mlp_activation}
    if branched:
        model_cfg |= {"d_tree": int(n_branch), "d_branch": int(num_synapse_per_branch)}
        if routed:
            model_cfg["routing"] = "neuronio" if input_to_synapse_routing == "neuronio_routing" else "random"
        else:
            arrays["cells.0.synapse_index"] = np.arange(n_syn, dtype=np.int32)
        if input_to_synapse_routing == "neuronio_routing":
            expected = neuronio_routing(num_input, n_branch, num_synapse_per_branch)
            if not np.array_equal(expected, arrays["cells.0.synapse_index"]):
                raise DataError("ELM neuron: input_to_synapse_indices are not the code's neuronio routing "
                                f"of {num_input} inputs into {n_branch} x {num_synapse_per_branch} synapses")
    return imported(model_cfg, num_input, n_out, arrays)

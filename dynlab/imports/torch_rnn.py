r"""PyTorch's own recurrent modules: ``torch.nn.RNN``, ``GRU`` and ``LSTM``, as the formats
``torch-rnn``, ``torch-gru`` and ``torch-lstm``.

A module of ``num_layers`` layers, ``hidden_size`` $H$ and ``input_size`` $D$ has, per layer
$l$, ``weight_ih_l{l}`` $[gH, D_l]$ ($D_0 = D$, $D_l = H$ above), ``weight_hh_l{l}`` $[gH, H]$
and, with ``bias=True``, ``bias_ih_l{l}`` and ``bias_hh_l{l}`` $[gH]$, where $g$ is 1 (RNN), 3
(GRU: gates $r, z, n$ in that order) or 4 (LSTM: $i, f, g, o$). Each becomes a
[`SequenceModel`][dynlab.models.SequenceModel] of ``layers = num_layers`` cells of the unit
``rnn``, ``gru`` or ``lstm`` with ``hidden = H``; layer $l$ reads layer $l-1$'s hidden state, with
nothing in between, as in PyTorch. The three are the same function, $F(h, x)$ of
each layer and so of the stack, as PyTorch's (tested against the modules themselves to 1e-5
in float32, 1 and 2 layers, with and without biases, both ``batch_first``):

- **RNN** ([`dynlab.units.aru.RNNCell`][]): $h' = \phi(W_{ih} x + b_{ih} + W_{hh} h + b_{hh})$
  with $\phi$ = ``nonlinearity``, mapped to $W_{xh} = W_{ih}$, $W_{hh} = W_{hh}$,
  $b_h = b_{ih} + b_{hh}$, ``activation = nonlinearity``.
- **GRU** ([`dynlab.units.gated.GRU`][], Equinox's ``GRUCell``): PyTorch's
  $r = \sigma(W_{ir} x + b_{ir} + W_{hr} h + b_{hr})$, $z = \sigma(W_{iz} x + b_{iz} + W_{hz} h + b_{hz})$,
  $n = \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn}))$, $h' = (1 - z) \odot n + z \odot h$
  are Equinox's equations with one input bias and ``bias_n`` inside the reset product, so
  ``weight_ih``, ``weight_hh`` are PyTorch's and
  $\text{bias} = b_{ih} + (b_{hr}, b_{hz}, 0)$, $\text{bias\_n} = b_{hn}$ (dynlab's GRU has
  $2H$ fewer biases than PyTorch's $6H$: $b_{ir} + b_{hr}$ and $b_{iz} + b_{hz}$ only ever enter as sums).
- **LSTM** ([`dynlab.units.gated.LSTM`][], Equinox's ``LSTMCell``, the same gate order
  $i, f, g, o$): ``weight_ih``, ``weight_hh`` are PyTorch's and $\text{bias} = b_{ih} + b_{hh}$;
  the state is $(h, c)$, both starting at zero.

**Without biases** (``bias=False``) dynlab's biases are set to zero: the same function (dynlab's
units always carry biases, so its parameter count is larger by them).

**The read-out.** A ``torch.nn.Linear`` on the last layer's hidden state, ``weight`` $[O, H]$
and optionally ``bias`` $[O]$, under ``readout_prefix`` (e.g. ``"fc."``), becomes the model's
read-out; when not named, a linear layer that is the only other part of the state dict is taken
as it. Without one, the read-out is the identity on the last layer's hidden state (``output_size
= H``, no bias), so ``model(xs)`` returns PyTorch's ``output``.

**What does not matter, or is not supported.** ``batch_first`` only orders the axes of the
module's inputs and outputs, not its weights: the state dict is the same either way (dynlab's
models take one sample ``[T, D]``; batch with ``jax.vmap``). ``dropout`` acts in training only.
Bidirectional modules and an LSTM with ``proj_size`` are refused (dynlab's layers run forward
and their state is their hidden output), one line each. ``torch.nn.RNN`` does not store its
``nonlinearity``: ``torch-rnn`` must be told it.

**Which keys.** The network's keys are those under ``prefix`` (``"rnn."`` for a module held as
``self.rnn``; ``""`` for the module's own state dict), found when exactly one ``weight_ih_l0``
is in the file; ``num_layers`` is counted from the keys unless given. Keys beside it inside the
same container that are neither its nor the read-out's are refused
([`dynlab.imports.weights.Keys`][]), as are missing keys, wrong shapes, and the state dict of
another architecture or of another of the three (a GRU's $3H$ rows read as an LSTM's).
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np

from dynlab.errors import ConfigError, DataError, require_positive
from dynlab.imports.run import imported
from dynlab.imports.weights import Keys
from dynlab.registry import register

__all__ = ["torch_gru", "torch_lstm", "torch_rnn"]

MODULES = {1: ("torch.nn.RNN", "torch-rnn", "rnn"), 3: ("torch.nn.GRU", "torch-gru", "gru"),
           4: ("torch.nn.LSTM", "torch-lstm", "lstm")}
"""Gates per layer -> (PyTorch module, format name, dynlab unit)."""


def _dotted(prefix: str) -> str:
    return prefix if not prefix or prefix.endswith(".") else prefix + "."


def _find_prefix(weights: dict, module: str) -> str:
    prefixes = sorted({k[: -len("weight_ih_l0")] for k in weights if k.endswith("weight_ih_l0")})
    if not prefixes:
        found = ", ".join(list(weights)[:4]) + (", …" if len(weights) > 4 else "")
        raise DataError(f"no {module} in the file: no key ends in 'weight_ih_l0' (found {found}); expected a "
                        f"{module}'s state dict: weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, … per layer")
    if len(prefixes) > 1:
        raise DataError(f"{len(prefixes)} recurrent modules in the file (prefixes {', '.join(map(repr, prefixes))}); "
                        "choose one with --prefix")
    return prefixes[0]


def _hidden(keys: Keys, gates: int) -> int:
    """``H`` from ``weight_hh_l0`` ``[gH, H]``; a state dict of another of the three modules is refused."""
    module = MODULES[gates][0]
    w = keys.weights.get(keys.prefix + "weight_hh_l0")
    if w is None:
        raise DataError(f"missing key {keys.prefix + 'weight_hh_l0'!r} of a {module} ([{gates} x hidden, hidden])")
    if w.ndim != 2 or w.shape[1] == 0 or w.shape[0] % w.shape[1] or w.shape[0] // w.shape[1] not in MODULES:
        raise DataError(f"{keys.prefix + 'weight_hh_l0'!r} has shape {list(w.shape)}, which is no RNN's, GRU's or "
                        f"LSTM's [gates x hidden, hidden]; expected a {module} ([{gates} x hidden, hidden])")
    hidden, found = w.shape[1], w.shape[0] // w.shape[1]
    if found != gates:
        other, fmt, _ = MODULES[found]
        raise DataError(f"the state dict is a {other}'s (weight_hh_l0 {list(w.shape)} = [{found} x {hidden}, {hidden}]), "
                        f"not a {module}'s ([{gates} x hidden, hidden]); import it with --format {fmt}")
    return hidden


def _layers(keys: Keys, num_layers: int | None) -> int:
    found = {int(m.group(1)) for k in keys.weights if k.startswith(keys.prefix)
             and (m := re.fullmatch(r"weight_ih_l(\d+)", k[len(keys.prefix):]))}
    if num_layers is not None:
        require_positive("num_layers", num_layers)
        return num_layers
    n = 0
    while n in found:
        n += 1
    return n


def _readout(keys: Keys, readout_prefix: str | None, hidden: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The read-out's ``(weight [O, H], bias [O] or None)``: under ``readout_prefix``, or the only
    linear layer left in the container of the network's keys; ``(None, None)`` if there is none."""
    if readout_prefix is None:
        left = [k for k in keys.scope if k not in keys.taken]
        names = {k.rsplit(".", 1)[0] + "." if "." in k else "" for k in left}
        if len(names) != 1:
            return None, None
        candidate = names.pop()
        w = keys.weights.get(candidate + "weight")
        if w is None or w.ndim != 2 or w.shape[1] != hidden or set(left) - {candidate + "weight", candidate + "bias"}:
            return None, None
        readout_prefix = candidate
    linear = Keys(keys.weights, _dotted(readout_prefix), what="the read-out")
    w = keys.weights.get(linear.prefix + "weight")
    out = w.shape[0] if w is not None and w.ndim == 2 else 1
    weight = linear.take("weight", (out, hidden), f" of a torch.nn.Linear({hidden}, output_size)")
    bias = linear.take("bias", (out,), "") if linear.has("bias") else None
    keys.taken |= linear.taken
    return weight, bias


def _import(weights: dict, gates: int, *, prefix, readout_prefix, num_layers, nonlinearity=None) -> tuple[dict, object]:
    module, fmt, unit = MODULES[gates]
    keys = Keys(weights, _dotted(prefix) if prefix is not None else _find_prefix(weights, module), what=module)
    for marker, why in (("weight_ih_l0_reverse", "a bidirectional module (dynlab's layers run forward in time)"),
                        ("weight_hr_l0", "an LSTM with proj_size (dynlab's LSTM state is its hidden output)")):
        if keys.has(marker):
            raise DataError(f"the state dict is {why}, which dynlab does not import ({keys.prefix + marker!r})")
    hidden = _hidden(keys, gates)
    layers = _layers(keys, num_layers)
    w0 = weights.get(keys.prefix + "weight_ih_l0")
    if w0 is None or w0.ndim != 2:
        problem = "missing key" if w0 is None else f"shape {list(w0.shape)} of"
        raise DataError(f"{problem} {keys.prefix + 'weight_ih_l0'!r}; expected [{gates * hidden}, input_size]")
    input_size = w0.shape[1]
    bias = keys.has("bias_ih_l0") or keys.has("bias_hh_l0")
    arrays = {}
    rows = f"{gates} x hidden {hidden}" if gates > 1 else f"hidden {hidden}"
    for l in range(layers):
        width, what = (input_size, "input_size") if l == 0 else (hidden, "hidden")
        w_ih = keys.take(f"weight_ih_l{l}", (gates * hidden, width), f" = [{rows}, {what} {width}]")
        w_hh = keys.take(f"weight_hh_l{l}", (gates * hidden, hidden), f" = [{rows}, hidden {hidden}]")
        zeros = np.zeros(gates * hidden, np.float32)
        b_ih = keys.take(f"bias_ih_l{l}", (gates * hidden,), f" = [{rows}]") if bias else zeros
        b_hh = keys.take(f"bias_hh_l{l}", (gates * hidden,), f" = [{rows}]") if bias else zeros
        if unit == "rnn":
            arrays |= {f"cells.{l}.w_xh": w_ih, f"cells.{l}.w_hh": w_hh, f"cells.{l}.b_h": b_ih + b_hh}
        elif unit == "gru":
            H = hidden
            arrays |= {f"cells.{l}.cell.weight_ih": w_ih, f"cells.{l}.cell.weight_hh": w_hh,
                       f"cells.{l}.cell.bias": b_ih + np.concatenate([b_hh[: 2 * H], np.zeros(H, np.float32)]),
                       f"cells.{l}.cell.bias_n": b_hh[2 * H:]}
        else:
            arrays |= {f"cells.{l}.cell.weight_ih": w_ih, f"cells.{l}.cell.weight_hh": w_hh,
                       f"cells.{l}.cell.bias": b_ih + b_hh}
    weight, out_bias = _readout(keys, readout_prefix, hidden)
    keys.finish("; import a linear read-out on the last layer with --readout-prefix NAME., a module under "
                "another name with --prefix, or save only the network's state_dict")
    if weight is None:
        weight = np.eye(hidden, dtype=np.float32)
    arrays["readout.weight"] = weight
    if out_bias is not None:
        arrays["readout.bias"] = out_bias
    model_cfg = {"unit": unit, "hidden": hidden, "layers": layers, "readout_bias": out_bias is not None}
    if unit == "rnn":
        model_cfg["activation"] = nonlinearity
    return imported(model_cfg, input_size, weight.shape[0], arrays)


@register("format", "torch-rnn", "torch.nn.RNN (tanh or relu; any layers; biases or not) with an optional linear read-out")
def torch_rnn(weights: dict[str, np.ndarray], *, nonlinearity: Literal["tanh", "relu"] | None = None,
              prefix: str | None = None, readout_prefix: str | None = None,
              num_layers: int | None = None) -> tuple[dict, object]:
    r"""``torch.nn.RNN``: $h'_l = \phi(W_{ih}^l h_{l-1} + b_{ih}^l + W_{hh}^l h_l + b_{hh}^l)$,
    $h_{-1} = x$, as the unit ``rnn`` with $W_{xh} = W_{ih}$, $W_{hh} = W_{hh}$,
    $b_h = b_{ih} + b_{hh}$ and ``activation = nonlinearity`` (which must be given: the state dict
    does not hold it). Options and the read-out: see the module doc."""
    if nonlinearity not in ("tanh", "relu"):
        raise ConfigError("torch-rnn needs the module's nonlinearity, 'tanh' or 'relu' (--nonlinearity): "
                          "a torch.nn.RNN's state dict does not say which it used")
    return _import(weights, 1, prefix=prefix, readout_prefix=readout_prefix, num_layers=num_layers,
                   nonlinearity=nonlinearity)


@register("format", "torch-gru", "torch.nn.GRU (any layers; biases or not) with an optional linear read-out")
def torch_gru(weights: dict[str, np.ndarray], *, prefix: str | None = None, readout_prefix: str | None = None,
              num_layers: int | None = None) -> tuple[dict, object]:
    r"""``torch.nn.GRU`` as the unit ``gru``: ``weight_ih``, ``weight_hh`` as they are,
    $\text{bias} = b_{ih} + (b_{hr}, b_{hz}, 0)$ and $\text{bias\_n} = b_{hn}$, which gives
    PyTorch's $n = \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn}))$ exactly. Options and the
    read-out: see the module doc."""
    return _import(weights, 3, prefix=prefix, readout_prefix=readout_prefix, num_layers=num_layers)


@register("format", "torch-lstm", "torch.nn.LSTM (any layers; biases or not; no proj_size) with an optional linear read-out")
def torch_lstm(weights: dict[str, np.ndarray], *, prefix: str | None = None, readout_prefix: str | None = None,
               num_layers: int | None = None) -> tuple[dict, object]:
    r"""``torch.nn.LSTM`` as the unit ``lstm`` (gate order $i, f, g, o$ in both): ``weight_ih``,
    ``weight_hh`` as they are and $\text{bias} = b_{ih} + b_{hh}$. Options and the read-out: see
    the module doc."""
    return _import(weights, 4, prefix=prefix, readout_prefix=readout_prefix, num_layers=num_layers)

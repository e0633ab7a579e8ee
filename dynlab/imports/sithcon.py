r"""SITHCon layers of the public code (compmem/SITHCon, ``SITHCon/sithcon.py``, ``isith.py``), as the
unit ``sithcon`` ([`dynlab.units.sith.SITHConCell`][]) with the public code's conventions selected
([`dynlab.units.sith.public_code`][]).

The code's ``iSITH`` filter at Post order $k$ is
$\frac{1}{\tau^*}\frac{k^{k+1}}{k!}\big(\frac{t}{\tau^*}\big)^{k+1} e^{-kt/\tau^*}$ sampled at
$t = \Delta t, 2\Delta t, \dots$, convolved with the input and scaled by $\Delta t\,k/(k+1)$: the unit-area
filter of order $k+1$ at rate $k/\tau^*$, read one lag ahead, i.e. ``filter_order = k + 1``,
``lag_offset = 1``, every layer's input taken as pulses (``hidden_input = "pulse"``); τ* in steps
is the code's ``tau / dt``.

A stack of ``SITHCon_Layer`` s under ``prefix`` (default ``"sithcon_layers."``, the
experiments' ``SITHCon_Classifier``) has per layer ``{l}.tctct.conv.weight`` (or its weight-norm
pair ``weight_g`` $[C, 1, 1, 1]$, ``weight_v``: $w = g\,v/\lVert v \rVert$ per output channel)
$[C, 1, F, W]$. dynlab's SITHCon is Sarkar & Howard's: kernel width $W = 1$, $C = F$ features in
every layer, and one convolution shared by all layers; a file of another shape is refused, naming
what differs. Batch norm and the ``transform_linears`` between layers are not part of it (their
keys are refused; Sarkar & Howard removed them); dropout acts in training only. ``to_out``
($[O, F]$, $[O]$), when present, becomes the read-out (else the identity).

Options: the ``iSITH`` settings, which the state dict does not hold (its filters are not
buffers): ``tau_min``, ``tau_max``, ``ntau``, ``k``, ``dt``, ``g`` (only 0, the code's default, is
supported), and ``act_func`` (``"none"`` or ``"relu"``). The code truncates its filters at
``buff_max`` (default $3\tau_{max}$); dynlab does not, so the two agree on inputs of at most
``buff_max / dt`` steps (at k = 15 the dropped tail is below $10^{-6}$ of the filter's peak).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from dynlab.errors import ConfigError, DataError
from dynlab.imports.run import imported
from dynlab.imports.weights import Keys
from dynlab.registry import register
from dynlab.units.sith import public_code

__all__ = ["sithcon"]


def _conv_weight(sd: Keys, layer: int) -> np.ndarray:
    """Layer ``layer``'s effective convolution weight ``[C, 1, F, W]`` (weight norm resolved)."""
    base = f"{layer}.tctct.conv."
    if sd.has(base + "weight"):
        shape = sd.shape(base + "weight")
        return sd.take(base + "weight", shape if len(shape) == 4 else (-1, 1, -1, -1))
    v_shape = sd.shape(base + "weight_v")
    if v_shape is None or len(v_shape) != 4:
        raise DataError(f"SITHCon: layer {layer} has no {sd.prefix + base}weight (or weight_g, weight_v [C, 1, F, W])")
    v = sd.take(base + "weight_v", v_shape)
    g = sd.take(base + "weight_g", (v_shape[0], 1, 1, 1), " (weight norm over dim 0)")
    return g * v / np.sqrt(np.sum(v * v, axis=(1, 2, 3), keepdims=True))


@register("format", "sithcon", "compmem/SITHCon layers (width-1 convolution shared by all layers) as the unit sithcon")
def sithcon(weights: dict[str, np.ndarray], *, tau_min: float = 0.1, tau_max: float = 100.0, ntau: int = 50,
            k: int = 50, dt: float = 1.0, g: float = 0.0, act_func: Literal["none", "relu"] = "none", prefix: str = "sithcon_layers.",
            readout_prefix: str = "to_out.") -> tuple[dict, object]:
    """A stack of the public code's ``SITHCon_Layer`` s as ``sithcon`` (module doc); the ``iSITH``
    defaults are the code's."""
    if g != 0:
        raise ConfigError(f"g = {g}: dynlab's SITH has unit-area filters, the code's default g = 0 (tau*^g scaling unsupported)")
    if act_func not in ("none", "relu"):
        raise ConfigError(f"act_func must be 'none' or 'relu', got {act_func!r}")
    if not (isinstance(dt, (int, float)) and dt > 0):
        raise ConfigError(f"dt must be a number > 0, got {dt!r}")
    sd = Keys(weights, prefix, what="SITHCon", within="prefix")
    n_layers = 0
    while any(key.startswith(f"{prefix}{n_layers}.") for key in weights):
        n_layers += 1
    if not n_layers:
        raise DataError(f"SITHCon: no keys under {prefix!r}0. (a SITHCon_Layer's tctct.conv.weight); "
                        "give --prefix where its layers start")
    ws = [_conv_weight(sd, l) for l in range(n_layers)]
    for l, w in enumerate(ws):
        if w.shape[1] != 1 or w.shape[3] != 1 or w.shape[0] != w.shape[2] or w.shape != ws[0].shape:
            raise DataError(f"SITHCon: layer {l}'s convolution is [C, 1, F, W] = {list(w.shape)}; dynlab's SITHCon "
                            f"(Sarkar & Howard) needs kernel width W = 1 and C = F = {ws[0].shape[0]} in every layer")
        if not np.array_equal(w, ws[0]):
            raise DataError(f"SITHCon: layer {l}'s convolution differs from layer 0's; dynlab's SITHCon (Sarkar & "
                            "Howard) shares one convolution across layers")
    sd.finish()
    other = [key for key in weights if not key.startswith((prefix, readout_prefix))]
    if other:
        raise DataError(f"SITHCon: {len(other)} key{'s' if len(other) > 1 else ''} outside its layers and read-out that "
                        f"dynlab's SITHCon cannot build: {', '.join(other[:4])}{', …' if len(other) > 4 else ''}")
    n_f = ws[0].shape[0]
    arrays = {"cells.0.g": ws[0][:, 0, :, 0]}
    ro = Keys(weights, readout_prefix, what="the read-out", within="prefix")
    shape = ro.shape("weight")
    if shape is None:
        arrays["readout.weight"], out, bias = np.eye(n_f), n_f, False
    else:
        out, bias = shape[0], ro.has("bias")
        arrays["readout.weight"] = ro.take("weight", (out, n_f))
        if bias:
            arrays["readout.bias"] = ro.take("bias", (out,))
        ro.finish()
    cfg = {"n_features": int(n_f), "n_layers": n_layers, "n_taus": int(ntau), "tau_min": tau_min / dt,
           "tau_max": tau_max / dt, "k": int(k), "activation": act_func, **public_code(int(k))}
    return imported({"unit": "sithcon", "readout_bias": bias, **cfg}, n_f, out, arrays)

r"""NonlinMod's ARUN and RNN+γ (vgeadah/NonlinMod, ``NetworkCreation/Networks.py``, as trained by
``sMNIST_task.py``), as the units ``aru`` and ``rnn-gamma`` ([`dynlab.units.aru`][]) with the public
code's conventions selected: no gain floor (``n_min = 0``), the softplus linear above $n x > 20$
(``softplus_threshold = 20``), ``init = "public-code"``, and each ``nn.Linear``'s bias kept as a
parameter of its own (``split_biases = true``).

**ARUN** (``arun``; keys under ``prefix``, ``"rnn."`` in the task's ``Model`` and
``"state_dict.rnn."`` in its checkpoints, found from the keys): ``Uxh``
$[H, D]$, ``Whh`` $[H, H]$, the controller's ``Uag`` $[n_g, 1]$, ``Wgg`` $[n_g, n_g]$, ``Wgn``,
``Wgs`` $[1, n_g]$, each a ``torch.nn.Linear`` with ``.weight`` and ``.bias``. Mapped to ``aru``
with ``prior = "shared"`` (``Wgn.bias`` is one gain bias for all neurons): $W_{xh}$ = ``Uxh``,
$W_{hh}, b_{hh}$ = ``Whh``, $b_{xh}$ = ``Uxh.bias``, $W_{ag}, b_{ag}$ = ``Uag``, $W_{gg}, b_{gg}$ =
``Wgg``, $W_{gn}, b_n$ = ``Wgn``, $W_{gs}, b_s$ = ``Wgs``.

**RNN+γ** (``rnn_gamma``): the code's ``RNN`` with ``nonlin="gamma"`` (or ``"gamma2"``, the same
function with scalar $n, s$): ``U`` $[H, D]$, ``V`` $[H, H]$ (biases optional), and ``n``, ``s``
(shape ``[1]``) when they were learned. ``sMNIST_task.py`` keeps them fixed for its default
``--nonlin gamma2`` (its test ``args.nonlin is not ('gamma' or 'gamma2')`` is true for
``"gamma2"``), so they are then not in the state dict and must be given (``n``, ``s``). Mapped to
``rnn-gamma`` with ``heterogeneous = false``, $b_{xh}$ = ``U.bias``, $b_{hh}$ = ``V.bias``
(``sMNIST_task.py`` builds it with ``bias=True``; without biases, ``RNN``'s default, $b_h = 0$).

The task's read-out ``lin`` ($[C, H]$ and $[C]$), when in the file (``readout_prefix``), becomes
the model's read-out; without it the read-out is the identity.

**Parameter counts** equal the code's (tested against the count of its layer shapes): its
``nn.Linear`` pairs each carry a bias that only enters as a sum, and the imported units hold both
(``split_biases``), so each also gets its own gradient in training, as in the code. An RNN+γ
without biases has $H$ parameters more than the code's (the zero $b_h$; dynlab's units have no
bias-free option).
"""

from __future__ import annotations

import numpy as np

from dynlab.errors import ConfigError, DataError
from dynlab.imports.run import imported
from dynlab.imports.weights import Keys
from dynlab.registry import register

__all__ = ["arun", "rnn_gamma"]

CONVENTIONS = {"n_min": 0.0, "softplus_threshold": 20.0, "init": "public-code"}
"""The public code's conventions as ``aru`` / ``rnn-gamma`` keys."""


def _prefixes(weights, marker: str, prefix: str | None, readout_prefix: str | None, what: str) -> tuple[str, str]:
    """``(prefix, readout_prefix)``: as given, or found from the one key ending in ``marker``
    (``"rnn.Whh.weight"`` in the task's ``Model``, ``"state_dict.rnn.Whh.weight"`` in its
    checkpoints) and the read-out ``lin.`` beside it."""
    if prefix is None:
        found = sorted(k[: -len(marker)] for k in weights if k == marker or k.endswith("." + marker))
        if len(found) != 1:
            raise DataError(f"{what}: {'no' if not found else len(found)} keys ending in {marker!r}"
                            f"{'' if not found else ' (' + ', '.join(found) + ')'}; "
                            f"is this NonlinMod's {what}? give --prefix where its keys start")
        prefix = found[0]
    if readout_prefix is None:
        parent = prefix.rstrip(".").rpartition(".")[0]
        readout_prefix = (parent + "." if parent else "") + "lin."
    return prefix, readout_prefix


def _readout(weights, readout_prefix, hidden, arrays):
    """The read-out ``lin`` (``[C, H]``, bias ``[C]``) into ``arrays``; ``(output_size, has bias)``."""
    ro = Keys(weights, readout_prefix, what="the read-out", within="prefix")
    shape = ro.shape("weight")
    if shape is None:
        arrays["readout.weight"] = np.eye(hidden)
        return hidden, False
    if len(shape) != 2:
        raise DataError(f"the read-out: {readout_prefix + 'weight'!r} has shape {list(shape)}, expected [classes, {hidden}]")
    arrays["readout.weight"] = ro.take("weight", (shape[0], hidden))
    if ro.has("bias"):
        arrays["readout.bias"] = ro.take("bias", (shape[0],))
    ro.finish()
    return shape[0], ro.has("bias")


def _linear(sd, name, out, inp, bias=True):
    w = sd.take(f"{name}.weight", (out, inp), f" (torch.nn.Linear({inp}, {out}))")
    b = sd.take(f"{name}.bias", (out,)) if bias else np.zeros(out)
    return w, b


@register("format", "arun", "NonlinMod's ARUN (vgeadah/NonlinMod) as the unit aru with the public code's conventions")
def arun(weights: dict[str, np.ndarray], *, prefix: str | None = None,
         readout_prefix: str | None = None) -> tuple[dict, object]:
    """NonlinMod's ``ARUN`` as ``aru`` (module doc); ``prefix`` (default: found from the keys, e.g.
    ``"rnn."``), ``readout_prefix`` (default: ``lin.`` beside it)."""
    prefix, readout_prefix = _prefixes(weights, "Whh.weight", prefix, readout_prefix, "ARUN")
    sd = Keys(weights, prefix, what="ARUN", within="prefix")
    whh, wgg = sd.shape("Whh.weight"), sd.shape("Wgg.weight")
    uxh = sd.shape("Uxh.weight")
    if whh is None or wgg is None or uxh is None or len(whh) != 2 or len(wgg) != 2 or len(uxh) != 2:
        raise DataError(f"ARUN: no {prefix}Uxh.weight, {prefix}Whh.weight and {prefix}Wgg.weight of the right rank; "
                        "is this NonlinMod's ARUN (--prefix: where its keys start)?")
    hidden, n_g, d_in = whh[0], wgg[0], uxh[1]
    arrays = {}
    w_xh, b_x = _linear(sd, "Uxh", hidden, d_in)
    w_hh, b_hh = _linear(sd, "Whh", hidden, hidden)
    w_ag, b_ag = _linear(sd, "Uag", n_g, 1)
    w_gg, b_gg = _linear(sd, "Wgg", n_g, n_g)
    w_gn, b_n = _linear(sd, "Wgn", 1, n_g)
    w_gs, b_s = _linear(sd, "Wgs", 1, n_g)
    sd.finish()
    arrays |= {"cells.0.w_xh": w_xh, "cells.0.w_hh": w_hh, "cells.0.b_xh": b_x, "cells.0.b_hh": b_hh,
               "cells.0.w_ag": w_ag[:, 0], "cells.0.w_gg": w_gg, "cells.0.b_ag": b_ag, "cells.0.b_gg": b_gg,
               "cells.0.w_gn": w_gn[0], "cells.0.b_n": b_n[0],
               "cells.0.w_gs": w_gs[0], "cells.0.b_s": b_s[0]}
    out, bias = _readout(weights, readout_prefix, hidden, arrays)
    cfg = {"hidden": int(hidden), "n_g": int(n_g), "prior": "shared", "split_biases": True, **CONVENTIONS}
    return imported({"unit": "aru", "readout_bias": bias, **cfg}, d_in, out, arrays)


@register("format", "rnn-gamma", "NonlinMod's RNN with the gamma nonlinearity as the unit rnn-gamma (public-code conventions)")
def rnn_gamma(weights: dict[str, np.ndarray], *, n: float | None = None, s: float | None = None,
              prefix: str | None = None, readout_prefix: str | None = None) -> tuple[dict, object]:
    """NonlinMod's ``RNN`` with the γ nonlinearity as ``rnn-gamma`` (module doc); ``n``, ``s``:
    its shape parameters when the file does not hold them; prefixes as [`arun`][]."""
    prefix, readout_prefix = _prefixes(weights, "V.weight", prefix, readout_prefix, "RNN+gamma")
    sd = Keys(weights, prefix, what="RNN+gamma", within="prefix")
    v, u = sd.shape("V.weight"), sd.shape("U.weight")
    if v is None or u is None or len(v) != 2 or len(u) != 2:
        raise DataError(f"RNN+gamma: no {prefix}U.weight and {prefix}V.weight; is this NonlinMod's RNN "
                        "(--prefix: where its keys start)?")
    hidden, d_in = v[0], u[1]
    split = sd.has("U.bias") or sd.has("V.bias")
    w_xh, b_x = _linear(sd, "U", hidden, d_in, sd.has("U.bias"))
    w_hh, b_hh = _linear(sd, "V", hidden, hidden, sd.has("V.bias"))
    shape = {}
    for name, given in (("n", n), ("s", s)):
        if sd.has(name):
            if given is not None:
                raise ConfigError(f"{name} is in the file ({prefix + name}); it cannot also be given")
            shape[name] = float(sd.take(name, (1,))[0])
        elif given is None:
            raise ConfigError(f"the file holds no {prefix + name} (NonlinMod learns n and s only with --nonlin gamma): "
                              f"give the {name} it was trained with")
        else:
            shape[name] = float(given)
    sd.finish()
    biases = {"cells.0.b_xh": b_x, "cells.0.b_hh": b_hh} if split else {"cells.0.b_h": b_x + b_hh}
    arrays = {"cells.0.w_xh": w_xh, "cells.0.w_hh": w_hh, **biases,
              "cells.0.n": np.asarray(shape["n"]), "cells.0.s": np.asarray(shape["s"])}
    out, bias = _readout(weights, readout_prefix, hidden, arrays)
    cfg = {"hidden": int(hidden), "heterogeneous": False, "split_biases": split, **CONVENTIONS}
    return imported({"unit": "rnn-gamma", "readout_bias": bias, **cfg}, d_in, out, arrays)


"""The units the cross-paper scenarios compare, and each at a given width.

Every scenario that puts units side by side (``cross-lyapunov``, ``cross-pc-alignment``) sizes
them with [`model_section`][]: ``width`` is the number of neurons that carry the recurrent
computation, and each unit says what that means for its own config keys
([`dynlab.units.base.Cell.sized`][]; ARU: ``n_g = width / 8``, ELM neuron: ``d_m = width``, …).
Any registered unit works, a plug-in's included; [`UNITS`][] is only the default list.
"""

from __future__ import annotations

from dynlab import registry
from dynlab.errors import ConfigError

UNITS = ("aru", "elm", "elm-net", "sith-rnn", "blockdiag", "gru", "lstm", "rnn")
"""The default units of the cross-unit scenarios (the SITH family's Nets 1–4 and SITHCon are
hierarchical-language models and are compared in ``sith-trw``)."""


def model_section(unit: str, width: int) -> dict:
    """The ``[model]`` section of the registered ``unit`` at ``width`` (its ``sized(width)``)."""
    if isinstance(width, bool) or not isinstance(width, int) or width < 4:
        raise ConfigError(f"width must be an integer >= 4, got {width!r}")
    return {"unit": unit, **registry.get("unit", unit).obj.sized(width)}


def check_units(units) -> list[str]:
    """``units`` as a non-empty list of registered unit names."""
    if isinstance(units, str) or not units:
        raise ConfigError(f"units must be a non-empty list of unit names, e.g. {list(UNITS[:3])}; got {units!r}")
    units = list(units)
    for u in units:
        registry.get("unit", u)  # an unknown name lists the valid ones
    return units

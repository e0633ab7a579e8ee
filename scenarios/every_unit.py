"""The units the cross-paper scenarios compare, and what "width" means for each of them.

Every scenario that puts all units side by side (``cross-lyapunov``, ``cross-pc-alignment``)
sizes them with :func:`model_section`: ``width`` is the number of neurons that carry the
recurrent computation, mapped to each unit's own config keys. Sizes the papers do not fix are
chosen to keep a whole cross-unit scenario within 30 minutes on 2 CPU cores and are documented
per unit in :data:`SIZES`.
"""

from __future__ import annotations

from dynlab.errors import ConfigError

UNITS = ("aru", "elm", "elm-net", "sith-rnn", "blockdiag", "gru", "lstm", "rnn")
"""The registered recurrent units of issue 9 (the SITH family's Nets 1–4 and SITHCon are
hierarchical-language models and are compared in ``sith-trw``)."""

SIZES = {
    "aru": "hidden = width, n_g = width / 8 (the ARU paper's N_g / N_h), at least 2",
    "elm": "d_m = width memory units of one ELM neuron (neuron paper Eq. 1)",
    "elm-net": "hidden = width ELM neurons, d_m = 5, d_tree = 8, d_branch = 4 (32 synapses each; the "
               "SHD-Adding reference has 300, 10x the cost)",
    "sith-rnn": "n_features = width / 4 per layer, 4 layers, n_taus = 16 (frozen geometric decays)",
    "blockdiag": "4 dense blocks of width / 4 neurons",
    "gru": "hidden = width",
    "lstm": "hidden = width",
    "rnn": "hidden = width (tanh)",
}


def model_section(unit: str, width: int) -> dict:
    """The ``[model]`` section of ``unit`` at ``width`` (see :data:`SIZES`)."""
    if unit not in UNITS:
        raise ConfigError(f"unknown unit {unit!r} for a cross-unit scenario; valid: {', '.join(UNITS)}")
    if isinstance(width, bool) or not isinstance(width, int) or width < 4:
        raise ConfigError(f"width must be an integer >= 4, got {width!r}")
    sections = {
        "aru": {"hidden": width, "n_g": max(2, width // 8)},
        "elm": {"d_m": width},
        "elm-net": {"hidden": width, "d_m": 5, "d_tree": 8, "d_branch": 4},
        "sith-rnn": {"n_features": max(1, width // 4), "n_taus": 16},
        "blockdiag": {"n_blocks": 4, "block_size": max(1, width // 4)},
        "gru": {"hidden": width},
        "lstm": {"hidden": width},
        "rnn": {"hidden": width},
    }
    return {"unit": unit, **sections[unit]}


def check_units(units) -> list[str]:
    """``units`` as a list, each one of :data:`UNITS`."""
    units = list(units)
    unknown = [u for u in units if u not in UNITS]
    if unknown or not units:
        raise ConfigError(f"units must be a non-empty list of {', '.join(UNITS)}; got {units!r}")
    return units

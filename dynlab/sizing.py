"""Sizing a unit to a parameter budget, as papers match their baselines ("within 2%")."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax

from dynlab import registry
from dynlab.errors import ConfigError, require_positive


def model_params(unit: str, hidden: int, input_size: int, output_size: int, **config: Any) -> int:
    """Trainable parameters of a sequence model, counted abstractly (no arrays are allocated)."""
    model = eqx.filter_eval_shape(
        lambda: registry.build("model", unit=unit, input_size=input_size, output_size=output_size,
                               key=jax.random.key(0), hidden=hidden, **config)
    )
    return model.param_count()["total"]


def hidden_for_budget(
    unit: str, budget: int, input_size: int, output_size: int, *, tol: float = 0.02, **config: Any
) -> int:
    """The width ``hidden`` whose model has the parameter count closest to ``budget``.

    The count grows with ``hidden``, so the two widths around the budget are found by bisection
    and the closer one is returned. Raises [`ConfigError`][] if even that one is further than
    ``tol`` (relative) from the budget — e.g. a budget below what one unit costs.
    """
    require_positive("budget", budget)
    count = lambda h: model_params(unit, h, input_size, output_size, **config)  # noqa: E731
    lo, hi = 1, 2
    while count(hi) < budget:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(mid) < budget else (lo, mid)
    best = min((lo, hi), key=lambda h: abs(count(h) - budget))
    error = abs(count(best) - budget) / budget
    if error > tol:
        raise ConfigError(
            f"no width of {unit!r} is within {tol:.0%} of {budget:,} parameters: the closest, hidden={best}, "
            f"has {count(best):,} ({error:.1%} off)"
        )
    return best

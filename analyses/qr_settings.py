r"""The QR settings of a tangent-space analysis: how many directions, how often re-orthonormalised.

The QR (Benettin) method follows $k$ tangent directions $Q_t \in \mathbb{R}^{N \times k}$ of the
state map, $Z = J_t \cdots J_{t-p+1} Q_{t-p}$, and every ``reortho_every`` $= p$ steps
re-orthonormalises, $Z = Q_t R_t$, accumulating $\ln |(R_t)_{ii}|$
([`dynlab.analyses.lyapunov`][]; the factorisation itself is
[`dynlab.analyses.lyapunov.factorisations`][]). The ``lyapunov`` and ``clv`` analyses take these
settings as one value, [`QRSettings`][]:

| Python | TOML (`qr = ...`) | command line (`--qr ...`) |
|---|---|---|
| `QRSettings(k=8, reortho_every=4)` | `{k = 8, reortho_every = 4}` | `k=8,reortho_every=4` |

A table that leaves a key out keeps the analysis's default for it (``lyapunov``: $k = 16$,
``reortho_every = "auto"``; ``clv``: $k = 8$, every step, which Ginelli's backward pass needs).
The older flat keys ``k`` and ``reortho_every`` (``--k``, ``--reortho-every``) fold into the
table ([`dynlab.option_groups.fold_legacy`][]).

**Enforces** one check of each setting: ``k`` an integer $\ge 1$ and ``reortho_every`` an integer
$\ge 1$ or ``"auto"`` in the constructor, for every spelling; $k \le N$, the state dimension, in
[`QRSettings.check_dim`][], the one place the model's size is compared.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

from dynlab.errors import ConfigError
from dynlab.option_groups import OptionGroup

__all__ = ["QRSettings"]


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class QRSettings(OptionGroup):
    """``k`` tangent directions, re-orthonormalised every ``reortho_every`` steps (``"auto"``: the
    ``lyapunov`` analysis chooses the interval from the spread of the exponents,
    [`dynlab.analyses.lyapunov.reortho`][])."""

    k: int = 16
    reortho_every: int | Literal["auto"] = "auto"

    legacy: ClassVar[dict[str, Any]] = {"k": int, "reortho_every": int | Literal["auto"]}

    def __post_init__(self):
        if not _integer(self.k) or self.k < 1:
            raise ConfigError(f"k must be an integer >= 1, got {self.k!r}")
        if self.reortho_every != "auto" and (not _integer(self.reortho_every) or self.reortho_every < 1):
            raise ConfigError(f"reortho_every must be an integer >= 1 or 'auto', got {self.reortho_every!r}")

    @classmethod
    def parse(cls, value: Any, *, default: OptionGroup | None = None) -> QRSettings:
        """Settings from a TOML table (keys left out: ``default``'s, else the class's); a value as itself."""
        if isinstance(value, QRSettings):
            return value
        fields = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(value, dict) or not set(value) <= fields:
            raise ConfigError(f"the QR settings must be a table of {', '.join(sorted(fields))} "
                              f"(e.g. {{k = 8, reortho_every = 4}}), got {value!r}")
        return dataclasses.replace(default if isinstance(default, QRSettings) else cls(), **value)

    def check_dim(self, dim: int) -> None:
        """**Enforces** $1 \\le k \\le N$ for a state of ``dim`` components."""
        if self.k > dim:
            raise ConfigError(f"k = {self.k} exceeds the state dimension N = {dim} of this model; use 1 <= k <= {dim}")

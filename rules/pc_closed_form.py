r"""Closed forms for predictive coding on linear (residual) networks.

For a linear network every layer is affine, $f_\ell(z) = A_\ell z + b_\ell$, with the effective
matrices (multipliers included, [`dynlab.ffmodels`][])

$$ A_1 = \tfrac{1}{N^{a_1}\sqrt D} W^{(1)}, \qquad
   A_\ell = [I +]\, \tfrac{1}{L^{\alpha} N^{a}} W^{(\ell)} \;(2 \le \ell \le L-1), \qquad
   A_L = \tfrac{1}{\gamma N^{a}} W^{(L)}. $$

With $z_0 = x$ and $z_L = y$ clamped, the PC energy (MSE output) of one sample is
$\tfrac12 \sum_{\ell=1}^{L} \|e_\ell\|^2$ with $e_\ell = z_\ell - f_\ell(z_{\ell-1})$. Because the
map $(z_1,\dots,z_{L-1}) \mapsto (e_1,\dots,e_{L-1})$ is a bijection and
$y = f(x) + \sum_{\ell=1}^{L} M_\ell e_\ell$ with $M_\ell = A_{L:\ell+1} = A_L A_{L-1}\cdots A_{\ell+1}$
(the Jacobian of the output with respect to $z_\ell$; $M_L = I$), minimising the energy over the
activities is a minimum-norm problem with one linear constraint. Its solution is

$$ e_\ell^* = M_\ell^\top S^{-1} r, \qquad r = y - f(x), \qquad
   S = I_{d_{out}} + \sum_{\ell=1}^{L-1} M_\ell M_\ell^\top
     = I + \sum_{\ell=2}^{L} W_{L:\ell} W_{L:\ell}^\top , $$

and the equilibrated energy over a batch of $P$ samples is

$$ \mathcal F^*(\theta) = \frac{1}{2P} \sum_\mu r_\mu^\top S^{-1} r_\mu . $$

For scalar output $S = s(\theta)$ and $\mathcal F^* = \mathcal L / s$ (Eqs. 5–6, 25, 104). For
several outputs (the paper's theory is for scalar output) we report as $s$ the mean eigenvalue

$$ s(\theta) = \operatorname{tr}(S)/d_{out} = 1 + \frac{1}{d_{out}}\sum_{\ell=2}^{L}\|W_{L:\ell}\|_F^2 , $$

the direct generalisation of Eq. 25 (each output row contributes its own Eq.-25 sum), and also
$s_{\max} = \lambda_{\max}(S)$, which is what jpc logs. At finite width the two differ by the
Marchenko–Pastur factor of a $d_{out} \times N$ Gram matrix, $\lambda_{\max} \approx \bar s\,(1 +
\sqrt{d_{out}/N})^2$ (10× at $N = 2$, $d_{out} = 10$), which bends $s_{\max} - 1$ away from $L/N$
at small widths; both are $\Theta(L/N)$ for $N \gg d_{out}$.
The exact activities follow by a forward pass that adds the optimal errors,
$z^*_\ell = f_\ell(z^*_{\ell-1}) + e^*_\ell$.

Everything here needs only $d_{out} \times N$ products: the $M_\ell$ are accumulated backwards,
$M_{\ell-1} = M_\ell A_\ell$ (for residual layers $M_\ell + \tfrac{1}{L^\alpha N^a} M_\ell W^{(\ell)}$), in
$O(L\, d_{out} N^2)$, never forming an $N \times N$ product or the activities' Hessian.
$s - 1 = \lambda_{\max}(S - I)$ is computed from $S - I$ directly, so it keeps its relative
precision even when it is far below float32's resolution of 1.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array

from dynlab.errors import ConfigError


class ClosedForm(NamedTuple):
    energy: Array  # F*, scalar
    loss: Array  # L = 1/(2P) sum_mu |r_mu|^2, scalar
    s_minus_1: Array  # tr(S - I) / d_out, scalar
    s_max_minus_1: Array  # lambda_max(S) - 1, scalar
    S: Array  # [d_out, d_out]


def _require_linear(model) -> None:
    if model.activation != "linear":
        raise ConfigError(
            f"the closed-form PC energy needs a linear network, got activation {model.activation!r}; "
            "use numerical inference (energy='inference') for nonlinear networks"
        )


def output_maps(model) -> Array:
    r"""$M_\ell = A_{L:\ell+1}$ for $\ell = 1, \dots, L-1$, stacked ``[L-1, d_out, N]``, by backward accumulation.

    $M_{L-1} = A_L$ and $M_{\ell-1} = M_\ell A_\ell$; each step is one $d_{out} \times N$ by
    $N \times N$ product.
    """
    _require_linear(model)
    m_last = model.m_out * model.w_out

    def back(m, w):
        prev = model.m_hidden * (m @ w)
        prev = m + prev if model.residual else prev
        return prev, prev

    _, earlier = jax.lax.scan(back, m_last, model.w_hidden, reverse=True)
    return jnp.concatenate([earlier, m_last[None]], axis=0)


def rescaling_matrix(model) -> Array:
    r"""$S - I = \sum_{\ell=1}^{L-1} M_\ell M_\ell^\top$, ``[d_out, d_out]``."""
    ms = output_maps(model)
    return jnp.einsum("lon,lpn->op", ms, ms)


def rescaling(model, kind: str = "mean") -> Array:
    r"""$s(\theta)$: ``mean`` $= \operatorname{tr}(S)/d_{out}$ or ``max`` $= \lambda_{\max}(S)$.

    For scalar output both are exactly Eq. 6 / Eq. 25 / Eq. 104.
    """
    g = rescaling_matrix(model)
    if kind == "max":
        return 1.0 + jnp.linalg.eigvalsh(g)[-1]
    if kind == "mean":
        return 1.0 + jnp.trace(g) / g.shape[0]
    raise ConfigError(f"unknown rescaling kind {kind!r}; valid: mean, max")


def _residuals(model, x, y):
    y = jnp.reshape(y, y.shape[:1] + (-1,))
    return y - model.forward(x)


def closed_form(model, x: Array, y: Array) -> ClosedForm:
    r"""$\mathcal F^*$, $\mathcal L$, $s-1$ and $S$ for a batch ``x[P, D]``, ``y[P, d_out]``."""
    g = rescaling_matrix(model)
    eye = jnp.eye(g.shape[0], dtype=g.dtype)
    r = _residuals(model, x, y)
    chol = jax.scipy.linalg.cho_factor(eye + g, lower=True)
    u = jax.scipy.linalg.cho_solve(chol, r.T)  # S^{-1} r_mu, as columns
    energy = 0.5 * jnp.sum(r.T * u) / r.shape[0]
    loss = 0.5 * jnp.sum(r**2) / r.shape[0]
    g_fixed = jax.lax.stop_gradient(g)
    return ClosedForm(energy, loss, jnp.trace(g_fixed) / g.shape[0], jnp.linalg.eigvalsh(g_fixed)[-1], eye + g)


def equilibrated_energy(model, x: Array, y: Array) -> Array:
    r"""$\mathcal F^*(\theta) = \frac{1}{2P}\sum_\mu r_\mu^\top S^{-1} r_\mu$."""
    return closed_form(model, x, y).energy


def energy_and_grads(model, x: Array, y: Array):
    r"""``(ClosedForm, dF*/dθ)``: the gradient of the equilibrated energy, shaped like ``model``.

    By the envelope theorem this equals the PC weight gradient $\partial\mathcal F/\partial\theta$
    at exactly equilibrated activities.
    """
    import equinox as eqx

    def objective(m):
        cf = closed_form(m, x, y)
        return cf.energy, cf

    (_, cf), grads = eqx.filter_value_and_grad(objective, has_aux=True)(model)
    return cf, grads


def exact_activities(model, x: Array, y: Array) -> Array:
    r"""The energy's minimiser $z^*_1, \dots, z^*_{L-1}$, ``[L-1, P, N]``.

    $e^*_\ell = M_\ell^\top S^{-1} r$, then $z^*_1 = f_1(x) + e^*_1$,
    $z^*_\ell = f_\ell(z^*_{\ell-1}) + e^*_\ell$ (a forward scan).
    """
    ms = output_maps(model)
    s = jnp.eye(ms.shape[1], dtype=ms.dtype) + jnp.einsum("lon,lpn->op", ms, ms)
    r = _residuals(model, x, y)
    u = jnp.linalg.solve(s, r.T).T  # [P, d_out]
    errors = jnp.einsum("lon,po->lpn", ms, u)  # e*_l for every sample
    z1 = model.first(x) + errors[0]

    def fwd(z, inputs):
        w, b, e = inputs
        z = model.hidden(w, b, z) + e
        return z, z

    _, rest = jax.lax.scan(fwd, z1, (model.w_hidden, model.b_hidden, errors[1:]))
    return jnp.concatenate([z1[None], rest], axis=0)

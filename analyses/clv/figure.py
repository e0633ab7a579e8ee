"""The figure and the printed summary of a ``clv`` dataset."""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.figures import subplots

__all__ = ["clv_figure", "clv_summary"]

MAX_READOUT_VECTORS = 16


def clv_figure(ds: xr.Dataset):
    r"""Three panels: the exponents from the CLVs' growth rates against the QR method's (with the
    spread of the local rates); the hyperbolicity angle over time; the angles between the leading
    CLVs and the read-out subspace over time."""
    fig, (ax_e, ax_h, ax_r) = subplots(1, 3, figsize=(15, 4.8))
    idx = ds["vector"].values
    clv, qr = ds["clv_exponent"].values, ds["qr_exponent"].values
    se = ds["clv_exponent_se"].values if "clv_exponent_se" in ds else None
    # Tiny exponents (a neutral network): scale them and say so in the label, never a hidden offset.
    top = np.nanmax(np.abs(np.concatenate([clv, qr]))) if np.isfinite(np.concatenate([clv, qr])).any() else 1.0
    scale = 10.0 ** np.floor(np.log10(top)) if 0 < top < 1e-3 else 1.0
    unit = "" if scale == 1.0 else f", ×{scale:.0e}"
    ax_e.errorbar(idx, clv / scale, yerr=None if se is None else se / scale, fmt="o", ms=6, capsize=3,
                  color="tab:blue", label="CLV: time mean of γ_i(t) ± batch-means SE")
    ax_e.plot(idx, qr / scale, "x", ms=9, mew=1.8, color="tab:red", zorder=4, label="QR method, same run")
    ax_e.axhline(0, color="0.5", lw=0.8)
    ax_e.ticklabel_format(axis="y", useOffset=False)
    ax_e.set(xlabel="vector i", ylabel=f"exponent (per step{unit})",
             title="Lyapunov exponents, two ways\n(CLV growth rates vs QR)")
    ax_e.set_xticks(idx if idx.size <= 16 else idx[:: max(1, idx.size // 8)])
    ax_e.legend(fontsize=7)

    t = ds["time"].values
    deg = np.degrees(ds["angle_rest"].values)
    if np.isfinite(deg).any():
        ax_h.plot(t, deg, lw=0.6, color="tab:purple", label="to the span of CLVs 2..k")
        if ds.sizes.get("pair", 0) > 0:
            pair_min = np.degrees(ds["angle_pairs"].min("pair").values)
            ax_h.plot(t, pair_min, lw=0.5, color="tab:gray", alpha=0.7, label="to the nearest single CLV j")
        ax_h.axhline(np.degrees(float(ds["min_angle_rest"])), color="k", ls=":", lw=0.8,
                     label=f"min θ = {np.degrees(float(ds['min_angle_rest'])):.2g}°")
        log = np.nanmin(deg) < 10  # near-tangencies: a log axis resolves them; otherwise degrees, 0-90
        if log:
            ax_h.set_yscale("log")
        else:
            ax_h.set_ylim(0, 91)
        ax_h.legend(fontsize=7, loc="lower right")
    else:
        ax_h.text(0.5, 0.5, "one vector: no angles (k = 1)", ha="center", va="center", transform=ax_h.transAxes)
    ax_h.set(xlabel="step", ylabel="angle (degrees" + (", log scale)" if ax_h.get_yscale() == "log" else ")"),
             title="hyperbolicity: angle of CLV 1 to the others\n(near 0: a tangency)")

    if "readout_angle" in ds:
        ra = np.degrees(ds["readout_angle"].values)
        shown = min(MAX_READOUT_VECTORS, ra.shape[1])
        ax_r.boxplot([ra[:, j] for j in range(shown)], positions=idx[:shown], widths=0.6, whis=(0, 100),
                     medianprops={"color": "tab:blue"})
        if "readout_random_angle" in ds.attrs:
            ax_r.axhline(np.degrees(ds.attrs["readout_random_angle"]), color="tab:red", ls="--", lw=0.9,
                         label=f"random direction (m = {ds.attrs.get('readout_dim', '?')} of N = "
                               f"{ds.attrs.get('state_dim', '?')}): arccos√(m/N)")
            ax_r.legend(fontsize=7, loc="lower right")
        ax_r.set_ylim(0, 90)
        ax_r.set(xlabel="vector i", ylabel="angle (degrees; 90 = unseen by the read-out)",
                 title="angle of each CLV to the read-out subspace\n(box: quartiles over time; whiskers: range)")
    else:
        ax_r.text(0.5, 0.5, "no read-out subspace:\n" + str(ds.attrs.get("readout", "")), ha="center", va="center",
                  transform=ax_r.transAxes, fontsize=8, wrap=True)
        ax_r.set(title="angle of each CLV to the read-out subspace")
    model = ds.attrs.get("model", "")
    fig.suptitle(f"covariant Lyapunov vectors{' — ' + model if model else ''}\n"
                 f"{ds.attrs.get('protocol', '')}; {ds.sizes['time']} steps after a forward transient of "
                 f"{ds.attrs.get('transient_forward', '?')}, backward transient {ds.attrs.get('transient_backward', '?')}",
                 fontsize=9)
    fig.tight_layout()
    return fig


def clv_summary(ds: xr.Dataset) -> str:
    """Exponents two ways, hyperbolicity angles and read-out angles, as a table."""
    lines = [f"clv: {ds.sizes['vector']} covariant Lyapunov vectors over {ds.sizes['time']} steps "
             f"({ds.attrs.get('protocol', '')}; window {ds.attrs.get('window', '?')}, transients "
             f"{ds.attrs.get('transient_forward', '?')} forward / {ds.attrs.get('transient_backward', '?')} backward)"]
    readout = "readout_angle" in ds
    header = f"{'i':>3} {'CLV mean γ':>11} {'± SE':>8} {'QR λ':>10} {'sd γ(t)':>8}"
    if readout:
        header += f" {'median ∠read-out':>17}"
    lines.append(header)
    for j, i in enumerate(ds["vector"].values):
        se = float(ds.clv_exponent_se[j]) if "clv_exponent_se" in ds else float("nan")
        row = (f"{int(i):>3} {float(ds.clv_exponent[j]):>11.4f} {se:>8.4f} {float(ds.qr_exponent[j]):>10.4f} "
               f"{float(ds.growth_sd[j]):>8.3f}")
        if readout:
            row += f" {np.degrees(float(ds.readout_angle[:, j].median())):>16.1f}°"
        lines.append(row)
    if ds.sizes["vector"] > 1:
        line = (f"angle between CLV 1 and the span of the rest: median {np.degrees(float(ds.median_angle_rest)):.3g}°, "
                f"min {np.degrees(float(ds.min_angle_rest)):.3g}°")
        parts = np.degrees(ds.min_angle_parts.values) if "min_angle_parts" in ds else np.array([])
        parts = parts[np.isfinite(parts)]
        if parts.size > 1:  # the minimum is a tail value: how far it moves between parts of the stretch
            line += (f" (the min of each of {parts.size} parts of {ds.sizes['time'] // ds.sizes['part']} steps: median "
                     f"{np.median(parts):.3g}°, range {parts.min():.3g}°-{parts.max():.3g}°; another stretch "
                     f"gives another min)")
        lines.append(line)
    if readout and "readout_random_angle" in ds.attrs:
        lines.append(f"read-out: {ds.attrs.get('readout', '')}; a random direction would be at about "
                     f"{np.degrees(ds.attrs['readout_random_angle']):.1f}°")
    if not readout:
        lines.append(f"no read-out angles: {ds.attrs.get('readout', '')}")
    if int(ds.attrs.get("diverged", 0)):
        lines.append("warning: the run diverged (non-finite values)")
    return "\n".join(lines)

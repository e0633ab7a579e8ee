"""Sarkar & Howard's claims (SITHCon and SITH-RNN: Figs. 3, 4, 5b and 7), judged on the datasets of
the ``sith-trw`` program ([`dynlab.scenarios.sith_trw`][]): ``accuracy`` and ``trw``."""

from __future__ import annotations

from dynlab.claims import Claim, Estimate, NotTestable, scale_text
from dynlab.errors import require_positive


def shuffles(quick: bool, n_shuffle: int | None) -> int:
    """Permutations per TRW scale: ``n_shuffle`` (a positive integer), else 20 with ``quick``, else 200."""
    if n_shuffle is None:
        return 20 if quick else 200
    require_positive("n_shuffle", n_shuffle)
    return int(n_shuffle)


def _accuracy(net: str, dilations=None):
    """Statistic: the zero-shot accuracy of ``net``, per seed its lowest over the dilations (or its mean
    over the dilations >= 3^``dilations``), then the mean over seeds with its Student-t interval: the
    seeds are the replicates, the dilations are what the claim is about."""

    def measure(datasets) -> Estimate:
        acc = datasets["accuracy"].accuracy
        if net not in acc.network.values:
            raise NotTestable(f"{net} is not among this run's networks")
        sel = acc.sel(network=net)
        if dilations is not None:
            sel = sel.where(sel.dilation >= dilations, drop=True)
            if sel.sizes["dilation"] == 0:
                raise NotTestable(f"no dilation >= 3^{dilations} in this run")
            per_seed, what = sel.mean("dilation"), f"per seed: mean over {sel.sizes['dilation']} dilations"
        else:
            per_seed, what = sel.min("dilation"), f"per seed: lowest over {sel.sizes['dilation']} dilations"
        return Estimate.mean_of(per_seed.values, what)

    return measure


def _s50_rank(net: str):
    """Statistic: Spearman correlation of s50 with layer (censored values at the smallest scale, ties averaged)."""

    def measure(datasets) -> Estimate:
        from dynlab.statistics import spearman

        if net not in datasets["trw"]:
            raise NotTestable(f"no TRW of {net} in this run")
        ds = datasets["trw"][net]
        rho = spearman(ds.layer.values, ds.s50.values)[0]
        control = datasets["trw"].get(f"{net}-untrained")
        note = "one grammar seed (s50 is a point estimate)"
        if control is not None:
            note += f"; untrained control: {spearman(control.layer.values, control.s50.values)[0]:.2f}"
        return Estimate(float(rho), note=note)

    return measure


def _params_ratio(datasets) -> Estimate:
    p = datasets["accuracy"].unit_params
    if not {"sith-rnn", "rnn-generic"} <= set(p.network.values):
        raise NotTestable("needs both sith-rnn and rnn-generic (Net 1) in the run")
    return Estimate.exactly(float(p.sel(network="sith-rnn") / p.sel(network="rnn-generic")), "parameter counts")


def claims(params: dict) -> list[Claim]:
    """Sarkar & Howard's claims at these parameters."""
    top = 3 if params["quick"] else 6
    scale = scale_text({"dilations": (f"3^0..3^{top}", "3^0..3^6"),
                        "shuffles per TRW": (shuffles(params["quick"], params.get("n_shuffle")), 200),
                        "training": (f"{params['steps']} epochs of the full batch (Net 1 {params['generic_steps']}, "
                                     f"SITH-RNN {params['sith_rnn_steps']})", "200 epochs for every network"),
                        "seeds": (len(params["seeds"]), "not stated"),
                        "read-out": ("a bias-free 9 x 9 linear map", "none: the last layer's 9 features")})
    perfect = "9 sequences: accuracy is k/9, so 1.00 means every sequence at every scale"
    return [
        Claim("sithcon-zero-shot", "SITHCon: zero-shot accuracy 1.00 at every dilation (trained at 3^0)",
              "Fig. 3: 1.00 at 3^0..3^6", "lowest accuracy over seeds and dilations", _accuracy("sithcon"),
              lower=1.0, why=perfect, scale=scale),
        Claim("sith-rnn-zero-shot", "SITH-RNN (Net 5): zero-shot accuracy 1.00 at every dilation",
              "Fig. 7: ~100% at all scales", "lowest accuracy over seeds and dilations", _accuracy("sith-rnn"),
              lower=1.0, why=perfect, scale=scale),
        Claim("net1-off-scale", "Net 1 (generic RNN): near chance off-scale (mean accuracy at 3^2 and beyond <= 2/9)",
              "Fig. 7: Net 1 fails off-scale", "mean accuracy over seeds at dilations >= 3^2",
              _accuracy("rnn-generic", dilations=2), upper=2 / 9,
              why="chance is 1/9; 'near chance' read as at most twice chance", scale=scale),
        Claim("sithcon-s50-hierarchy", "SITHCon: s50 increases with layer (Spearman rho(layer, s50) >= 0.8)",
              "Fig. 4: TRWs grow with depth", "rank correlation of s50 with layer, first seed; untrained control beside it",
              _s50_rank("sithcon"), lower=0.8, why="monotone up to one swap of neighbouring layers", scale=scale),
        Claim("sith-rnn-params", "SITH-RNN uses < 0.05% of Net 1's parameters", "Figs. 5b/7: < 0.05% (0.042%)",
              "unit parameters of SITH-RNN / Net 1 (read-outs excluded)", _params_ratio, upper=5e-4, strict=True,
              why="the paper's bound", scale="the paper's sizes"),
    ]

"""#34: claims declared in a scenario file: a selection, a reduction over seeds with its interval, a
comparison with a threshold or another selection; judged with the interval rule of #38.

The verdicts are checked against a truth the test chooses (the data are drawn around it), and
the family-wise rule is measured: with one claim over several groups, a word is wrong in at most
5% of repetitions."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from dynlab.claims import judge, verdict
from dynlab.errors import ConfigError
from dynlab.scenarios.declared_claims import check_claims, parse_claims, to_claims

UNITS = ["aru", "gru", "lstm", "elm"]


def sweep(means: dict[str, float], seeds: int = 4, sd: float = 0.01, rng=None) -> xr.Dataset:
    """A merged sweep's layout: ``lyapunov_largest_mean`` over (model.unit, seed), around ``means``."""
    rng = rng or np.random.default_rng(0)
    units = list(means)
    values = np.array([[means[u] + sd * z for z in rng.standard_normal(seeds)] for u in units])
    return xr.Dataset({"lyapunov_largest_mean": (("model.unit", "seed"), values),
                       "train_final_loss": (("model.unit", "seed"), values ** 2)},
                      coords={"model.unit": units, "seed": list(range(seeds))})


STABLE = {"id": "stable", "statement": "lambda_1 < 0 for every unit", "variable": "lyapunov_largest_mean",
          "for_each": "model.unit", "below": 0.0}


def outcome(entries, datasets) -> dict[str, str]:
    f = judge(to_claims(parse_claims(entries)), datasets)
    return {str(c): str(o) for c, o in zip(f.claim.values, f.outcome.values)}


def test_every_unit_below_zero_holds_fails_or_is_undecided_by_the_weakest_unit():
    assert outcome([STABLE], {"sweep": sweep({u: -0.2 for u in UNITS})}) == {"stable": "holds"}
    # one unit clearly above 0: does not hold, whatever the others say
    assert outcome([STABLE], {"sweep": sweep({**{u: -0.2 for u in UNITS}, "gru": 0.3})}) == {"stable": "does not hold"}
    # one unit within its interval of 0: undecided, and the verdict names it
    f = judge(to_claims(parse_claims([STABLE])), {"sweep": sweep({**{u: -0.2 for u in UNITS}, "lstm": 0.0}, sd=0.05)})
    assert str(f.outcome.values[0]) == "undecided" and "model.unit=lstm" in str(f.interval.values[0])
    # a selection: only the units asked about
    picked = {**STABLE, "where": {"model.unit": ["aru", "elm"]}}
    assert outcome([picked], {"sweep": sweep({**{u: -0.2 for u in UNITS}, "gru": 0.3})}) == {"stable": "holds"}


def test_a_comparison_with_another_selection_is_paired_over_seeds():
    ds = sweep({u: -0.2 for u in UNITS})
    claim = {"id": "gru-less-stable", "statement": "GRU's lambda_1 is above ARU's", "variable": "lyapunov_largest_mean",
             "where": {"model.unit": "gru"}, "minus": {"where": {"model.unit": "aru"}}, "above": 0.0}
    ds["lyapunov_largest_mean"].loc[{"model.unit": "gru"}] += 0.1
    f = judge(to_claims(parse_claims([claim])), {"sweep": ds})
    assert str(f.outcome.values[0]) == "holds" and "paired over seed" in str(f.interval.values[0])
    diff = ds.lyapunov_largest_mean.sel({"model.unit": "gru"}) - ds.lyapunov_largest_mean.sel({"model.unit": "aru"})
    assert float(f.value.values[0]) == pytest.approx(float(diff.mean()))


def test_a_comparison_of_two_variables_without_shared_replicates_uses_welch():
    """A DSA-like dataset: distances within units (one per unit pair of seeds) and between units."""
    ds = xr.Dataset({"within": ("pair", [0.05, 0.06, 0.04, 0.05]), "between": ("pair_b", [0.20, 0.22, 0.19, 0.21, 0.2, 0.18])})
    claim = {"id": "seeds-closer", "statement": "seeds closer than units", "dataset": "dsa", "variable": "within",
             "over": "pair", "minus": {"variable": "between"}, "below": 0.0}
    f = judge(to_claims(parse_claims([claim])), {"dsa": ds})
    # 'between' is along another dim: the claim says it leaves that dim unreduced rather than guessing
    assert str(f.outcome.values[0]) == "not testable here" and "pair_b" in str(f.verdict.values[0])
    ds2 = xr.Dataset({"within": ("pair", [0.05, 0.06, 0.04, 0.05]), "between": ("pair", [0.20, 0.22, 0.19, 0.21])})
    ds2 = ds2.assign_coords(pair=[0, 1, 2, 3])
    f = judge(to_claims(parse_claims([claim])), {"dsa": ds2})
    assert str(f.outcome.values[0]) == "holds"


def test_a_word_is_wrong_at_most_one_time_in_twenty_over_groups():
    """Ten units, five seeds each, 200 repetitions per case: every unit just below 0 (the claim is
    true; the wrong word is "does not hold", which any one unit's interval can give), one unit just
    above 0 (false; the wrong word is "holds"), every unit clearly below 0. In each case a word is
    wrong in at most 5% of repetitions. Measured when this test was written: 2 of 200 wrong words
    where every unit is just below 0; with 95% intervals per unit instead of the Bonferroni-adjusted
    ones, 23 of 200 (11.5%), so the test can fail."""
    rng = np.random.default_rng(7)
    units = [f"u{i}" for i in range(10)]
    claims = to_claims(parse_claims([STABLE]))
    decided = {}
    for case, means, true in (("all just below", {u: -0.002 for u in units}, True),
                              ("one just above", {**{u: -0.5 for u in units}, "u3": 0.002}, False),
                              ("all clearly below", {u: -0.05 for u in units}, True)):
        wrong = n = 0
        for _ in range(200):
            word, *_ = verdict(claims[0], claims[0].measure_on({"sweep": sweep(means, seeds=5, sd=0.01, rng=rng)}))
            if word != "undecided":
                n += 1
                wrong += (word == "holds") != true
        assert wrong <= 10, (case, wrong)
        decided[case] = n
    assert decided["all clearly below"] >= 180  # and it does decide where the data are clear


def test_declared_claims_are_checked_before_any_work():
    coordinates = {"sweep": {"model.unit": UNITS, "seed": [0, 1]}, "dsa": {"run": None, "group": None}}
    for entry, message in (
        ({**STABLE, "for_each": "unit"}, "names the coordinate 'unit', which sweep does not have; coordinates: model.unit, seed"),
        ({**STABLE, "where": {"model.unit": "rnn"}}, "model.unit = 'rnn' is not in this scenario; values: 'aru', 'gru', 'lstm', 'elm'"),
        ({**STABLE, "dataset": "trw"}, "dataset 'trw' is not written by this scenario; datasets: dsa, sweep"),
        ({**STABLE, "where": {"stage": "trained"}}, "names the coordinate 'stage'"),
    ):
        with pytest.raises(ConfigError) as e:
            check_claims(parse_claims([entry]), coordinates)
        assert message in str(e.value)
    check_claims(parse_claims([STABLE]), coordinates)
    for entry, message in (
        ({**STABLE, "colour": "red"}, "unknown key claims[0].colour; valid keys:"),
        ({k: v for k, v in STABLE.items() if k != "below"}, "needs exactly one threshold"),
        ({**STABLE, "above": 1.0}, "got below, above"),
        ({**STABLE, "below": float("nan")}, "must be a finite number"),
        ({**STABLE, "id": "two words"}, "claims[0].id must be a short name"),
        ({**STABLE, "between": [1.0, 0.0], "below": None}, None),
    ):
        entry = {k: v for k, v in entry.items() if v is not None}
        with pytest.raises(ConfigError) as e:
            parse_claims([entry])
        assert message is None or message in str(e.value), str(e.value)
    with pytest.raises(ConfigError, match="claim id 'stable' is given twice"):
        parse_claims([STABLE, STABLE])


def test_a_replicate_without_a_value_leaves_the_claim_undecided_and_says_so():
    """A diverged run (NaN) is not dropped: the seeds that behaved are not a sample of the unit, so
    a claim about every unit cannot hold on them; it is undecided and names what is missing."""
    ds = sweep({u: -0.2 for u in UNITS})
    ds["lyapunov_largest_mean"].loc[{"model.unit": "aru", "seed": 3}] = np.nan
    f = judge(to_claims(parse_claims([STABLE])), {"sweep": ds})
    assert str(f.outcome.values[0]) == "undecided"
    assert "1 of 4 seed values are missing" in str(f.verdict.values[0]) and "model.unit=aru" in str(f.verdict.values[0])
    # a unit that fails decisively still decides, whatever another unit lacks
    ds["lyapunov_largest_mean"].loc[{"model.unit": "gru"}] = 0.5 + 0.01 * np.arange(4)  # seeds that agree decide nothing
    assert str(judge(to_claims(parse_claims([STABLE])), {"sweep": ds}).outcome.values[0]) == "does not hold"

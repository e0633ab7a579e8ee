"""``dynlab reproduce PAPER``: run a paper's scenarios and print every verdict; ``--list`` shows what there is."""

from __future__ import annotations

import click

from dynlab.cli.main import main
from dynlab.cli.options import data_dir_option, progress_bar
from dynlab.errors import ConfigError


def _list() -> None:
    from dynlab.scenarios import spec
    from dynlab.scenarios.papers import PAPERS

    for paper, scenarios in spec.paper_scenarios().items():
        click.echo(f"{paper}: {PAPERS[paper].citation}")
        for scenario in scenarios:
            click.echo(f"  scenario {scenario.name}: {scenario.description}")
            for name, preset in scenario.presets.items():
                text = "; ".join(x for x in (preset.get("description"), preset.get("cost")) if x)
                click.echo(f"    --preset {name}{': ' + text if text else ''}")
            for claim in scenario.claims():
                click.echo(f"    claim {claim.id}: {claim.statement}")
        if not scenarios:
            click.echo("  (no scenario yet)")


@main.command()
@click.argument("paper", required=False)
@click.option("--list", "list_", is_flag=True, help="Show the papers, their scenarios, presets (with cost) and claims.")
@click.option("--preset", metavar="NAME", default=None,
              help="Preset of every scenario: 'laptop' (default; CPU sizes) or 'paper' (the paper's sizes, for a GPU).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a key of every scenario of the paper, e.g. params.steps=20 (repeatable).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Output directory (one folder per scenario), new or empty. Default: runs/reproduce-<paper>-<time>.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@data_dir_option
def reproduce(paper, list_, preset, sets, out, quiet):
    """Run every scenario of PAPER and print each claim's verdict: holds / does not hold / undecided /
    not testable here.

    Each scenario writes its datasets, figures and findings.nc into its own folder; the verdicts of
    all of them are also written to findings.nc at the top. The table's scale column says what the
    run substitutes for the paper (data, sizes, steps): the laptop preset runs CPU sizes, so a claim
    that holds at the paper's scale may not hold here, and the verdict says so rather than hiding it.
    A verdict is decided by the claim's interval: one that straddles the threshold, or a point
    estimate from one seed, is undecided.
    'dynlab reproduce --list' shows the papers, their claims and each preset's cost.
    """
    if list_:
        if paper is not None or sets or preset:
            raise ConfigError("--list takes no paper, --preset or --set")
        _list()
        return 0
    if paper is None:
        from dynlab.scenarios.papers import PAPERS

        raise ConfigError(f"name a paper ({', '.join(PAPERS)}) or give --list")
    from dynlab import store
    from dynlab.claims import OUTCOMES, combine_findings, format_verdicts
    from dynlab.scenarios import spec

    scenarios = spec.paper_scenarios(paper, preset=preset, sets=sets)[paper]
    if not scenarios:
        raise ConfigError(f"paper {paper} has no scenario yet")
    # claimed: a second reproduce into one --out is refused; one that stops with nothing written leaves nothing
    out_dir = store.claim_output(out or None, f"reproduce-{paper}")
    tables = {}
    with store.released_on_failure(out_dir):
        for scenario in scenarios:
            where = out_dir / scenario.name
            if not quiet:
                click.echo(f"scenario {scenario.name} (preset {scenario.preset}) -> {where}")
            with progress_bar(quiet, scenario.name) as update:
                datasets = scenario.run(where, progress=update)
            if "findings" in datasets:
                click.echo(format_verdicts(datasets["findings"]))
                tables[scenario.name] = datasets["findings"]
    if tables:
        combined = combine_findings(tables, paper=paper, preset=scenarios[0].preset,
                                    scenarios=", ".join(s.name for s in scenarios))
        store.write_dataset(out_dir / "findings.nc", combined)
        counts = {o: int((combined.outcome == o).sum()) for o in OUTCOMES}
        click.echo(f"{paper}: {combined.sizes['claim']} claims over {len(tables)} scenario(s): "
                   + ", ".join(f"{n} {o}" for o, n in counts.items() if n) + f"; findings in {out_dir / 'findings.nc'}")
    return 0

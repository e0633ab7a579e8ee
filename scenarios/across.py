r"""Comparisons across cells: the analyses of several runs (``takes="runs"``, e.g. ``dsa``) of a
scenario, run once over its cells' trained models after the sweep.

An analysis registered with ``takes="runs"`` ([`dynlab.registry.Entry`][]) is a function of
run directories, and a cell directory is one. In a scenario's ``[[analyses]]`` it is checked
before any work against every cell ([`dynlab.scenarios.spec.check_cells`][]); after the sweep it
is called once with the directories of the cells whose training finished ``ok``, in sweep order, and its
dataset gets, along its ``run`` dim, the cells' sweep values (one coordinate per swept config
key, e.g. ``model.unit`` and ``seed``), ``group`` (the cell's values on the axes other than
``seed``: which runs are replicates of one configuration) and readable labels
(``"unit=aru, seed=0"``; ``run_b`` too when the dataset has it, as a distance matrix does). It
is written to ``<name>.nc`` in the sweep directory with its registered figure as ``<name>.png``.

**Resumable.** ``across.toml`` records, per analysis, its status and message, the digest of its
inputs (the compared cells and their markers) and the SHA-256 of its dataset, and a digest of
itself; a resume whose inputs and files are unchanged does not recompute it. A failure (fewer
than two cells ok, an error of the analysis) is recorded with its message, and the sweep's
datasets stay.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab import config as cfgmod
from dynlab import registry, store
from dynlab.figures import format_value, key_label
from dynlab.scenarios.cell import _sha256, marker_digest, one_line
from dynlab.scenarios.spec import Scenario, analysis_options, cell_name, cell_values, entry_selects

MARKER = "across.toml"


def _inputs_digest(cells, infos) -> str:
    text = "\n".join(f"{c.key} {i['digest']}" for c, i in zip(cells, infos))
    return hashlib.sha256(text.encode()).hexdigest()


def read_records(out_dir: Path) -> dict:
    """The intact records of ``across.toml`` (name -> record), ``{}`` if none or if it was altered."""
    path = Path(out_dir) / MARKER
    try:
        doc = cfgmod.load_toml(path)
        return doc["analyses"] if doc.get("digest") == marker_digest(doc) else {}
    except Exception:  # no marker, unreadable, a key missing: nothing is trusted
        return {}


def _intact(record: dict | None, out_dir: Path, inputs: str) -> bool:
    if not record or record.get("inputs") != inputs:
        return False
    try:
        return all(_sha256(Path(out_dir) / name) == digest for name, digest in record["files"].items())
    except OSError:
        return False


def _label(ds: xr.Dataset, cells) -> xr.Dataset:
    """``ds`` with the cells' sweep values, ``group`` and labels along ``run`` (and ``run_b``). A
    run taken as a cell (``[[runs]]``) is labelled, and grouped, by its own label; its sweep values
    are where it sits on the axes (its label, the first value of the others)."""
    labels = [cell_name(c) for c in cells]
    values = [cell_values(c) for c in cells]
    coords = {"run": ("run", labels)}
    for key in values[0]:
        coords[key] = ("run", [v[key] for v in values])
    groups = [c.run.label if c.run is not None else
              ", ".join(f"{key_label(k)}={format_value(x)}" for k, x in v.items() if k != "seed") or "all cells"
              for c, v in zip(cells, values)]
    return grouped(ds.assign_coords(coords), labels, groups)


def grouped(ds: xr.Dataset, labels: list[str], groups: list[str]) -> xr.Dataset:
    """``ds`` (an analysis of several runs) with the runs' ``labels`` along ``run`` (and ``run_b``),
    their ``groups`` as the coordinate ``group``, and the means and permutation tests between the
    groups ([`by_group`][]): what a study's DSA has, and ``dynlab analyze dsa`` with its groups."""
    coords = {"run": ("run", labels), "group": ("run", groups)}
    if "run_b" in ds.dims:
        coords["run_b"] = ("run_b", labels)
    return by_group(ds.assign_coords(coords))


def by_group(ds: xr.Dataset) -> xr.Dataset:
    r"""``ds`` with, for each dissimilarity between runs (a variable over ``run`` and ``run_b`` whose
    attrs set ``dissimilarity = 1``, e.g. DSA's ``distance``), its means between the runs' groups
    and whether two groups are further apart than their replicates, when some group has several runs:

    - ``<var>_by_group`` (``run_group``, ``run_group_b``): the mean over the pairs of distinct runs
      of the two groups (on the diagonal: between the replicates of one group, e.g. its seeds);
    - ``<var>_within_minus_between`` (``run_group``): a group's mean within it minus its mean
      towards the other groups, $\bar d_{gg} - \frac{1}{G-1}\sum_{h \ne g} \bar d_{gh}$. Below 0:
      the group's replicates are closer to each other than to the other groups. A claim over
      ``run_group`` takes the groups as the replicates of its interval (they share runs, so the
      groups' values are not independent; the interval is then only approximate);
    - ``<var>_group_p_value`` and ``<var>_group_p_floor`` (``run_group``, ``run_group_b``): the
      permutation test of two groups against their replicates (the seed null of
      [`dynlab.analyses.dsa.null.group_permutation`][]) and the smallest p-value it allows (1/3 with
      2 seeds per group: they can never reach 5%).
    """
    if "group" not in ds.coords or "run_b" not in ds.dims:
        return ds
    groups = [str(g) for g in ds["group"].values]
    names = list(dict.fromkeys(groups))
    if len(names) == len(groups) or len(names) < 2:
        return ds
    from dynlab.analyses.dsa.null import group_permutation

    member = np.array([[g == name for g in groups] for name in names])  # [G, runs]
    off_diagonal = ~np.eye(len(groups), dtype=bool)
    group_pair = ("run_group", "run_group_b")
    for var in [v for v in ds.data_vars if ds[v].dims == ("run", "run_b") and ds[v].attrs.get("dissimilarity") == 1]:
        d = ds[var].values
        table = np.full((len(names), len(names)), np.nan)
        for a in range(len(names)):
            for b in range(len(names)):
                pairs = np.outer(member[a], member[b]) & off_diagonal
                if pairs.any():
                    table[a, b] = d[pairs].mean()
        between = np.array([np.nanmean(np.delete(table[g], g)) for g in range(len(names))])
        attrs = {k: v for k, v in ds[var].attrs.items() if k != "dissimilarity"}
        ds[f"{var}_by_group"] = (group_pair, table, {
            **attrs, "long_name": f"mean {attrs.get('long_name', var)} between the runs of two groups"})
        ds[f"{var}_within_minus_between"] = ("run_group", np.diag(table) - between, {
            **attrs, "long_name": f"mean {var} within a group minus its mean towards the other groups"})
        _, p, floor = group_permutation(d, groups)
        ds[f"{var}_group_p_value"] = (group_pair, p, {
            "units": "1", "long_name": f"permutation p-value: the two groups' mean {var} between them exceeds its mean "
                                       "within them by chance (runs relabelled between the two groups)"})
        ds[f"{var}_group_p_floor"] = (group_pair, floor, {
            "units": "1", "long_name": "the smallest p-value the permutation test allows with these groups' runs"})
    return ds.assign_coords(run_group=("run_group", names), run_group_b=("run_group_b", names))


def run_across(scenario: Scenario, out_dir: Path, cell_dirs: list[Path], infos: list[dict | None]) -> dict[str, dict]:
    """Run every analysis of several runs of ``scenario`` across the cells it selects
    ([`dynlab.scenarios.spec.entry_selects`][]) whose training finished ``ok`` (a cell where
    another analysis failed still has its trained model)
    (``cell_dirs`` and ``infos``: each cell's directory and marker, ``None`` if missing, in the
    order of ``scenario.cells``); return name -> ``{"status", "message"}``, with ``"dataset"``, the
    result still in memory, for each computed now (one kept from before is only on disk).

    Enforces: a result whose inputs and files are unchanged is kept, not recomputed; a failure
    is recorded (status ``failed`` and the one-line message), never raised; every write is atomic.
    """
    out_dir = Path(out_dir)
    ok = [k for k, i in enumerate(infos) if i is not None and i["results"]["train"]["status"] == "ok"]
    all_cells = scenario.cells
    cells, ok_infos, dirs = [all_cells[k] for k in ok], [infos[k] for k in ok], [cell_dirs[k] for k in ok]
    inputs = _inputs_digest(cells, ok_infos)
    old = read_records(out_dir)
    records, computed = {}, {}
    for entry in scenario.across:
        name = entry["name"]
        chosen = [k for k, c in enumerate(cells) if entry_selects(entry, c.coords)]
        if _intact(old.get(name), out_dir, inputs):
            records[name] = old[name]
            continue
        nc, png = out_dir / f"{name}.nc", out_dir / f"{name}.png"
        record = {"status": "ok", "message": "", "inputs": inputs, "files": {}}
        if len(chosen) < 2:
            record.update(status="failed", message=f"{name} compares at least 2 trained cells; {len(chosen)} "
                                                   "finished training (see the cells' status in sweep.nc)")
        else:
            analysis = registry.get("analysis", name)
            try:
                ds = analysis.obj([dirs[k] for k in chosen], **analysis_options(entry))
                ds = _label(ds, [cells[k] for k in chosen])
                store.write_dataset(nc, ds)
                computed[name] = ds
                record["files"][nc.name] = _sha256(nc)
                if analysis.figure is not None:
                    store.write_figure(png, analysis.figure(ds))
                    record["files"][png.name] = _sha256(png)
            except Exception as e:  # the sweep's results stay; the reason is kept and printed
                record.update(status="failed", message=one_line(f"{type(e).__name__}: {e}"))
        records[name] = record
    if records or old:
        doc = {"analyses": records}
        doc["digest"] = marker_digest(doc)
        store.atomic_write(out_dir / MARKER, lambda p: p.write_text(cfgmod.dumps(doc)))
    return {n: {"status": r["status"], "message": r["message"], **({"dataset": computed[n]} if n in computed else {})}
            for n, r in records.items()}


def across_summary(scenario: Scenario, out_dir: Path) -> str:
    """What each analysis across cells says (its registered summary on its dataset), or why it failed."""
    parts = []
    records = read_records(out_dir)
    for entry in scenario.across:
        name = entry["name"]
        record = records.get(name, {"status": "missing", "message": ""})
        if record["status"] != "ok":
            continue
        summary = registry.get("analysis", name).summary
        ds = xr.load_dataset(Path(out_dir) / f"{name}.nc", engine="h5netcdf")
        text = summary(ds) if summary is not None else ""
        parts.append(f"{name} across cells ({Path(out_dir) / f'{name}.nc'}):" + (f"\n{text}" if text else ""))
    return "\n".join(parts)

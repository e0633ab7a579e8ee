"""The grid axes of the PC comparisons: width x depth (feed-forward PC vs BP) or width x
sequence length (PC through time vs BPTT), shared by the analyses and their figures."""

from __future__ import annotations

from typing import NamedTuple

import xarray as xr


class GridAxis(NamedTuple):
    """The second grid axis: feed-forward depth or (recurrent) sequence length."""

    dim: str  # dimension name
    ratio: str  # coordinate holding (axis value) / N
    symbol: str  # L or T
    long_name: str
    config_key: str


DEPTH = GridAxis("depth", "L_over_N", "L", "depth L (number of weight matrices)", "depths")
LENGTH = GridAxis("length", "T_over_N", "T", "sequence length T (time plays the role of depth)", "lengths")


def grid_axis(ds: xr.Dataset) -> GridAxis:
    """The dataset's second grid axis ([`LENGTH`][] for recurrent comparisons, else [`DEPTH`][])."""
    return LENGTH if LENGTH.dim in ds.dims else DEPTH

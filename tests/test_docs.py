"""The documentation site: `mkdocs build --strict` succeeds offline, and the site has what it promises.

- every section (getting started, concepts, how-to pages, one page per paper, the gallery, the
  API reference), and the gallery's figure made by its command during the build;
- every name of every `__all__` in the package has an entry in the API reference, and every
  module of the package is documented there;
- nothing is fetched from the network when a page is viewed (no external scripts, styles or
  fonts; MathJax is served from the site).

The strict build also resolves every cross-reference of the docstrings (`[`name`][]`), so a
reference to a renamed or removed object fails here. Skipped only when mkdocs is not installed
(`pip install '.[docs]'`; the `test` extra includes it).
"""

from __future__ import annotations

import contextlib

import importlib.util
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                                reason="mkdocs is not installed (pip install '.[docs]')")

SECTIONS = {  # page of the built site -> a heading it must have
    "index.html": "What is in the box",
    "getting-started/index.html": "What the first command prints",
    "concepts/index.html": "Concepts",
    "concepts/units/index.html": "Optional capabilities",
    "concepts/rules/index.html": "The rules",
    "concepts/tasks/index.html": "Real data and synthetic stand-ins",
    "concepts/analyses/index.html": "The analyses",
    "concepts/scenarios/index.html": "Sweeps on Dask",
    "concepts/layers/index.html": "The stable Python entry points",
    "how-to/add-unit/index.html": "Add a unit",
    "how-to/add-rule/index.html": "Add a rule",
    "how-to/add-task/index.html": "Add a task",
    "how-to/add-analysis/index.html": "Add an analysis",
    "how-to/add-scenario/index.html": "Add a scenario",
    "how-to/plugin-package/index.html": "Ship a plug-in package",
    "how-to/dask-sweep/index.html": "On an existing scheduler",
    "how-to/read-results/index.html": "Read results with xarray",
    "how-to/reproduce-paper/index.html": "dynlab reproduce",
    "papers/index.html": "Papers",
    "reference/index.html": "API reference",
    "how-to/command-line/index.html": "Run directories",
    "papers/cross-paper/index.html": "Worked example: scripting an ablation across papers",
    "gallery/index.html": "Gallery",
}
PAPERS = {  # paper page -> its scenario
    "aru": "aru-table1",
    "elm-neuron": "elm-shd-adding",
    "elm-scaling": "elm-budget",
    "pc-width-depth": "pc-width-depth",
    "sith": "sith-trw",
}


def _hooks():
    spec = importlib.util.spec_from_file_location("dynlab_docs_hooks", ROOT / "docs" / "hooks" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gallery_cache(tmp_path_factory) -> Path:
    """The build's ``$DYNLAB_GALLERY_CACHE``: empty when [`site`][] starts."""
    return tmp_path_factory.mktemp("gallery")


@pytest.fixture(scope="module")
def site(tmp_path_factory, gallery_cache) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    # The gallery's jacobian-grid entry only (the whole gallery takes minutes; this one a second),
    # built afresh: not cached. Without the suite's compilation cache (conftest's), which would win
    # over the one the build keeps beside the gallery's (see the test of that cache below).
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DYNLAB_GALLERY_ONLY": "jacobian-grid",
           "DYNLAB_GALLERY_CACHE": str(gallery_cache), "MPLBACKEND": "Agg"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        capture_output=True, text=True, env=env, cwd=tmp_path_factory.getbasetemp(), timeout=600,
    )
    log = "\n".join(line for line in (result.stdout + result.stderr).splitlines() if "WARNING" in line or "ERROR" in line)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{log or result.stderr[-3000:]}"
    return out


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def _headings(html: str) -> set[str]:
    return {_text(h).replace("\u00b6", "").strip() for h in re.findall(r"<h[1-6][^>]*>(.*?)</h[1-6]>", html, re.S)}


def _reference_ids(site: Path) -> set[str]:
    ids: set[str] = set()
    for page in (site / "reference").rglob("*.html"):
        ids.update(re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8")))
    return ids


def test_every_section_is_built(site):
    missing = []
    for page, heading in SECTIONS.items():
        path = site / page
        if not path.is_file() or heading not in _headings(path.read_text(encoding="utf-8")):
            missing.append(f"{page} (heading {heading!r})")
    for paper, scenario in PAPERS.items():
        path = site / "papers" / paper / "index.html"
        if not path.is_file() or f"dynlab run {scenario}" not in _text(path.read_text(encoding="utf-8")):
            missing.append(f"papers/{paper} (with the command 'dynlab run {scenario}')")
    assert not missing, "sections missing from the site: " + "; ".join(missing)


def test_gallery_shows_the_figure_made_by_its_command(site):
    """The gallery page holds the entry's exact command and the figure that command wrote during
    the build (a PNG in the site, not a committed image)."""
    page = (site / "gallery" / "index.html").read_text(encoding="utf-8")
    assert "dynlab analyze jacobian-grid --model aru --set model.hidden=16 --out jacobian-grid.nc" in _text(page)
    (src,) = re.findall(r'<img[^>]*src="([^"]*jacobian-grid[^"]*\.png)"', page)
    image = (site / "gallery" / src).resolve()
    assert image.is_file() and image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(ROOT.glob("docs/**/*.png")), "images are made by the build, never committed"


def test_gallery_keeps_its_compilation_cache_for_the_next_build(site, gallery_cache):
    """Given `compile_cache` (the docs build gives one beside the gallery's cache), the programs
    the entries compiled stay for the next build, which loads them instead of compiling; the
    scratch cache is removed. Checked on the build of [`site`][] (it calls the gallery's `build`
    with `compile_cache` = `$DYNLAB_GALLERY_CACHE/jax-compilation-cache`; a failed entry would have
    failed the strict build), not on a second build of the entry (~10 s of CPU)."""
    (built,) = [d for d in gallery_cache.iterdir() if (d / "gallery.md").is_file()]  # the gallery of this tree
    assert (built / "img" / "jacobian-grid.png").is_file() and not (built / "jax-cache").exists()
    kept = gallery_cache / "jax-compilation-cache"
    assert any(p.is_file() for p in kept.rglob("*")), "no compiled program kept"


def test_reference_documents_every_public_name_and_module(site, tmp_path):
    import griffe

    ids = _reference_ids(site)
    package = griffe.load("dynlab", search_paths=[str(_hooks().stage_package(ROOT, tmp_path))])
    modules, names = [], []

    def walk(module):
        if module.name == "__main__":
            return
        modules.append(module.path)
        for name in module.exports or ():
            name = str(name)
            member = module.get_member(name) if name in module.members else None
            paths = {f"{module.path}.{name}"}
            if member is not None and member.is_alias:
                # a re-export is documented where it is defined; an alias griffe cannot resolve
                # (an outside package) is looked up under this module's path only
                with contextlib.suppress(griffe.AliasResolutionError, griffe.CyclicAliasError):
                    paths.add(member.final_target.path)
            if not paths & ids:
                names.append(f"{module.path}.{name}")
        for sub in module.modules.values():
            if not sub.is_alias:  # a submodule, not a module imported into this one
                walk(sub)

    walk(package)
    assert len(modules) > 50, f"the staged package looks incomplete: {modules}"
    undocumented = [m for m in modules if m not in ids]
    assert not undocumented, ("modules missing from the API reference (add '::: MODULE' to a page under "
                              "docs/reference/): " + ", ".join(undocumented))
    assert not names, "public names (in an __all__) missing from the API reference: " + ", ".join(names)


def test_site_fetches_nothing_at_view_time(site):
    external = []
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        for tag in re.findall(r"<(?:script|link|img|iframe)\b[^>]*>", html):
            if re.search(r'\b(?:src|href)="(?:https?:)?//', tag) and 'rel="canonical"' not in tag:
                external.append(f"{page.relative_to(site)}: {tag}")
    assert not external, "pages load resources from the network:\n" + "\n".join(external[:10])
    assert (site / "javascripts" / "mathjax" / "tex-svg-full.js").is_file()
    assert "javascripts/mathjax/tex-svg-full.js" in (site / "reference" / "analyses" / "lyapunov" / "index.html").read_text()

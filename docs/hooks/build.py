"""MkDocs hooks of the documentation build (mkdocs.yml `hooks:`); nothing here touches the network.

- The API reference is built from the sources of this checkout by griffe (static analysis, no
  import). The repository keeps `rules/`, `analyses/` and `scenarios/` at the top level while the
  installed package has them inside `dynlab/` (pyproject's `package-dir`), so the build lays out a
  staging tree of symbolic links in the installed shape and points mkdocstrings at it. The docs
  therefore describe the checkout, whether dynlab is installed editable, normally or not at all.
- MathJax (for the `$...$` / `$$...$$` math of the docstrings and pages) is served from the
  `django-static-mathjax` pip package (a copy of MathJax 3, no Python dependencies), added to the
  site as `javascripts/mathjax/tex-svg-full.js`: the self-contained SVG build, so no fonts or
  extensions are fetched at page load either.
- The gallery (`gallery.md` and its figures) is made by `docs/gallery.py` from small runs of the
  code being documented, cached under a hash of the package's sources and of that script
  (`$DYNLAB_GALLERY_CACHE`, default `~/.cache/dynlab/gallery`), so an unchanged tree is not
  re-run. JAX's compilation cache is kept there too (`jax-compilation-cache`): a rebuild after
  an edit loads the programs the edit left unchanged instead of compiling them (the gallery's
  time goes mostly to compiling: on 2 cores about 4 min with every program cached, 6 to 7
  min with none). `DYNLAB_GALLERY_ONLY=NAME,NAME` builds only those entries (the docs test uses
  it), `DYNLAB_GALLERY_JOBS=N` in N worker processes (default: one per core, at most 4); a
  failed entry fails the build.
- Pages whose code runs ([`RUN_PAGES`][], "Use dynlab from Python"): their untitled ```` ```python ````
  blocks run in order in one fresh interpreter, in an empty folder, when the site is built, and what
  each printed is put under it. A block that fails fails the build. The output is cached under a hash
  of the package's sources and of the page, as the gallery is; `DYNLAB_GALLERY_ONLY` (a partial build,
  the docs test's) leaves a page's code unrun unless it names the page.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

# Top-level folders installed inside the dynlab package (pyproject.toml [tool.setuptools] package-dir).
MAPPED = {"rules": "rules", "analyses": "analyses", "scenarios": "scenarios"}
MATHJAX_BUILD = "tex-svg-full.js"
MATHJAX_DEST = "javascripts/mathjax/" + MATHJAX_BUILD

_stage: Path | None = None


def stage_package(repo: Path, dest: Path) -> Path:
    """Lay out `dest/dynlab` as the installed package: links to every entry of `repo/dynlab`, plus
    `rules`, `analyses` and `scenarios` from the repository's top level. Returns `dest`."""
    pkg = dest / "dynlab"
    pkg.mkdir(parents=True)
    for entry in sorted((repo / "dynlab").iterdir()):
        if entry.name == "__pycache__" or entry.name in MAPPED:
            continue
        (pkg / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    for name, folder in MAPPED.items():
        (pkg / name).symlink_to(repo / folder, target_is_directory=True)
    return dest


def mathjax_file() -> Path:
    """The MathJax build shipped by the `django-static-mathjax` package (the `docs` extra)."""
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise PluginError("MathJax is missing: install the docs extra, pip install '.[docs]' "
                          "(it ships MathJax in the django-static-mathjax package)")
    path = Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax" / "es5" / MATHJAX_BUILD
    if not path.is_file():
        raise PluginError(f"MathJax build not found at {path}: reinstall django-static-mathjax")
    return path


@event_priority(100)
def on_config(config):
    global _stage
    repo = Path(config.config_file_path).resolve().parent
    if _stage is None:
        _stage = Path(tempfile.mkdtemp(prefix="dynlab-docs-"))
    # Laid out anew for every build, so that `mkdocs serve` sees modules added since it started.
    # (rmtree removes the links, never what they point to.)
    shutil.rmtree(_stage / "dynlab", ignore_errors=True)
    stage_package(repo, _stage)
    handlers = config.plugins["mkdocstrings"].config.handlers
    handlers.setdefault("python", {})["paths"] = [str(_stage)]
    return config


def _load_gallery(repo: Path):
    """`docs/gallery.py` as the module `gallery`, with its folder on `sys.path`: the build's worker
    processes (spawned, they inherit `sys.path`) import it by that name to unpickle their tasks, and
    its dataclasses look their module up in `sys.modules`."""
    folder = str(repo / "docs")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("gallery", repo / "docs" / "gallery.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def source_hash(repo: Path, only: str) -> str:
    """SHA-256 over the package's sources (.py, .toml), the gallery script and the entry choice."""
    digest = hashlib.sha256(only.encode())
    paths = [repo / "docs" / "gallery.py"]
    for folder in ("dynlab", *MAPPED):
        paths += sorted(p for p in (repo / folder).rglob("*") if p.suffix in {".py", ".toml"} and "__pycache__" not in p.parts)
    for path in paths:
        digest.update(path.relative_to(repo).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def gallery(repo: Path) -> Path:
    """The folder holding `gallery.md` and `img/`: from the cache, or built now (minutes)."""
    only = os.environ.get("DYNLAB_GALLERY_ONLY", "")
    cache = Path(os.environ.get("DYNLAB_GALLERY_CACHE", Path.home() / ".cache" / "dynlab" / "gallery"))
    out = cache / source_hash(repo, only)
    if (out / "gallery.md").is_file():
        return out
    module = _load_gallery(repo)
    try:
        failures = module.build(out.with_name(out.name + ".partial"), set(only.split(",")) if only else None,
                                log=lambda line: print(line, flush=True), compile_cache=cache / "jax-compilation-cache")
    except ValueError as error:  # a bad DYNLAB_GALLERY_JOBS
        raise PluginError(str(error)) from None
    if failures:
        raise PluginError("gallery entries failed (docs/gallery.py):\n" + "\n".join(failures))
    shutil.rmtree(out, ignore_errors=True)
    out.with_name(out.name + ".partial").rename(out)
    return out


def on_files(files, config):
    files.append(File.generated(config, MATHJAX_DEST, abs_src_path=str(mathjax_file())))
    folder = gallery(Path(config.config_file_path).resolve().parent)
    files.append(File.generated(config, "gallery.md", abs_src_path=str(folder / "gallery.md")))
    for image in sorted((folder / "img").iterdir()):
        files.append(File.generated(config, f"img/{image.name}", abs_src_path=str(image)))
    return files


RUN_PAGES = {"how-to/python.md": "python-page"}
"""Pages whose ```` ```python ```` blocks run in the build, with the name `DYNLAB_GALLERY_ONLY` gives each."""
_BLOCK = re.compile(r"^```python\n(.*?)^```\n", re.S | re.M)
_MARK = "--- dynlab docs: block {} ---"


def run_page_code(markdown: str, repo: Path) -> str:
    """`markdown` with each ```` ```python ```` block followed by what it printed, the blocks run in
    order in one fresh interpreter in an empty folder (cached: [`source_hash`][] and the page)."""
    blocks = _BLOCK.findall(markdown)
    cache = Path(os.environ.get("DYNLAB_GALLERY_CACHE", Path.home() / ".cache" / "dynlab" / "gallery"))
    key = hashlib.sha256((source_hash(repo, "python-page") + markdown).encode()).hexdigest()[:16]
    stored = cache / "pages" / f"{key}.txt"
    if stored.is_file():
        printed = stored.read_text()
    else:
        script = "\n".join(f"print({_MARK.format(i)!r}, flush=True)\n{code}" for i, code in enumerate(blocks))
        with tempfile.TemporaryDirectory() as cwd:
            done = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True,
                                  env={**os.environ, "MPLBACKEND": "Agg"})
        if done.returncode != 0:
            raise PluginError(f"a python block of a docs page failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        printed = done.stdout
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(printed)
    outputs = {int(m.group(1)): m.group(2).strip("\n")
               for m in re.finditer(r"--- dynlab docs: block (\d+) ---\n(.*?)(?=--- dynlab docs: block |\Z)", printed, re.S)}
    count = iter(range(len(blocks)))

    def with_output(match):
        text = outputs.get(next(count), "")
        return match.group(0) + (f"\n```text\n{text}\n```\n" if text else "")

    return _BLOCK.sub(with_output, markdown)


def on_page_markdown(markdown, page, config, files):
    name = RUN_PAGES.get(page.file.src_uri)
    only = os.environ.get("DYNLAB_GALLERY_ONLY", "")
    if name is None or (only and name not in only.split(",")):
        return markdown
    return run_page_code(markdown, Path(config.config_file_path).resolve().parent)


def on_shutdown():
    global _stage
    if _stage is not None:
        shutil.rmtree(_stage, ignore_errors=True)
        _stage = None

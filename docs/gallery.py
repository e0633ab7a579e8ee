"""The gallery: the figure of every analysis and scenario, made from small runs by the commands shown.

    python docs/gallery.py OUT_DIR [--only NAME,NAME] [--compile-cache DIR]

runs the commands of every entry below through the `dynlab` command line (in worker processes,
[`build`][], in a scratch directory `OUT_DIR/work`), copies the figures they write to `OUT_DIR/img/` and writes
`OUT_DIR/gallery.md`: one section per entry with its figures and the exact commands that made
them, in order (later entries use the run directories the first ones train). Nothing is
committed: the documentation build (`docs/hooks/build.py`) calls [`build`][] and adds the page
and the images to the site, so the figures always come from the code being documented. The
build caches the result under a hash of the package's sources and of this file, and keeps JAX's
compilation cache beside it, so a rebuild after an edit compiles only the programs it changed.

The runs are small (a few hundred training steps, short trajectories, toy grids), so the figures
show what each analysis draws, not the papers' results (the paper pages and `dynlab reproduce`
give those). Most of their time goes to compiling. The 33 entries before issue 49's two
(flip-threshold, flipflop-bifurcations) take 12-13.5 min of CPU time:
in two worker processes on 2 cores, four builds of these entries or of nearly these took
6 min 21 s to 7 min 6 s (the spread is this machine's; in one process, before the runs were
shortened: 11 min 16 s), and with the compilation cache of an earlier build 3 min 57 s and
4 min 10 s. Data sets absent from the data directory are replaced by the tasks' synthetic
stand-ins, and the figures say which they used.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from dynlab import memory_maps


@dataclass(frozen=True)
class Entry:
    """One gallery section: `commands` run in order; `figures` (globs relative to the scratch
    directory) are the figures shown."""

    name: str
    title: str
    caption: str
    commands: tuple[str, ...]
    figures: tuple[str, ...]


def _analysis(name: str, title: str, caption: str, args: str, *before: str) -> Entry:
    """An analysis entry whose dataset is `NAME.nc` and whose figure is `NAME.png`."""
    return Entry(name, title, caption, (*before, f"dynlab analyze {name} {args} --out {name}.nc"), (f"{name}.png",))


def _scenario(name: str, title: str, caption: str, sets: str, *, paper: bool = False) -> Entry:
    """A scenario entry: every figure the scenario writes under `runs/NAME`; for a paper's
    scenario also the figure of its verdicts, `findings.nc`."""
    commands = (f"dynlab run {name} --out runs/{name} {sets}".rstrip(),)
    if paper:
        commands += (f"dynlab plot runs/{name}/findings.nc",)
    return Entry(name, title, caption, commands, (f"runs/{name}/*.png", f"runs/{name}/*/*.png"))


TRAIN = (
    "dynlab train --model aru --task adding --steps 200 --out runs/aru",
    "dynlab train --model aru --task adding --steps 200 --seed 1 --out runs/aru-s1",
    "dynlab train --model gru --task adding --steps 300 --out runs/gru",
    "dynlab train --model sith-rnn --task hierarchical-language --steps 20 --out runs/sith",
)

ENTRIES: tuple[Entry, ...] = (
    Entry("training", "Training", "Learning curves of a 64-neuron ARU network on the adding task "
          "(held-out MSE against chance). These runs are used by the entries below.", TRAIN,
          ("runs/aru/learning_curve.png",)),
    _analysis("lyapunov", "Lyapunov spectrum", "The quick start's job: the 16 largest exponents of a "
              "fresh ARU network under a constant drive, with 95% intervals over 5 realisations, and "
              "the running estimates.", "--model aru"),
    _analysis("clv", "Covariant Lyapunov vectors", "Local growth rates of the 8 leading CLVs of the trained "
              "ARU under its task, and the angles between them (hyperbolicity).",
              "--checkpoint runs/aru --task adding --steps 1000"),
    _analysis("fixed-points", "Fixed and slow points", "Fixed and slow points of the trained GRU without "
              "input, in the top principal components of its visited states, with their Jacobian spectra.",
              "--checkpoint runs/gru --drive 0"),
    _analysis("spectra", "Weight, Jacobian and covariance spectra", "The trained ARU's recurrent weight "
              "eigenvalues, the state Jacobian's spectrum along a task-driven trajectory and the "
              "activity covariance eigenspectrum with its power-law fit.", "--checkpoint runs/aru --task adding --steps 500 --every 50"),
    _analysis("activity", "Population activity", "Fraction active, Fano factors and pairwise correlations "
              "of the trained ARU's neurons under its task.", "--checkpoint runs/aru --task adding"),
    _analysis("trw", "Temporal receptive windows", "Correlation of intact and block-scrambled recurrence "
              "matrices per layer of a fresh 3-layer SITHCon, and each layer's half-maximum scale s50.",
              "--model sithcon --n-shuffle 10"),
    Entry("dsa", "Dynamical similarity", "DSA distances between two seeds of the ARU and a GRU, all trained "
          "on the adding task: the heat map of the distance matrix.",
          ("dynlab analyze dsa runs/aru runs/aru-s1 runs/gru --out dsa.nc",), ("dsa.png",)),
    _analysis("sta", "Receptive fields (spike-triggered averages)", "The input preceding each neuron's high "
              "activity, per layer of the SITH-RNN trained on the hierarchical language, at each level "
              "of the language.", "--checkpoint runs/sith"),
    _analysis("perturb", "Accuracy under a perturbation", "The trained ARU's held-out MSE under a noisy drive "
              "on every neuron, against the drive's mean.", "--checkpoint runs/aru --kind noisy --strength 0,1,2,5"),
    _analysis("adaptation", "ARU Fig. 5c/d: adapted against fixed gain", "λ1 of the trained ARU's static map "
              "with (n, s) frozen where the ARU sets them under each drive, against a fixed (n, s).",
              "--checkpoint runs/aru --task adding"),
    _analysis("lyapunov-grid", "ARU App. Fig. 6B: λ1 over (n, s)", "λ1 of the static γ network over the "
              "paper's (n, s) grid.", "--model aru --set model.hidden=16 --realisations 3"),
    _analysis("jacobian-grid", "ARU App. Fig. 6A: Jacobian norm over (n, s)", "Mean Jacobian norm of the "
              "static γ network over the (n, s) grid.", "--model aru --set model.hidden=16"),
    _analysis("controller", "ARU Fig. 5a/b: the controller", "Controller states of the trained ARU under "
              "constant drives, in their top principal components, and the (n, s) paths they set.",
              "--checkpoint runs/aru"),
    _analysis("gain-scaling", "ARU Fig. 3b: gain scaling", "Steady-state gain and saturation of the trained "
              "ARU's neurons against the noise's standard deviation, with power-law and exponential fits.",
              "--checkpoint runs/aru"),
    _analysis("fractional-order", "ARU Fig. 4b-d: fractional order", "The fractional order of each neuron's "
              "response to a step drive.", "--checkpoint runs/aru --drives 1,5,20"),
    _analysis("gradient-by-position", "ARU Fig. 18: gradients by input position", "Gradient norms of the "
              "loss with respect to each input position of the adding task.", "--checkpoint runs/aru"),
    _analysis("weight-eigs", "ARU Fig. 5e: recurrent weight eigenvalues", "Eigenvalues of the trained ARU's "
              "W_hh against the unit circle.", "--checkpoint runs/aru"),
    Entry("flip-threshold", "Flip threshold against the fold", "The smallest sustained input on input channel 0 "
          "that flips bit 0 of a 16-unit GRU trained on the 3-bit flip-flop, from each of its 8 corners (simulation "
          "and bisection), against the fold of that corner's branch found by continuation, with a ±5% band.",
          ("dynlab train --model gru --task flipflop --set model.hidden=16 --steps 400 --out runs/gru-flipflop",
           "dynlab analyze flip-threshold --checkpoint runs/gru-flipflop --u-max 0.5 --out flip-threshold.nc"),
          ("flip-threshold.png",)),
    Entry("continuation", "Bifurcation diagram: where a flip-flop loses its bits", "Every fixed point of a 16-unit "
          "GRU trained on the 3-bit flip-flop, continued along a constant input u on input channel 0 over "
          "[-0.5, 0.5]: the read-out of bit 0 against u, stable branches solid, unstable dashed, folds (F) where a "
          "corner meets a saddle and its bit is lost (an S-shaped curve: hysteresis).",
          ("dynlab train --model gru --task flipflop --set model.hidden=16 --steps 400 --out runs/gru-ff",
           "dynlab analyze continuation --checkpoint runs/gru-ff --path 'channel=0,span=[-0.5,0.5]' --no-cycles "
           "--out continuation.nc"),
          ("continuation.png",)),
    Entry("pc-bp", "PC against BP across width and depth", "Cosine of the PC and BP gradients over a width × "
          "depth grid of mean-field residual MLPs, s − 1 against L/N, and both losses.",
          ("dynlab compare pc-bp --widths 8,32,128 --depths 2,4,8 --param mf --task toy --steps 20 --out pc_bp.nc",),
          ("pc_bp_*.png",)),
    Entry("pc-bptt", "PC through time against BPTT", "The same for an RNN, PC through time against BPTT, with "
          "the sequence length T in the role of the depth.",
          ("dynlab compare pc-bp --model rnn --widths 16,64 --lengths 2,8 --task adding --steps 5 --out pc_bptt.nc",),
          ("pc_bptt*.png",)),
    _scenario("aru-seeds", "Scenario aru-seeds", "A sweep: two ARU widths × 3 seeds on the adding task, "
              "Lyapunov spectra after training, merged over the sweep axes.",
              "--set train.steps=100"),
    _scenario("aru-table1", "Scenario aru-table1 (ARU paper, Table 1)", "Accuracy of three of the table's "
              "networks against the noisy drive's mean, on 7×7 psMNIST after 100 steps.",
              "--set 'params.networks=[\"rnn-relu\",\"aru\",\"lstm\"]' --set params.steps=100 "
              "--set 'params.seeds=[0]' --set params.downsample=4 --set params.n_test=256 "
              "--set 'params.rotation={network=\"aru\",steps=50}' "
              "--set 'params.adaptation={realisations=2,steps=300,burn_in=50}'", paper=True),
    _scenario("cross-adaptation", "Scenario cross-adaptation", "The ARU's gain control inside the ELM network "
              "under the noisy drive (six networks, 50 steps).",
              "--set 'sweep.seed=[0]' --set train.steps=50 --set train.batch_size=32 --set train.eval_every=25 "
              "--set train.checkpoint_every=50"),
    _scenario("cross-lyapunov", "Scenario cross-lyapunov", "Lyapunov spectra of three units at initialisation "
              "and after training on the adding task.",
              "--set 'sweep={\"model.unit\"=[\"aru\",\"gru\",\"sith-rnn\"],seed=[0]}' --set train.steps=100 "
              "--set train.eval_every=50 --set train.checkpoint_every=100 --set model.width=16"),
    _scenario("cross-fingerprint", "Scenario cross-fingerprint", "The fixed points found per unit and "
              "seed (sweep.png) and the DSA distances between two units trained on the adding task (dsa.png).",
              "--set 'sweep={\"model.unit\"=[\"gru\",\"rnn\"],seed=[0]}' --set train.steps=200 "
              "--set train.eval_every=100 --set train.checkpoint_every=200"),
    _scenario("cross-pc-alignment", "Scenario cross-pc-alignment", "PC through time against BPTT on two units "
              "over width and length: the cosine of their gradients on one model, at initialisation and after 2 "
              "steps of PC.",
              "--set 'sweep={\"model.unit\"=[\"gru\",\"blockdiag\"],\"model.width\"=[8,16],\"task.length\"=[4,8],"
              "seed=[0]}' --set 'train={steps=2,eval_every=2,checkpoint_every=2}' --set 'claims=[]'"),
    _scenario("cross-pc-law", "Scenario cross-pc-law", "The width/length law of PC through time on the tanh RNN: "
              "cos(PC, BPTT) at initialisation against the width, as registered and with the depth factor T^-1 "
              "and a mean-field read-out (model.recurrence).",
              "--set 'sweep={\"model.unit\"=[\"rnn\"],\"model.recurrence\"=[\"plain\",\"time-residual\"],"
              "\"model.width\"=[8,32],\"task.length\"=[4,8],seed=[0]}' "
              "--set 'analyses=[{name=\"grad-compare\",task=\"train\",batch_size=4,s_minus_1=true}]' --set 'claims=[]'"),
    _scenario("cross-trw", "Scenario cross-trw", "TRWs per layer of an ARU stack against SITH-RNN.",
              "--set train.steps=20 --set train.eval_every=20 --set train.checkpoint_every=20 "
              "--set 'sweep={seed=[0],variants={network={aru={model={unit=\"aru\",hidden=8,n_g=2,layers=2},"
              "train={lr=3e-3}},sith-rnn={model={unit=\"sith-rnn\"},train={lr=1e-2}}}}}'"),
    _scenario("elm-budget", "Scenario elm-budget (ELM scaling laws)", "Held-out loss against k_e at one "
              "fixed budget, with the joint I_rep fit; the loss along N and along k_e alone, and the "
              "feed-forward ablation.",
              "--set 'params.budgets=[4000]' --set 'params.d_ms=[2,3,5,10]' --set 'params.seeds=[0]' "
              "--set params.steps=10 --set params.eval_size=128 --set 'params.n_sweep={d_m=3,hidden=[2,4,8]}' "
              "--set 'params.k_e_sweep={hidden=4,d_ms=[2,3,5]}'", paper=True),
    _scenario("elm-shd-adding", "Scenario elm-shd-adding (ELM neuron)", "The ELM network against a "
              "parameter-matched LSTM and against itself with one constant timescale of 25 ms, on "
              "SHD-Adding at two bin sizes (synthetic unless the SHD files are present).", "--set 'params.seeds=[0]' --set params.steps=10 --set params.eval_size=64 "
              "--set 'params.bins_ms=[50.0,100.0]'", paper=True),
    _scenario("flipflop-bifurcations", "Scenario flipflop-bifurcations", "A GRU and a vanilla RNN on the 3-bit "
              "flip-flop (one seed): their fixed points continued along input channel 0 until the corners merge, the "
              "flip threshold of each corner against its fold, and the stable points after 100 and 200 training steps "
              "and at the end.", "--set 'sweep={\"model.unit\"=[\"gru\",\"rnn\"],seed=[0]}'"),
    _scenario("isolated-neurons", "Scenario isolated-neurons (a [transfer])", "The ARU paper's Fig. 4c probe "
              "as a study: three units trained on the adding task (50 steps), then with isolated neurons; "
              "lambda_1 and the held-out loss at both stages.",
              "--set train.steps=50 --set 'sweep.seed=[0]'"),
    _scenario("pc-time-law", "Scenario pc-time-law", "The width/length law of PC through time: s − 1 and the "
              "cosine over width × length, without and with the residual recurrence.",
              "--set 'params.widths=[8,32]' --set 'params.lengths=[2,8]' --set 'params.seeds=[0]' --set params.steps=2"),
    _scenario("pc-width-depth", "Scenario pc-width-depth (PC width and depth)", "The paper's figures on a "
              "toy grid: cosines, s − 1 against L/N, the SP and no-skip MLPs, and the verdicts.",
              "--set 'params.widths=[8,64]' --set 'params.depths=[2,8]' --set 'params.sp_widths=[64]' "
              "--set 'params.mlp_widths=[64]' --set 'params.mlp_depths=[8]' --set params.seeds=1 --set params.steps=5", paper=True),
    _scenario("sith-trw", "Scenario sith-trw (SITH-RNN)", "Zero-shot accuracy against dilation and TRWs per "
              "layer, for SITHCon and Net 1 after a few steps (quick: four dilations; 6 shuffles per scale).",
              "--set 'params.networks=[\"sithcon\",\"rnn-generic\"]' --set 'params.seeds=[0]' --set params.steps=20 "
              "--set params.generic_steps=20 --set params.quick=true --set params.n_shuffle=6", paper=True),
)


def _run(command: str, cwd: Path) -> str:
    """One `dynlab` command line, in this process; returns an error message or ''."""
    from click.testing import CliRunner

    from dynlab.cli import main

    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, shlex.split(command)[1:] + ["-q"] * _quiet(command))
    finally:
        os.chdir(old)
    if result.exit_code != 0:
        return f"exit {result.exit_code}: {(result.stderr or result.output).strip().splitlines()[-1:]}"
    return ""


def _quiet(command: str) -> bool:
    return shlex.split(command)[1] in {"train", "run"}


def _task(commands: tuple[str, ...], cwd: Path) -> tuple[str, float]:
    """Run `commands` in order (a worker process's task); (the first error or '', seconds)."""
    start = time.time()
    error = next((f"`{c}`: {msg}" for c in commands if (msg := _run(c, cwd))), "")
    # every compiled CPU program holds memory maps until freed: a long-lived worker frees them
    # once it holds half the kernel's limit
    memory_maps.relieve()
    return error, time.time() - start


def _outputs(command: str) -> set[str]:
    words = shlex.split(command)
    return {words[i + 1] for i, w in enumerate(words[:-1]) if w == "--out"}


TRAINED = set().union(*map(_outputs, TRAIN))
"""The run directories the training entry writes."""


def _reads_training(entry: Entry) -> bool:
    return entry.name != "training" and any(TRAINED & set(shlex.split(c)) for c in entry.commands)


def _jobs() -> int:
    """Worker processes: ``$DYNLAB_GALLERY_JOBS``, else one per available core (at most 4)."""
    value = os.environ.get("DYNLAB_GALLERY_JOBS", "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"DYNLAB_GALLERY_JOBS must be a positive integer, got {value!r}")
        return int(value)
    return max(1, min(4, len(os.sched_getaffinity(0))))


COMPILE_CACHE_MAX_BYTES = 2**30
"""The most a kept compilation cache holds (JAX evicts the least recently used programs)."""


def build(out: Path, only: set[str] | None = None, log=print, jobs: int | None = None,
          compile_cache: Path | None = None) -> list[str]:
    """Run the entries (all, or those named in `only`) in `out/work`, write `out/gallery.md` and
    `out/img/*.png`; returns the failures, one line each (their sections say so).

    The runs are compile-bound and single-threaded, so they go to `jobs` worker processes (default
    [`_jobs`][]): the training commands first, each a task, beside the entries that read no trained
    run; the entries that do read one once training is done.

    The workers share JAX's persistent compilation cache, `compile_cache` (None: a scratch one in
    `out/jax-cache`, removed afterwards; `$JAX_COMPILATION_CACHE_DIR` wins over both). A program
    compiled once, by another entry or by an earlier build, is loaded instead of compiled: JAX
    keys the cache on the program, XLA's flags, the compile options and the versions
    (`jax/_src/cache_key.py`), so a changed program is compiled afresh. The gallery's time goes mostly to compiling: on 2 cores the
    whole gallery took 426 s with an empty cache and 250 s (467 CPU-s against 807) with the one
    that build left (28 MB; 237 s with the size-capped cache, which finds every program); a kept
    cache is capped at [`COMPILE_CACHE_MAX_BYTES`][].
    """
    # Small runs of many programs: the time goes to compiling them. LLVM at -O0 (XLA's graph
    # optimisations unchanged) cuts the CPU time by a third (tests/conftest.py: the results can
    # differ in the last bits); set before any worker starts its backend.
    if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
    work, img, scratch = out / "work", out / "img", out / "jax-cache"
    for d in (work, img, scratch):  # scratch: the compilation cache unless one is kept
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(compile_cache or scratch))
    if compile_cache is not None:
        os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(COMPILE_CACHE_MAX_BYTES))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    entries = [e for e in ENTRIES if only is None or e.name in only]  # entries reading runs/ need "training"
    first = [((c,), "training") for e in entries if e.name == "training" for c in e.commands]
    # the scenarios are the longest tasks: started first, they do not finish alone at the end
    free = [e for e in entries if e.name != "training" and not _reads_training(e)]
    first += [(e.commands, e.name) for e in sorted(free, key=lambda e: not e.commands[0].startswith("dynlab run"))]
    later = [(e.commands, e.name) for e in entries if _reads_training(e)]
    errors: dict[str, str] = {}

    def done(name: str, commands: tuple[str, ...], result: tuple[str, float]) -> None:
        error, took = result
        if error:
            errors.setdefault(name, error)
        what = f" ({commands[0].split(' --out ')[-1]})" if name == "training" else ""
        log(f"gallery: {name}{what}: {took:.0f} s{'; ' + error if error else ''}")

    start = time.time()
    jobs = jobs or _jobs()
    if jobs == 1:
        for commands, name in first + later:
            done(name, commands, _task(commands, work))
    else:
        context = multiprocessing.get_context("spawn")  # no fork of a process that runs XLA's threads
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
            pending = {pool.submit(_task, commands, work): (commands, name) for commands, name in first}
            training = {f for f, (_, name) in pending.items() if name == "training"}
            while pending:
                finished, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    commands, name = pending.pop(future)
                    done(name, commands, future.result())
                    training.discard(future)
                    if not training and later:  # the trained runs exist: their readers can start
                        pending.update({pool.submit(_task, c, work): (c, n) for c, n in later})
                        later = []
    shutil.rmtree(scratch, ignore_errors=True)
    log(f"gallery: {len(entries)} entries in {time.time() - start:.0f} s with {jobs} worker(s)")

    page = [_HEADER]
    failures = []
    for entry in entries:
        error = errors.get(entry.name, "")
        figures = sorted(p for pattern in entry.figures for p in work.glob(pattern))
        page += [f"## {entry.title}", "", entry.caption, "", "```bash", *entry.commands, "```", ""]
        if error:
            failures.append(f"{entry.name}: {error}")
            page += [f"!!! failure \"This entry failed when the gallery was built\"\n    {error}", ""]
        for fig in figures:
            name = fig.name if fig.stem.startswith(entry.name) else f"{entry.name}-{fig.name}"
            if (img / name).exists():  # the same file name in two folders of one scenario
                name = f"{entry.name}-{fig.parent.name}-{fig.name}"
            shutil.copyfile(fig, img / name)
            page += [f"![{entry.title}: {fig.name}](img/{name})", ""]
    (out / "gallery.md").write_text("\n".join(page))
    return failures


_HEADER = """# Gallery

The figure of every analysis and scenario, each with the exact commands that made it, run in
this order from an empty directory (the first entry trains the networks that later ones read).
The figures are made from small runs when the documentation is built (`docs/gallery.py`: on 2
cores 6 to 7 minutes at the first build, about 4 once an earlier build's compiled programs are
cached; an unchanged source tree is not run again), so they always show what the documented
code draws. They are not the papers' results: a few hundred training
steps leave some networks near chance (see [Papers](papers/index.md) and `dynlab reproduce`).
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", help="comma-separated entry names")
    parser.add_argument("--compile-cache", type=Path, help="a JAX compilation cache kept between builds "
                        "(default: a scratch one, removed afterwards)")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    failures = build(args.out, only, compile_cache=args.compile_cache)
    for line in failures:
        print("failed:", line, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

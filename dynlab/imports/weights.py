r"""Reading the weights of a model trained elsewhere, without executing anything.

[`read_weights`][] returns a flat ``{name: numpy array}`` from

- **safetensors** (``.safetensors``): a JSON header and raw arrays, read with
  ``safetensors.numpy.load_file``; no code can be in such a file;
- **PyTorch** files (``.pt``, ``.pth``, ``.bin``: ``torch.save(model.state_dict(), path)`` or a
  checkpoint dict holding one; ``.pth.tar`` and ``.pt.tar`` too, as published code often names
  its checkpoints, e.g. NonlinMod's ``e_N.pth.tar``: ``torch.save`` files, not tar archives),
  read with ``torch.load(path, weights_only=True, map_location="cpu")`` when torch is installed
  (the extra ``dynlab[torch]``). Its unpickler builds tensors, dicts, lists and numbers only; a
  pickle whose loading needs any other code (a whole ``nn.Module``, an object with a
  ``__reduce__``) is refused before anything runs.

**Enforces**, each as one-line [`DataError`][dynlab.errors.DataError]s: a missing or unreadable
file; a path that is not a regular file (a pipe, a device such as a link to ``/dev/zero``, a
socket, a directory), checked with ``os.stat`` before anything opens it, so that a FIFO never
blocks the read ([`regular_file`][]); an unknown suffix (valid: [`SUFFIXES`][]); a pickle that
needs code, naming the global it would call (torch's own advice to load it unsafely is not
relayed: dynlab loads arrays only); a PyTorch file while torch is not installed (naming the extra
and safetensors); a file that holds no arrays. Nothing named in the file is imported.

**Devices.** A file saved from GPU tensors (``cuda:0`` storages, as the ELM authors' published
models are) is read onto the CPU (``map_location="cpu"``); no GPU is needed.

**Nested state dicts.** A file may hold the state dict itself or a checkpoint around it
(``{"state_dict": {...}, "epoch": 3}``, ``{"model": {...}, "optimizer": {...}}``). Nested
mappings are flattened with dots (``state_dict.rnn.weight_ih_l0``), as ``nn.Module.state_dict``
names submodules; entries that are not arrays (epoch numbers, strings, hyper-parameters) are
left out. Which keys belong to the network is the format's business ([`Keys`][]): it finds the
prefix of the network's keys (``rnn.``, ``model.rnn.``, ``module.``), or is told it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import numpy as np

from dynlab.errors import DataError

__all__ = ["SUFFIXES", "Keys", "read_weights", "regular_file", "sha256"]

SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".pth.tar", ".pt.tar")
"""The weight files [`read_weights`][] reads: safetensors, and PyTorch's ``torch.save`` files."""

TORCH_EXTRA = ("PyTorch is not installed: install it with pip install 'dynlab[torch]', or save the weights "
               "as safetensors (safetensors.torch.save_file(model.state_dict(), 'weights.safetensors')), "
               "which dynlab reads without torch")


def sha256(path: Path | str) -> str:
    """The SHA-256 of a file's bytes, in hex (what an import's provenance names)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def regular_file(path: Path | str, what: str) -> Path:
    """``path``, checked to be an existing regular file (a symbolic link to one is fine) before
    anything opens it: opening a FIFO for reading blocks until a writer comes, and a device such
    as ``/dev/zero`` never ends. ``what`` names the file in the one-line
    [`DataError`][dynlab.errors.DataError] otherwise (``"weights file"``)."""
    path = Path(path)
    shown = str(path)
    try:
        mode = os.stat(path).st_mode  # follows links: what a read would open
    except FileNotFoundError:
        if os.path.islink(path):
            target = os.readlink(path)
            raise DataError(f"{what} {shown!r} is a symbolic link to {target!r}, which does not exist") from None
        raise DataError(f"no {what} {shown!r}") from None
    except OSError as e:  # permission denied on a parent, a loop of links, a name too long
        raise DataError(f"{what} {shown!r} cannot be read ({e.strerror or type(e).__name__})") from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        via = f" (a symbolic link to {os.readlink(path)!r})" if os.path.islink(path) else ""
        raise DataError(f"{what} {shown!r} is {kind}{via}, not a regular file: give the file itself")
    return path


def read_weights(path: Path | str) -> dict[str, np.ndarray]:
    """The arrays stored in a weight file, by flattened name (see the module doc); nothing executed."""
    path = regular_file(path, "weights file")
    shown = str(path)
    suffix = "".join(path.suffixes[-2:]).lower()
    if suffix not in (".pth.tar", ".pt.tar"):
        suffix = path.suffix.lower()
    if suffix == ".safetensors":
        tree = _read_safetensors(path, shown)
    elif suffix in SUFFIXES:
        tree = _read_torch(path, shown)
    else:
        raise DataError(f"{shown!r}: unknown weights format {path.suffix or '(no suffix)'!r}; "
                        f"valid: {', '.join(SUFFIXES)}")
    flat = _flatten(tree)
    if not flat:
        raise DataError(f"{shown!r} holds no arrays (a state dict of tensors was expected)")
    return flat


def _read_safetensors(path: Path, shown: str) -> dict:
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise DataError("reading safetensors needs the safetensors package: pip install 'dynlab[torch]' "
                        "or pip install safetensors") from None
    try:
        return load_file(str(path))
    except Exception as e:  # a header that is not JSON, a truncated file, a dtype numpy lacks (bf16)
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"{shown!r} is not a readable safetensors file ({detail})") from None


def _read_torch(path: Path, shown: str) -> dict:
    try:
        import torch
    except ImportError:
        raise DataError(f"{shown!r} is a PyTorch file and {TORCH_EXTRA}") from None
    import pickle

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(str(path), weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as e:
        raise DataError(f"{shown!r} is a pickle that needs code to load: {_blocked(str(e))}; dynlab loads arrays "
                        "only and runs no code from a file, so it refuses the file: save model.state_dict() "
                        "(torch.save) or safetensors instead") from None
    except Exception as e:  # not a torch file, truncated, corrupt zip
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"{shown!r} is not a readable PyTorch file ({detail})") from None


_GLOBAL = re.compile(r"GLOBAL\s+([A-Za-z_][\w.]*)")


def _blocked(message: str) -> str:
    """What torch's weights-only unpickler refused, from its message: the global (a function or
    class, ``posix.system``, ``torch.nn.modules.linear.Linear``) that loading would have called.
    Only that name is taken from torch's text, whose advice (re-run with ``weights_only=False``,
    or allow the global) is advice to run the file's code, which dynlab never gives."""
    found = _GLOBAL.search(message)
    if found is None:
        return "it holds Python objects other than tensors, dicts, lists and numbers"
    name = found.group(1)
    name = name if len(name) <= 120 else name[:117] + "..."  # the name is the file's: bounded
    return f"loading it would call {name}"


def _as_array(value) -> np.ndarray | None:
    """A tensor or array as a NumPy array (``None`` for anything else); torch's bfloat16, which
    NumPy lacks, goes through float32."""
    if isinstance(value, np.ndarray):
        return value
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        tensor = value.detach().cpu()
        if str(tensor.dtype) == "torch.bfloat16":
            tensor = tensor.float()
        return tensor.numpy()
    return None


def _flatten(tree, prefix: str = "") -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            name = f"{prefix}{key}"
            array = _as_array(value)
            if array is not None:
                out[name] = array
            elif isinstance(value, Mapping):
                out.update(_flatten(value, name + "."))
    return out


class Keys:
    r"""The network's part of a flat state dict, taken key by key, so that what is wrong is said exactly.

    ``Keys(weights, prefix, what=...)`` looks at the keys starting with ``prefix`` (given without
    it). [`take`][] returns one array, checked for its shape, its dtype and finite values;
    [`finish`][] then refuses keys in scope that were not taken: they belong to a part of the
    model that the format does not build. The scope (``within``) is

    - ``"container"`` (default): the keys inside the *container* of the prefix (its first dotted
      part when the network sits inside a checkpoint mapping, e.g. ``model_state_dict.`` of
      ``model_state_dict.rnn.``; the whole file otherwise). Keys outside it are not the
      network's: an optimizer's state beside it is left alone, with a warning naming what was ignored;
    - ``"prefix"``: the keys under ``prefix`` alone; the format reads or refuses the others itself.

    Arrays keep their dtype (a float64 file stays float64, so that an import can be checked in
    float64; [`set_arrays`][dynlab.imports.run.set_arrays] casts them to the model's).

    **Enforces** one-line [`DataError`][dynlab.errors.DataError]s naming the key and what was
    expected: a missing key, a wrong shape, a non-floating (or, ``integer=True``, non-integer) or
    non-finite array, a mask ([`take_mask`][]) holding other than bool or 0 and 1, extra keys.
    """

    def __init__(self, weights: Mapping[str, np.ndarray], prefix: str, *, what: str,
                 within: Literal["container", "prefix"] = "container"):
        self.weights, self.prefix, self.what = weights, prefix, what
        if within == "prefix":
            scope = prefix
        else:
            scope = prefix.split(".", 1)[0] + "." if "." in prefix.rstrip(".") else ""
        self.scope = [k for k in weights if k.startswith(scope)]
        self.ignored = [k for k in weights if not k.startswith(scope)] if within == "container" else []
        self.taken: set[str] = set()

    def has(self, name: str) -> bool:
        return self.prefix + name in self.weights

    def shape(self, name: str) -> tuple[int, ...] | None:
        """The shape of ``prefix + name`` (``None`` if there is no such key)."""
        a = self.weights.get(self.prefix + name)
        return None if a is None else tuple(np.shape(a))

    def take(self, name: str, shape: tuple[int, ...], why: str = "", *, integer: bool = False) -> np.ndarray:
        """The array ``prefix + name``, which must have ``shape`` (``why`` says where it comes from):
        floating and finite, or integer (indices) with ``integer=True``; its dtype kept."""
        key, array = self._get(name, shape, why)
        if array.dtype.kind not in ("iu" if integer else "f"):
            raise DataError(f"{self.what}: {key!r} holds {array.dtype} values; "
                            f"{'integer indices' if integer else 'floating-point weights'} were expected")
        if not integer and not np.isfinite(array).all():
            raise DataError(f"{self.what}: {key!r} holds NaN or infinite values")
        self.taken.add(key)
        return array

    def _get(self, name: str, shape: tuple[int, ...], why: str) -> tuple[str, np.ndarray]:
        key = self.prefix + name
        if key not in self.weights:
            raise DataError(f"{self.what}: missing key {key!r} (expected shape {list(shape)}{why})")
        array = np.asarray(self.weights[key])
        if tuple(array.shape) != tuple(shape):
            raise DataError(f"{self.what}: {key!r} has shape {list(array.shape)}, expected {list(shape)}{why}")
        return key, array

    def take_mask(self, name: str, shape: tuple[int, ...], why: str = "") -> np.ndarray:
        """The mask ``prefix + name`` as a bool array of ``shape``: stored as bool (what a mask of
        a comparison is, e.g. ``index < n``) or as integers 0 and 1 (``torch.ones_like`` of an
        index tensor). **Enforces** that it holds nothing else (a 2 would scale an input, not mask it)."""
        key, array = self._get(name, shape, why)
        if array.dtype.kind not in "biu":
            raise DataError(f"{self.what}: {key!r} holds {array.dtype} values; "
                            "a mask (bool, or integers 0 and 1) was expected")
        if array.dtype.kind != "b" and not np.isin(array, (0, 1)).all():
            bad = array[~np.isin(array, (0, 1))]
            raise DataError(f"{self.what}: {key!r} is a mask, so its values must be 0 or 1 (or bool), "
                            f"got {bad.size} other values ({bad.min()} .. {bad.max()})")
        self.taken.add(key)
        return array.astype(bool)

    def finish(self, hint: str = "") -> None:
        """Refuse keys in scope that were not taken; warn about keys outside it (``within="container"``)."""
        extra = [k for k in self.scope if k not in self.taken]
        if extra:
            shown = ", ".join(f"{k} {list(np.shape(self.weights[k]))}" for k in extra[:4]) + (", …" if len(extra) > 4 else "")
            raise DataError(f"{self.what}: {len(extra)} extra key{'s' if len(extra) > 1 else ''} that dynlab cannot "
                            f"build: {shown}{hint}")
        if self.ignored:
            shown = ", ".join(self.ignored[:3]) + (", …" if len(self.ignored) > 3 else "")
            warnings.warn(f"ignored {len(self.ignored)} arrays outside {self.prefix.split('.', 1)[0]!r} "
                          f"(not the network's): {shown}", stacklevel=2)

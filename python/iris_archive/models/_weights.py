"""The tensors a decoder takes, by checkpoint name: from an archive (quantized tensors stay
QuantTensors on the GPU, or are dequantized to BF16 once, bit for bit what `iris export
--dtype bf16` writes) or from a safetensors snapshot folder. Records which names were taken,
so a tensor left unused is reported, never silently dropped."""

from __future__ import annotations

import json
import os

import torch

from .._errors import IrisError


class Weights:
    def __init__(self, tensors: dict, config: dict, nbytes: dict, source: str):
        self._tensors, self.config, self._nbytes, self.source = tensors, config, nbytes, source
        self._taken = set()
        self.parallel = None  # a TensorParallel for a rank's archive (from_rank)

    def take(self, name: str, required: bool = True):
        """The tensor (torch.Tensor or QuantTensor) named `name`; None when absent and not required."""
        t = self._tensors.get(name)
        if t is None and name in self._taken:
            raise IrisError(f"{self.source}: tensor '{name}' was taken twice")
        if t is None:
            if required:
                raise IrisError(f"{self.source}: tensor '{name}': the model needs it and the weights do not have it")
            return None
        self._taken.add(name)
        return t

    def release(self, name: str) -> None:
        """Drops this table's reference to a taken tensor (a copy replaced it), so its memory can
        go; it stays counted as taken."""
        if name in self._taken:
            self._tensors[name] = None

    def has(self, name: str) -> bool:
        return name in self._tensors

    def nbytes(self, name: str) -> int:
        """Bytes the tensor occupies as stored (all its components): what a full read costs."""
        return self._nbytes[name]

    def unused(self) -> list:
        return sorted(set(self._tensors) - self._taken)

    def check_all_taken(self) -> None:
        left = self.unused()
        if left:
            raise IrisError(f"{self.source}: {len(left)} tensors the model does not take: {', '.join(left[:20])}"
                            + (" ..." if len(left) > 20 else ""))


def from_archive(path, device="cuda", dequantize: bool = False, nf4_table: str = "exact", to_f32: bool = False) -> Weights:
    from .. import open as iris_open

    return _from_opened(iris_open(path), device, dequantize, nf4_table, to_f32)


def from_rank(path, rank: int, world_size: int, device="cuda", dequantize: bool = False, nf4_table: str = "exact",
              group=None, exchange: str = "process-group", to_f32: bool = False) -> Weights:
    """Rank `rank` of a folder of tensor-parallel rank archives (`iris shard`): its boxes, by
    the logical tensors' names, with `parallel` (a TensorParallel) saying how each is split."""
    from .._archive import open_rank
    from ._parallel import TensorParallel

    archive = open_rank(path, rank, world_size)
    record = archive.metadata["rank"]
    ep = int(record.get("ep", 1))
    if ep not in (1, world_size):
        archive.close()
        raise IrisError(f"{archive.path}: expert groups of several ranks (tp {world_size}, ep {ep}): iris.models decodes "
                        "ep 1 (experts split over every rank) or ep = tp (each rank its own experts, whole)")
    boxes = {e["name"]: e for e in record["tensors"]}
    parallel = TensorParallel(rank, world_size, boxes, str(archive.path), group, ep, exchange)
    weights = _from_opened(archive, device, dequantize, nf4_table, to_f32)
    weights.parallel = parallel
    return weights


def _from_opened(archive, device, dequantize: bool, nf4_table: str, to_f32: bool = False) -> Weights:
    """to_f32: quantized tensors dequantized to FP32 (every iris format's values are exact
    there), for the exact sums, but MXFP4 expert stacks (kept below); dense ones stay as
    stored. dequantize wins over to_f32: its weights are the BF16 export's (rounded to BF16
    once), which the exact sums then take as dense BF16 tensors -- so an exact-sums decode of
    dequantize=True is the export's model."""
    from ..torch import QuantTensor, load

    if "config.json" not in archive.files:
        raise IrisError(f"{archive.path}: the archive holds no config.json; iris.models needs the model's config")
    config = json.loads(archive.files["config.json"])
    nbytes = {name: sum(c[4] for c in t._components) for name, t in archive.tensors.items()}
    tensors = load(archive, device, nf4_table=nf4_table)
    if dequantize or to_f32:
        dtype = torch.bfloat16 if dequantize else torch.float32

        # The exact sums keep MXFP4 expert stacks (the only 3-D MXFP4 tensors a model has: gpt-oss's;
        # MXFP4 is what Experts.dequantize takes, and use_exact_sums refuses a stack it does not)
        # quantized: each call dequantizes the experts its router picked, where the whole stacks
        # in FP32 would not fit a card (gpt-oss-120b's: 468 GB at 4 bytes a weight).
        def kept(t):
            return to_f32 and not dequantize and isinstance(t, QuantTensor) and len(t.shape) == 3 and t.format == "mxfp4"

        # With to_f32 (the exact sums' 4 bytes a weight) the dense tensors are copied out of the
        # archive's device upload too, so that nothing views it and it is freed once this ends:
        # it would otherwise stay beside the FP32 copies. Not where a stack stays quantized: the
        # upload then lives on under it anyway, and copies would only add to it.
        upload_lives = any(kept(t) for t in tensors.values())
        tensors = {n: t if kept(t) else t.dequantize(dtype) if isinstance(t, QuantTensor)
                   else (t.clone() if to_f32 and not upload_lives else t) for n, t in tensors.items()}
        nbytes = {n: nbytes[n] if isinstance(t, QuantTensor) else t.numel() * t.element_size() for n, t in tensors.items()}
    weights = Weights(tensors, config, nbytes, str(archive.path))
    weights.dequantized = dequantize or to_f32  # the reference: iris.models keeps its lm_head off iris's dense GEMV
    return weights


def from_folder(path, device="cuda") -> Weights:
    """A snapshot folder of safetensors shards and config.json (e.g. `iris export -o DIR/`)."""
    from safetensors.torch import load_file

    path = os.fspath(path)
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except OSError as e:
        raise IrisError(f"{path}: cannot read config.json: {e.strerror}") from None
    tensors = {}
    for name in sorted(os.listdir(path)):
        if name.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(path, name), device=str(torch.device(device))))
    if not tensors:
        raise IrisError(f"{path}: no .safetensors files")
    nbytes = {n: t.numel() * t.element_size() for n, t in tensors.items()}
    return Weights(tensors, config, nbytes, path)

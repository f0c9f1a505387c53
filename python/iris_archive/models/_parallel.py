"""One rank of a tensor-parallel decode. The rank's archive (`iris shard --tp N`, `iris convert
--tp N`) holds its box of every split tensor (FORMAT.md section 11, "Split rules"), and the
decoder runs the boxes with the exchanges those rules imply, over torch.distributed (NCCL, one
process per GPU):

- a projection split by rows (q, k, v, gate, up, expert gate/up) gives this rank's outputs,
  which only this rank's next step reads: nothing to exchange;
- a projection split by columns (o, down, expert down) gives FP32 partial sums over this
  rank's columns; they are summed across the ranks (all_reduce) and only then rounded to BF16
  and given their bias, as one GPU rounds its whole sum. The output differs from one GPU's only
  in the order of its FP32 additions (a dense weight's partial sums come from iris's dense GEMV
  with FP32 outputs, also under dequantize=True, whose whole model runs them on cuBLAS);
- embed_tokens and lm_head are split by the vocabulary: a token's row comes from the rank that
  holds it (the others add zeros, so the sum is that row exactly), and the ranks' logits are
  gathered in rank order;
- with expert parallelism (`--ep` = `--tp`: each rank its own experts, whole) a rank runs only
  the picked experts it holds (the others' ids become -1, for which the expert GEMV reads
  nothing), and the picked experts' output rows are exchanged the same way as the embedding
  row, so every rank combines all of them exactly as one GPU does.

Every exchange is issued on the current stream, so a decode step with them captures into one
CUDA graph.

How the partial sums travel (`exchange`): "process-group" is torch.distributed's all_reduce
(NCCL); "symmetric" copies them into a buffer every rank can read over NVLink (PyTorch's
symmetric memory) and sums the ranks' buffers in rank order 0, 1, ... on every rank (its
one-shot all-reduce): measured on two H200s, 7.4 us an exchange in a CUDA graph against NCCL's
18-26 us (bench/nccl_graph_probe.py), and a fixed order of the ranks' additions at any world
size (NCCL's ring adds them in an order that depends on the element's place in the ring)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._errors import IrisError


class TensorParallel:
    """The rank's place in the world and the boxes its archive holds (name -> the logical
    `shape`, and the box's `start` and `count` per dimension)."""

    def __init__(self, rank: int, world: int, boxes: dict, source: str, group=None, ep: int = 1,
                 exchange: str = "process-group"):
        import torch.distributed as dist

        self.rank, self.world, self.boxes, self.source, self.group = rank, world, boxes, source, group
        self.ep = ep  # expert groups; iris.models takes ep 1 or ep = world (each rank one group, its experts whole)
        self._dist = dist
        if not dist.is_available() or not dist.is_initialized():
            raise IrisError(f"{source}: rank {rank} of {world}: a tensor-parallel decode needs torch.distributed "
                            "initialised first (init_process_group, one process per GPU)")
        have_rank, have_world = dist.get_rank(group), dist.get_world_size(group)
        if (have_rank, have_world) != (rank, world):
            raise IrisError(f"{source}: the archive is rank {rank} of {world}, but this process is rank {have_rank} "
                            f"of a process group of {have_world}")
        if exchange not in ("process-group", "symmetric"):
            raise IrisError(f"{source}: exchange={exchange!r}: give 'process-group' or 'symmetric'")
        self.exchange = exchange
        self._symmetric = None  # (buffer, group name), made by open_exchange once the device is known

    def open_exchange(self, device, elements: int) -> None:
        """With exchange="symmetric": this rank's buffer of `elements` FP32 values that every
        rank can read (a collective: every rank calls it, in the same order, before any step
        is captured). A partial sum larger than the buffer goes through the process group."""
        if self.exchange != "symmetric" or self._symmetric is not None:
            return
        if self._dist.get_backend(self.group) != "nccl":
            raise IrisError(f"{self.source}: exchange='symmetric' needs the NCCL backend (GPUs that read each other's memory); "
                            f"this process group is {self._dist.get_backend(self.group)}")
        try:
            import torch.distributed._symmetric_memory as symm_mem
        except ImportError as e:
            raise IrisError(f"{self.source}: exchange='symmetric' needs torch.distributed._symmetric_memory ({e})") from e
        name = (self.group or self._dist.group.WORLD).group_name
        buffer = symm_mem.empty(elements, dtype=torch.float32, device=device)
        symm_mem.rendezvous(buffer, name)
        self._symmetric = (buffer, name)

    def _box(self, name: str) -> dict:
        box = self.boxes.get(name)
        if box is None:
            raise IrisError(f"{self.source}: tensor '{name}': the rank record has no box for it")
        return box

    def rows(self, name: str) -> int:
        """How many rows (the first dimension) of `name` this rank holds."""
        return int(self._box(name)["count"][0])

    def split(self, name: str, dim: int) -> bool:
        """Whether this rank holds only part of `name` along `dim` (-1: the columns)."""
        box = self._box(name)
        return int(box["count"][dim]) != int(box["shape"][dim])

    def first_row(self, name: str) -> int:
        return int(self._box(name)["start"][0])

    def reduce(self, partial: torch.Tensor) -> torch.Tensor:
        """The ranks' partial sums, summed (in place, or a new tensor): FP32 sums, or the exact
        mode's int64 limbs (through the process group: integer sums are exact in any order)."""
        if (self._symmetric is not None and partial.dtype == torch.float32
                and partial.numel() <= self._symmetric[0].numel()):
            return symmetric_all_reduce(partial, self._symmetric[0], self._symmetric[1])
        self._dist.all_reduce(partial, group=self.group)
        return partial

    def gather_rows(self, name: str, local: torch.Tensor) -> torch.Tensor:
        """[1, n] outputs of this rank's rows of `name` (split by rows into equal parts in rank
        order, as the vocabulary is) -> [1, n * world], the whole tensor's outputs in order."""
        box = self._box(name)
        if int(box["start"][0]) != self.rank * int(box["count"][0]) or int(box["count"][0]) * self.world != int(box["shape"][0]):
            raise IrisError(f"{self.source}: tensor '{name}': rows {box['start'][0]}.. ({box['count'][0]} of {box['shape'][0]}) "
                            f"are not rank {self.rank}'s equal part: its outputs cannot be gathered in rank order")
        local = local.contiguous()
        if self._dist.get_backend(self.group) == "gloo":  # no all_gather_into_tensor there (a CPU / one-GPU check)
            parts = [torch.empty_like(local) for _ in range(self.world)]
            self._dist.all_gather(parts, local, group=self.group)
            return torch.cat(parts, dim=-1)
        out = torch.empty(self.world * local.numel(), dtype=local.dtype, device=local.device)
        self._dist.all_gather_into_tensor(out, local.view(-1), group=self.group)
        # [world, R, n] in rank order -> [R, world * n] (a view where R is 1, as at decode)
        return out.view(self.world, *local.shape).transpose(0, 1).reshape(local.shape[0], -1)

    def embed(self, token: torch.Tensor, local_embed: torch.Tensor, name: str) -> torch.Tensor:
        """The embedding row [1, hidden] of `token` when each rank holds a slice of the
        vocabulary: the holder's row, the others' zeros, summed."""
        start, rows = self.first_row(name), int(local_embed.shape[0])
        t = token - start
        inside = (t >= 0) & (t < rows)
        return self.share_rows(F.embedding(t.clamp(0, rows - 1), local_embed), inside)

    def share_rows(self, rows: torch.Tensor, held: torch.Tensor) -> torch.Tensor:
        """[R, n] rows each computed on the one rank that holds its source (`held` there; the
        others' rows are NaN, stale or another row): the embedding's row, the picked experts'
        outputs under expert parallelism. Afterwards every rank has all of them: the holder's
        row, the others' zeros, summed in FP32 (exact: one row and zeros; and gloo's reductions,
        the one-GPU check, take no BF16)."""
        shared = torch.where(held.view(-1, 1), rows, torch.zeros_like(rows)).float()
        return self.reduce(shared).to(rows.dtype)


def local_experts(ids: torch.Tensor, first: int, count: int):
    """The router's expert ids as this rank's: (ids of its set, -1 for another group's expert:
    the expert GEMV reads nothing for those and gives NaN rows; the same clamped into range, for
    lookups such as bias rows; whether this rank holds each)."""
    local = ids.to(torch.int32) - first
    held = (local >= 0) & (local < count)
    return torch.where(held, local, torch.full_like(local, -1)), local.clamp(0, count - 1).long(), held



# An operator of its own, so that the copy into the buffer and the exchange are one step that
# torch.compile cannot take apart (staging the copy into a fresh tensor that no other rank can
# read). It declares that it writes `buffer`, as it does, so that a compiler may neither drop it
# nor merge two calls. The decoder calls it between its compiled pieces, eagerly or under
# graph capture.
@torch.library.custom_op("iris::symmetric_all_reduce", mutates_args=("buffer",))
def symmetric_all_reduce(partial: torch.Tensor, buffer: torch.Tensor, group_name: str) -> torch.Tensor:
    """`partial` (FP32, at most buffer.numel() values) summed over the ranks of `group_name`,
    through `buffer` (a rendezvoused symmetric-memory tensor): every rank adds the ranks'
    values in rank order."""
    staged = buffer[: partial.numel()]
    staged.copy_(partial.reshape(-1))
    return torch.ops.symm_mem.one_shot_all_reduce(staged, "sum", group_name).view(partial.shape)


@symmetric_all_reduce.register_fake
def _(partial, buffer, group_name):
    return torch.empty(partial.shape, dtype=partial.dtype, device=partial.device)  # contiguous, as the op's

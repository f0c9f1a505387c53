"""The decode driver every family shares: static input and output buffers on the device, one
step = forward + greedy pick + position advance, all on the GPU, capturable as one CUDA graph
that is replayed for every token (prompt tokens included)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._errors import IrisError
from . import _weights
from . import _layers
from ._layers import KVCache, rope_and_write_kv, rope_tables


def _two_stage_argmax(logits: torch.Tensor, chunk: int = 512) -> torch.Tensor:
    """argmax over the last dim of [1, V] logits: the first maximum of each chunk of 512 (in
    parallel), then the first chunk holding the largest of them."""
    v = logits.shape[-1]
    pad = (-v) % chunk
    x = F.pad(logits.float(), (0, pad), value=float("-inf")).view(-1, chunk)
    idx = x.argmax(dim=-1)
    best = x.gather(1, idx.unsqueeze(1)).squeeze(1).argmax().view(1)
    return best * chunk + idx.gather(0, best)  # (idx[best] would read `best` on the host)


class Decoder:
    """A family's forward(token, pos) -> logits [1, vocab] plus the driver. Subclasses build
    their layers in __init__, registering each projection with reads()."""

    family = ""

    def __init__(self, weights: _weights.Weights, max_len: int, device, compile: bool = False, fused: bool | None = None,
                 programmatic: bool | None = None, residual_norm: bool | None = None, rope_in_attention: bool | None = None,
                 activation_in_gemv: bool = False, iris_head: bool | None = None, gated_kernel: bool | None = None):
        self.weights, self.config, self.max_len = weights, weights.config, int(max_len)
        self.compiled = bool(compile)
        # programmatic (by default with compile=True): Inductor's kernels are launched as
        # programmatic dependents (its triton.enable_pdl, where this torch has it), as iris's
        # kernels are on sm_90 code: each kernel's launch and first loads overlap the end of the
        # one before. A kernel without it between two that have it is a barrier, so both sides
        # matter (kernels/NOTES.md, run v46). Scheduling only: the results do not change.
        self.programmatic = self.compiled if programmatic is None else bool(programmatic)
        # fused (by default with compile=True): attention and the MoE routers run as iris's own
        # kernels (torch.ops.iris.attention_decode / moe_route: one launch each, FP32 inside)
        # instead of transformers' steps, which the other mode keeps with their arithmetic.
        self.fused = self.compiled if fused is None else bool(fused)
        # residual_norm (by default with fused): each residual step and the RMSNorm after it --
        # and, for an MoE layer, the weighted sum of its experts' outputs before them -- as one
        # iris launch (torch.ops.iris.residual_norm) instead of Inductor's one-block reduction
        # kernel (kernels/NOTES.md, run v48). Its arithmetic rounds where transformers' BF16
        # steps round; only for BF16 models (norm weights and residual stream).
        self.residual_norm = self.fused if residual_norm is None else bool(residual_norm)
        # rope_in_attention (default: fused): the rotary positions and the KV-cache write run
        # inside the attention kernel (torch.ops.iris.attention_decode_rope) instead of as two
        # Inductor kernels before it: two launches a layer fewer (kernels/NOTES.md, run v49).
        self.rope_in_attention = self.fused and (True if rope_in_attention is None else bool(rope_in_attention))
        # activation_in_gemv (off unless asked for, and only with fused): gpt-oss's expert
        # activation (bias, clamped SwiGLU) inside the gate_up expert GEMV's launch
        # (torch.ops.iris.gemv_experts_swiglu) instead of an Inductor kernel after it: one launch
        # a layer fewer, which measured no faster in a CUDA graph (kernels/NOTES.md, run v56:
        # the small kernel costs what the activation adds to every block of the GEMV). Its
        # arithmetic rounds where transformers' BF16 steps round. Other families have no such
        # activation: there it changes nothing.
        self.activation_in_gemv = self.fused and bool(activation_in_gemv)
        # gated_kernel (default: fused): a gated MLP's SiLU activation (Llama, Mistral, Qwen2,
        # Mixtral's experts) by iris instead of Inductor's kernel (kernels/NOTES.md, run v66):
        # inside the gate/up launch where the two are quantized and grouped
        # (torch.ops.iris.gemv_experts_gated: one launch a layer fewer), else as iris's own
        # programmatic launch (torch.ops.iris.gated_silu). transformers' two BF16 roundings; for
        # BF16 activations and SiLU only, the family decides where it applies.
        self.gated_kernel = self.fused and (True if gated_kernel is None else bool(gated_kernel))
        # iris_head (default: fused, except for a dequantized model, the BF16 reference that
        # load() promises runs on cuBLAS): a dense BF16 lm_head gives its FP32 logits through
        # iris's dense GEMV (torch.ops.iris.gemv_bf16_f32) instead of cuBLAS (logits_f32): the
        # same FP32 sums in another order, 9% faster on gpt-oss's head (kernels/NOTES.md, v61).
        dequantized = bool(getattr(weights, "dequantized", False))
        self.iris_head = (self.fused and not dequantized) if iris_head is None else bool(iris_head)
        self.knock_out = frozenset()  # measurement aid of the families that have one (LlamaDecoder.set_knock_out)
        # tp: this process's rank of a tensor-parallel decode (models/_parallel.py), or None
        self.tp = getattr(weights, "parallel", None)
        self.device = torch.device(device)
        if self.tp is not None:  # the exchanges' buffer: a row of the hidden state for each of 64 rows at most
            self.tp.open_exchange(self.device, 64 * int(weights.config["hidden_size"]))
        # use_exact_sums() sets it: a device scalar, set where a product left the exact sums' range
        self.exact_out_of_range = None
        self.route_workspace = torch.zeros(1, dtype=torch.int32, device=self.device)  # moe_route's counter, left zero
        self.token = torch.zeros(1, dtype=torch.long, device=self.device)
        self.pos = torch.zeros(1, dtype=torch.long, device=self.device)
        self.generated = torch.zeros(self.max_len, dtype=torch.long, device=self.device)
        self.positions = torch.arange(self.max_len, device=self.device)
        self.logits = None
        self._graph, self._host_pos = None, 0
        self._reads = []  # (Linear or ExpertStack, matrices read per token)
        # The greedy pick in two stages (the first occurrence of the maximum, as argmax):
        # one argmax over Llama-3's 128K logits took 30-31 us a step on an H100, compiled (step
        # timelines in docs/device-runs/2026-11-26-decode-llama-4formats.json); these two stages
        # 2.0 + 1.8 us (...-decode-final.json).
        self._pick = self.fn(_two_stage_argmax)

    def _head(self, head):
        """The lm_head, on iris's dense GEMV where iris_head says so and it is a dense BF16
        matrix without a bias (use_iris_dense_logits); returns it."""
        if self.iris_head:
            _layers.use_iris_dense_logits(head)
        return head

    def use_exact_sums(self) -> None:
        """Every projection registered with reads() in the order-free arithmetic
        (_layers.use_exact_sums); their weights must be dense. Read exact_out_of_range after a
        decode: set, it says a product left the limbs' range (equal on every rank, but wrong)."""
        self.exact_out_of_range = torch.zeros((), dtype=torch.bool, device=self.device)
        for part, _ in self._reads:
            _layers.use_exact_sums(part, self.exact_out_of_range)

    def reads(self, part, times: int = 1):
        """Registers a projection the step reads `times` matrices of (top-k for an expert
        stack); returns it."""
        self._reads.append((part, times))
        return part

    @property
    def bytes_per_token(self) -> int:
        """Weight bytes one step reads (embedding row, norms and the KV cache left out)."""
        return sum(part.read_bytes(times) for part, times in self._reads)

    @property
    def bytes_by_kernel(self) -> dict:
        """bytes_per_token split by who reads them: iris's kernels (quantized weights, and dense
        ones on iris's dense GEMV) or cuBLAS (the other dense ones)."""
        out = {"iris": 0, "cublas": 0}
        for part, times in self._reads:
            on_iris = part.quantized or getattr(part, "iris_dense", False) or getattr(part, "iris_logits", False)
            out["iris" if on_iris else "cublas"] += part.read_bytes(times)
        return out

    def forward(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    # -- what every family's attention shares

    def _read_attention_config(self, default_eps: float) -> None:
        c = self.config
        self.hidden = int(c["hidden_size"])
        self.heads = int(c["num_attention_heads"])
        self.kv_heads = int(c.get("num_key_value_heads") or self.heads)
        self.head_dim = int(c.get("head_dim") or self.hidden // self.heads)
        self.eps = float(c.get("rms_norm_eps", default_eps))
        if self.tp is not None:  # this rank's heads: its rows of q_proj and k_proj
            self.heads = self.tp.rows("model.layers.0.self_attn.q_proj.weight") // self.head_dim
            self.kv_heads = self.tp.rows("model.layers.0.self_attn.k_proj.weight") // self.head_dim

    # -- what a tensor-parallel rank exchanges (models/_parallel.py); with tp None, the plain steps

    def _columns_split(self, name: str) -> bool:
        return self.tp is not None and self.tp.split(name, -1)

    def _project(self, part, x: torch.Tensor) -> torch.Tensor:
        """part(x); where this rank holds only some of the weight's columns, the ranks' FP32
        sums added up first, then rounded and given the bias as part(x) would be."""
        if not self._columns_split(part.name):
            return part(x)
        return part.finish_f32(self.tp.reduce(part.partial_f32(x)))

    def _project_experts(self, stack, x: torch.Tensor, ids: torch.Tensor, rows) -> torch.Tensor:
        """stack(x, ids, rows), the same way across ranks that hold some of its columns."""
        if self.tp is None or not stack.columns_split:
            return stack(x, ids, rows)
        return stack.finish_f32(self.tp.reduce(stack.partial_f32(x, ids, rows)))

    def _embed(self, token: torch.Tensor, weight: torch.Tensor):
        """(the embedding row x, its norm h) for the first layer: f_embed_norm, or with the
        vocabulary split across ranks, the holder's row and then f_norm."""
        name = "model.embed_tokens.weight"
        if self.tp is None or not self.tp.split(name, 0):
            return self.f_embed_norm(token, self.embed, weight)
        x = self.tp.embed(token, self.embed, name)
        return x, self.f_norm(x, weight)

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        """lm_head's FP32 logits [1, vocab]; with the vocabulary split, the ranks' gathered."""
        logits = self.lm_head.logits(h)
        name = self.lm_head.name
        if self.tp is None or not self.tp.split(name, 0):
            return logits
        return self.tp.gather_rows(name, logits)

    def _make_rope_and_cache(self, layers: int, dtype) -> None:
        self.cos, self.sin = rope_tables(self.config, self.head_dim, self.max_len, dtype, self.device)
        self.cache = KVCache(layers, self.kv_heads, self.max_len, self.head_dim, dtype, self.device)
        self.f_rope_cache = self.fn(rope_and_write_kv)

    def _qkv(self, layer, h: torch.Tensor, i: int, pos: torch.Tensor) -> torch.Tensor:
        """Layer i's q, k, v of h; k and v rotated and written into the cache at pos; returns
        the rotated q [heads, head_dim]."""
        q, k, v = layer.qkv(h)
        return self.f_rope_cache(q.reshape(self.heads, self.head_dim), k.reshape(self.kv_heads, self.head_dim),
                                 v.reshape(self.kv_heads, self.head_dim), self.cos, self.sin, self.cache.kv[i], pos)

    def _attention(self, layer, h: torch.Tensor, i: int, pos: torch.Tensor, window, sinks=None):
        """Layer i's attention of h in the fused mode ([1, heads * head_dim]), or None: then the
        family runs its own steps on self._qkv's rotated q. With rope_in_attention (BF16 tables,
        the whole head rotated) q, k, v go to the attention kernel as the projections give them."""
        if not self.fused:
            return None
        if not (self.rope_in_attention and self.cos.dtype == torch.bfloat16 and self.cos.shape[-1] == self.head_dim
                and self.head_dim % 2 == 0):
            return self._attention_fused(self._qkv(layer, h, i, pos), i, pos, window, sinks)
        q, k, v = layer.qkv(h)
        return torch.ops.iris.attention_decode_rope(q.reshape(self.heads, self.head_dim), k.reshape(self.kv_heads, self.head_dim),
                                                    v.reshape(self.kv_heads, self.head_dim), self.cos, self.sin, self.cache.k[i],
                                                    self.cache.v[i], pos, sinks, int(window or 0), self.head_dim ** -0.5)

    def _attention_fused(self, q: torch.Tensor, i: int, pos: torch.Tensor, window, sinks=None) -> torch.Tensor:
        """Layer i's attention of the rotated q [heads, head_dim] over the cache in one launch:
        positions pos - window < p <= pos (window None or 0: all p <= pos); [1, heads * head_dim]."""
        return torch.ops.iris.attention_decode(q, self.cache.k[i], self.cache.v[i], pos, sinks, int(window or 0), self.head_dim ** -0.5)

    def _routes_fused(self, router) -> bool:
        """Whether a router runs as torch.ops.iris.moe_route: in the fast mode, for a dense BF16 weight."""
        return self.fused and not router.quantized and router.w.dtype == torch.bfloat16

    def _route_fused(self, router, h: torch.Tensor, top_k: int):
        """(weights [1, top_k] BF16, expert ids [top_k] int32): the router's GEMV, top-k and the
        softmax over the picked logits in one launch."""
        weights, ids, _ = torch.ops.iris.moe_route(h, router.w, router.b, top_k, self.route_workspace)
        return weights, ids.view(-1)

    def _use_residual_norm(self, *tensors) -> bool:
        """Whether the residual steps run as torch.ops.iris.residual_norm: asked for, and every
        tensor it would take (the norm weights, the embedding, biases) BF16. Called once the
        layers are built."""
        return self.residual_norm and all(t is None or t.dtype == torch.bfloat16 for t in tensors)

    def _step(self) -> None:
        logits = self.forward(self.token, self.pos)
        nxt = self._pick(logits)
        self.generated.index_copy_(0, self.pos, nxt)
        self.token.copy_(nxt)
        self.pos.add_(1)
        self.logits = logits

    def reset(self) -> None:
        self.pos.zero_()
        self._host_pos = 0

    @torch.no_grad()
    def capture(self) -> None:
        """Records one step as a CUDA graph (after two warm-up steps on a side stream, which
        also load every kernel); step(graph=True) replays it."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.reset()
            for _ in range(2):
                self._step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.reset()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._step()
        self._graph = graph
        self.reset()

    @torch.no_grad()
    def step(self, graph: bool = True) -> None:
        """Feeds self.token at the current position; afterwards self.token holds the greedy pick."""
        if self._host_pos >= self.max_len:
            raise IrisError(f"iris.models: position {self._host_pos} is past max_len {self.max_len}")
        if graph:
            if self._graph is None:
                self.capture()
            self._graph.replay()
        else:
            self._step()
        self._host_pos += 1

    def fn(self, f):
        """f as this decoder runs it: through torch.compile (Inductor fuses its elementwise work
        into a few kernels; the iris GEMVs stay outside, as custom ops) when compile=True."""
        if not self.compiled:
            return f
        options = {"triton.enable_pdl": True} if self.programmatic and _inductor_has_pdl() else None
        return torch.compile(f, fullgraph=True, dynamic=False, options=options)

    @torch.no_grad()
    def score(self, prompt, continuation, graph: bool = True) -> torch.Tensor:
        """Teacher forcing: the logits [len(continuation), vocab] (FP32) this model gives for
        each continuation token, fed the prompt and then the continuation itself."""
        prompt, continuation = [int(t) for t in prompt], [int(t) for t in continuation]
        if len(prompt) + len(continuation) - 1 > self.max_len:
            raise IrisError(f"iris.models: {len(prompt) + len(continuation)} tokens do not fit max_len {self.max_len}")
        if graph and self._graph is None:
            self.capture()
        self.reset()
        feed = torch.tensor(prompt + continuation[:-1], dtype=torch.long, device=self.device)
        out = torch.empty(len(continuation), int(self.config["vocab_size"]), dtype=torch.float32, device=self.device)
        for i in range(feed.numel()):
            self.token.copy_(feed[i:i + 1])
            self.step(graph)
            if i >= len(prompt) - 1:
                out[i - len(prompt) + 1].copy_(self.logits[0])
        return out

    @torch.no_grad()
    def generate(self, prompt, steps: int, graph: bool = True) -> list:
        """Greedy decoding: the prompt fed one token a step, then `steps` picked tokens."""
        prompt = [int(t) for t in prompt]
        if not prompt or steps < 1 or len(prompt) + steps - 1 > self.max_len:
            raise IrisError(f"iris.models: a prompt of {len(prompt)} tokens and {steps} steps do not fit max_len {self.max_len}")
        vocab = int(self.config["vocab_size"])
        if any(t < 0 or t >= vocab for t in prompt):
            raise IrisError(f"iris.models: prompt token out of the vocabulary (size {vocab})")
        if graph and self._graph is None:
            self.capture()
        self.reset()
        prompt_dev = torch.tensor(prompt, dtype=torch.long, device=self.device)
        for i in range(len(prompt)):
            self.token.copy_(prompt_dev[i:i + 1])
            self.step(graph)
        for _ in range(steps - 1):
            self.step(graph)
        n = len(prompt)
        return self.generated[n - 1:n - 1 + steps].tolist()


def _inductor_has_pdl() -> bool:
    try:
        import torch._inductor.config as inductor_config
    except ImportError:
        return False
    return hasattr(inductor_config.triton, "enable_pdl")


def load(path, device="cuda", max_len: int = 256, dequantize: bool = False, compile: bool = False,
         fused: bool | None = None, programmatic: bool | None = None, residual_norm: bool | None = None,
         rope_in_attention: bool | None = None, nf4_table: str = "exact", activation_in_gemv: bool = False,
         iris_head: bool | None = None, gated_kernel: bool | None = None, rank: int | None = None,
         world_size: int | None = None, group=None, exchange: str = "process-group", exact_sums: bool = False) -> Decoder:
    """The decoder for an archive (or, for a directory, a safetensors snapshot folder) by its
    config's model_type. dequantize=True: quantized weights become BF16 once (the model that
    `iris export --dtype bf16` writes), run by cuBLAS: the reference and the BF16 peer.
    compile=True: the work between the GEMVs (norms, rotary, activations, residuals) goes
    through torch.compile, a few fused kernels a layer instead of dozens, and attention and the
    MoE routers run as one iris kernel each (fused, which defaults to compile; fused=False
    keeps transformers' steps for them); the arithmetic then rounds less often than
    transformers' does, so its tokens may part from transformers' where the top two logits
    nearly tie. programmatic (default: compile) launches Inductor's kernels as programmatic
    dependents, as iris's are (Decoder.__init__ says why). residual_norm (default: fused) runs
    each residual step with the next RMSNorm (and an MoE layer's weighted sum) as one iris
    kernel. rope_in_attention (default: fused) moves the rotary positions and the KV-cache write
    into the attention kernel. activation_in_gemv=True (with fused) runs gpt-oss's expert
    activation inside the gate_up expert GEMV's launch (measured no faster: off by default).
    iris_head (default: fused) computes a dense BF16 lm_head's FP32 logits with iris's dense
    GEMV instead of cuBLAS. gated_kernel (default: fused) runs a gated MLP's SiLU activation
    (Llama, Mistral, Qwen2, Mixtral) by iris instead of Inductor: inside the gate/up GEMV's
    launch where that is one grouped quantized launch, else as one iris kernel.
    nf4_table="bf16": NF4's GEMVs with the declared BF16 table (iris.torch.load says what it
    changes); refused where there are no NF4 GEMVs for it to
    change (a snapshot folder, or dequantize=True), rather than ignored.
    rank, world_size (and group, default: torch.distributed's world): `path` is a folder of
    tensor-parallel rank archives (`iris shard --tp N`, or `--tp N --ep N`: each rank its
    experts whole) and this process decodes rank `rank` of them on `device`, with torch.distributed (NCCL) already initialised, one process per rank;
    every rank is fed the same tokens and picks the same ones (models/_parallel.py says what
    the ranks exchange). exchange="symmetric" sums the ranks' partial sums through NVLink
    buffers every rank reads (PyTorch's symmetric memory, one-shot, in rank order) instead of
    the process group's all_reduce: about a third of NCCL's latency a call on two H200s.
    exact_sums=True: every projection's dot products (but a replicated router's, which every
    rank computes whole from the same input) in an order-free arithmetic
    (iris_archive._exact_sum: each product exact in FP64, cut to int64 limbs, summed as
    integers, rounded once), so that a tensor-parallel rank's outputs are one GPU's bit for bit
    however the rows or columns are split. The weights are dequantized to FP32 once (4 bytes a
    weight), but for MXFP4 expert stacks, which stay quantized while each call dequantizes the
    experts its router picked (Experts.dequantize); some 72 bytes of temporaries are made for
    each weight read, where the fast GEMV reads about half a byte of MXFP4: a mode for
    checking (not yet timed). Attention must then take each head alone, as iris's attention
    kernel does (compile=True): transformers' steps batch the heads into one matmul, whose
    arithmetic may depend on how many heads a rank holds. The decoder's exact_out_of_range (a
    device scalar) is set where a product left the limbs' range (2^37): such a decode is equal
    on every rank but wrong."""
    import os

    if (rank is None) != (world_size is None):
        raise IrisError("iris.models.load: give rank and world_size together")
    if exchange != "process-group" and rank is None:
        raise IrisError(f"iris.models.load: exchange={exchange!r} is how tensor-parallel ranks exchange; give rank and world_size")
    if nf4_table != "exact" and (dequantize or exact_sums or (rank is None and os.path.isdir(path))):
        why = ("dequantize=True runs BF16 weights" if dequantize else "exact_sums=True runs dequantized FP32 weights" if exact_sums
               else "a snapshot folder holds no iris NF4 tensors")
        raise IrisError(f"{path}: nf4_table={nf4_table!r} has nothing to act on: {why}")
    if rank is not None:
        weights = _weights.from_rank(path, rank, world_size, device, dequantize=dequantize, nf4_table=nf4_table, group=group,
                                     exchange=exchange, to_f32=exact_sums)
    elif os.path.isdir(path):
        weights = _weights.from_folder(path, device)
    else:
        weights = _weights.from_archive(path, device, dequantize=dequantize, nf4_table=nf4_table, to_f32=exact_sums)
    d = decoder_for(weights, max_len, device, compile, fused, programmatic, residual_norm, rope_in_attention, activation_in_gemv,
                    iris_head, gated_kernel)
    if exact_sums:
        d.use_exact_sums()
    return d


def decoder_for(weights: _weights.Weights, max_len: int, device="cuda", compile: bool = False, fused: bool | None = None,
                programmatic: bool | None = None, residual_norm: bool | None = None, rope_in_attention: bool | None = None,
                activation_in_gemv: bool = False, iris_head: bool | None = None, gated_kernel: bool | None = None) -> Decoder:
    from ._gpt_oss import GptOssDecoder
    from ._llama import LlamaDecoder

    kind = weights.config.get("model_type")
    families = {"llama": LlamaDecoder, "mistral": LlamaDecoder, "qwen2": LlamaDecoder, "mixtral": LlamaDecoder,
                "gpt_oss": GptOssDecoder}
    if kind not in families:
        raise IrisError(f"{weights.source}: model_type '{kind}' has no iris.models decoder "
                        f"(supported: {', '.join(sorted(families))})")
    decoder = families[kind](weights, max_len, device, compile, fused, programmatic, residual_norm, rope_in_attention,
                             activation_in_gemv, iris_head, gated_kernel)
    weights.check_all_taken()
    return decoder

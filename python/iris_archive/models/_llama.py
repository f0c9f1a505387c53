"""Llama, Mistral, Qwen2 and Mixtral: pre-norm decoder layers of grouped-query attention with
rotary positions, and a gated MLP (dense, or Mixtral's top-k experts). The arithmetic follows
transformers' modeling_llama / modeling_mixtral in BF16 with FP32 norms, so greedy tokens
match transformers' on the same weights."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._errors import IrisError
from ._decoder import Decoder
from ..torch import Experts
from ._layers import ExpertStack, GroupedLinear, Linear, exact_f32, logits_f32, norm_steps, use_iris_dense_gemv
from ._parallel import local_experts

_ACTIVATIONS = {
    "silu": F.silu,
    "swish": F.silu,
    "gelu": F.gelu,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


def activation(config: dict):
    name = config.get("hidden_act", "silu")
    if name not in _ACTIVATIONS:
        raise IrisError(f"config.json: hidden_act '{name}' is not supported by iris.models")
    return _ACTIVATIONS[name]


class _DenseMlp:
    def __init__(self, d, w, prefix: str):
        self.gate_up = d.reads(GroupedLinear(w, [f"{prefix}.gate_proj", f"{prefix}.up_proj"], d.device, d.compiled))
        self.down = d.reads(Linear(w, f"{prefix}.down_proj"))

    def __call__(self, d, h):
        if d.gated_in_gemv and self.gate_up.takes_gated and "activation" not in d.knock_out:
            return d._project(self.down, self.gate_up.gated(h))  # the activation inside the gate/up launch
        gate, up = self.gate_up(h)
        if "activation" in d.knock_out:  # measurement aid (LlamaDecoder.set_knock_out)
            return d._project(self.down, gate)
        return d._project(self.down, d.f_gated(gate, up))


class _MixtralMoe:
    """transformers' MixtralSparseMoeBlock at one token: softmax over the router's logits in
    FP32, top-k, renormalised, cast to BF16; each expert's w2(act(w1 x) * w3 x) weighted and
    summed (as IrisMixtralExperts does)."""

    def __init__(self, d, w, prefix: str, config: dict):
        e = int(config["num_local_experts"])
        self.top_k = int(config["num_experts_per_tok"])
        self.router = d.reads(Linear(w, f"{prefix}.gate", bias=False))
        # expert parallelism (ep = tp): this rank's experts [first, first + held), whole; the
        # router still scores all e
        experts = range(e)
        self.first, self.held = 0, None
        if d.tp is not None and d.tp.ep > 1:
            experts = [i for i in range(e) if w.has(f"{prefix}.experts.{i}.w1.weight")]
            if not experts or experts != list(range(experts[0], experts[0] + len(experts))):
                raise IrisError(f"{w.source}: {prefix}: this rank's experts {experts} are not one run of the {e}")
            self.first, self.held = experts[0], len(experts)
        stacks, tensors = {}, {}
        for p in ("w1", "w2", "w3"):
            names = [f"{prefix}.experts.{i}.{p}.weight" for i in experts]
            tensors[p] = [w.take(n) for n in names]
            stacks[p] = d.reads(ExpertStack(tensors[p], sum(w.nbytes(n) for n in names)), self.top_k)
            for n in names:
                w.release(n)  # the stack holds them (a dense stack is a copy)
        self.w1, self.w2, self.w3 = stacks["w1"], stacks["w2"], stacks["w3"]
        self.w2.columns_split = d._columns_split(f"{prefix}.experts.{experts[0]}.w2.weight")
        self.rows = torch.zeros(self.top_k, dtype=torch.int32, device=d.device)
        # w1 and w3 of every expert as one more set over the same device tensors, interleaved
        # (expert e's w1 at 2e, its w3 at 2e + 1), where libiris takes the activation into that
        # launch (Experts.gated_in_launch): one grouped launch computes both projections of the
        # picked experts and act(w1 x) * w3 x, two launches a layer fewer than w1's, w3's and the
        # activation's. The same bits: each row is that expert's own GEMV, and the activation
        # iris's gated_silu.
        self.gate_up = None
        if self.w1.quantized and self.w3.quantized:
            try:
                pairs = Experts([t for pair in zip(tensors["w1"], tensors["w3"]) for t in pair])
            except IrisError:
                pairs = None  # w1 and w3 of other formats or shapes: separate launches
            if pairs is not None and pairs.gated_in_launch:
                self.gate_up = pairs
                self.pair_offsets = torch.tensor([[0, 1]], dtype=torch.int32, device=d.device)
                self.pair_rows = torch.zeros(2 * self.top_k, dtype=torch.int32, device=d.device)
                need = int(pairs._lib.iris_cuda_experts_gated_exchange(pairs._handle, 2 * self.top_k))
                self.exchange = torch.zeros(need, dtype=torch.int32, device=d.device)

    def terms(self, d, h):
        """The picked experts' outputs [top_k, hidden] and their routing weights [1, top_k]."""
        if d._routes_fused(self.router):
            top, ids = d._route_fused(self.router, h, self.top_k)
        else:
            top, ids = d.f_route(self.router(h), self.top_k)
        held, for_stack = None, lambda stack: ids  # noqa: E731
        if self.held is not None:  # this rank's experts only; the others' pairs read nothing
            ids, clamped, held = d.f_local_experts(ids, self.first, self.held)
            # a quantized stack takes -1 (no reads, NaN rows); a dense one, or the exact mode's,
            # gathers by index, so it takes the clamped ids (another expert's rows); both are
            # masked in the exchange
            for_stack = lambda stack: ids if stack.reads_nothing_for_negative_ids else clamped  # noqa: E731
        if self.gate_up is not None and d.gated_in_gemv:
            # pairs 2j and 2j + 1: w1 and w3 of the j-th picked expert (both quantized)
            pair_ids = d.f_pair_ids(ids, self.pair_offsets)
            x = torch.ops.iris.gemv_experts_gated(h, pair_ids, self.pair_rows, self.gate_up._handle, self.w1.n, self.exchange)
        else:
            x = d.f_gated(self.w1(h, for_stack(self.w1), self.rows), self.w3(h, for_stack(self.w3), self.rows))
        out = d._project_experts(self.w2, x, for_stack(self.w2), None)
        return (out if held is None else d.tp.share_rows(out, held)), top

    def __call__(self, d, h):
        return d.f_weighted_sum(*self.terms(d, h))


def _route_softmax_topk(logits, top_k: int):
    probs = F.softmax(logits, dim=-1, dtype=torch.float32)
    top, idx = torch.topk(probs, top_k, dim=-1)
    top = (top / top.sum(dim=-1, keepdim=True)).to(logits.dtype)
    return top, idx.reshape(-1).to(torch.int32)


def _gated_pair_ids(ids, offsets):
    """Expert e's w1 and w3 in the interleaved set: 2e and 2e + 1, for each picked expert."""
    return (ids.view(-1, 1) * 2 + offsets).view(-1)


def _weighted_sum(out, weights):
    return (out * weights.reshape(-1, 1)).sum(dim=0, keepdim=True).to(out.dtype)


class _TiedHead:
    """lm_head sharing the embedding matrix (tie_word_embeddings)."""

    quantized = False
    b = None
    name = "model.embed_tokens.weight"

    def __init__(self, embed, nbytes: int):
        self.embed, self.nbytes = embed, nbytes
        self.iris_logits = False  # use_iris_dense_logits() sets it
        self.exact_range = None  # use_exact_sums() sets it

    @property
    def w(self):
        return self.embed

    def read_bytes(self, times: int = 1) -> int:
        return self.nbytes * times

    def logits(self, h):
        if self.exact_range is not None:
            return exact_f32(self.embed, h, self.exact_range)
        if self.iris_logits:
            return torch.ops.iris.gemv_bf16_f32(h, self.embed, None)
        return logits_f32(h, self.embed)


class _Layer:
    def __init__(self, d, w, i: int, config: dict):
        p = f"model.layers.{i}"
        self.ln1, self.ln2 = w.take(f"{p}.input_layernorm.weight"), w.take(f"{p}.post_attention_layernorm.weight")
        self.qkv = d.reads(GroupedLinear(w, [f"{p}.self_attn.{n}_proj" for n in "qkv"], d.device, d.compiled))
        self.o = d.reads(Linear(w, f"{p}.self_attn.o_proj"))
        if d.fused:  # those with a bias (Qwen2's q/k/v): the bias in the GEMV's launch
            use_iris_dense_gemv(self.qkv)
            use_iris_dense_gemv(self.o)
        if config.get("model_type") == "mixtral":
            self.mlp = _MixtralMoe(d, w, f"{p}.block_sparse_moe", config)
        else:
            self.mlp = _DenseMlp(d, w, f"{p}.mlp")
        layer_types = config.get("layer_types")
        window = config.get("sliding_window")
        if layer_types is not None:
            self.sliding = layer_types[i] == "sliding_attention" and window is not None
        else:  # Mistral / Mixtral: every layer when sliding_window is set; Qwen2 only with use_sliding_window
            self.sliding = window is not None and (config.get("model_type") != "qwen2" or config.get("use_sliding_window", False))



class LlamaDecoder(Decoder):
    family = "llama"

    def __init__(self, weights, max_len: int, device, compile: bool = False, fused: bool | None = None,
                 programmatic: bool | None = None, residual_norm: bool | None = None, rope_in_attention: bool | None = None,
                 activation_in_gemv: bool = False, iris_head: bool | None = None, gated_kernel: bool | None = None):
        super().__init__(weights, max_len, device, compile, fused, programmatic, residual_norm, rope_in_attention,
                         activation_in_gemv, iris_head, gated_kernel)
        c, w = self.config, weights
        self._read_attention_config(default_eps=1e-6)
        self.window = int(c["sliding_window"]) if c.get("sliding_window") else None
        act = activation(c)
        self.embed = w.take("model.embed_tokens.weight")
        n_layers = int(c["num_hidden_layers"])
        self.layers = [_Layer(self, w, i, c) for i in range(n_layers)]
        self.norm = w.take("model.norm.weight")
        if w.has("lm_head.weight"):
            self.lm_head = self.reads(self._head(Linear(w, "lm_head", bias=False)))
        elif c.get("tie_word_embeddings", False):
            self.lm_head = self.reads(self._head(_TiedHead(self.embed, w.nbytes("model.embed_tokens.weight"))))
        else:
            raise IrisError(f"{w.source}: no lm_head.weight and tie_word_embeddings is not set")
        self._make_rope_and_cache(n_layers, self.embed.dtype)
        heads, kv_heads, head_dim = self.heads, self.kv_heads, self.head_dim
        embed_norm, add_norm, norm = norm_steps(self.eps)

        def attention(q, keys, values, mask):
            # mask: additive, 0 or -inf per cache position, made once a step (masks below)
            out = F.scaled_dot_product_attention(q.view(1, heads, 1, head_dim), keys.unsqueeze(0), values.unsqueeze(0),
                                                 attn_mask=mask, enable_gqa=kv_heads != heads)
            return out.reshape(1, heads * head_dim)

        window, dtype_ = self.window, self.embed.dtype

        def masks(positions, pos):
            full = positions <= pos
            sliding = full & (positions > pos - window) if window else full
            add = lambda m: torch.zeros(m.shape, dtype=dtype_, device=m.device).masked_fill(~m, float("-inf")).view(1, 1, 1, -1)  # noqa: E731
            return add(full), add(sliding)

        self.f_embed_norm, self.f_add_norm, self.f_attention = self.fn(embed_norm), self.fn(add_norm), self.fn(attention)
        self.f_norm = self.fn(norm)
        self.f_masks = self.fn(masks)
        silu_bf16 = c.get("hidden_act", "silu") in ("silu", "swish") and self.embed.dtype == torch.bfloat16
        # gated_kernel (Decoder.__init__): the activation inside a quantized gate/up launch where
        # the MLP has one, else iris's own launch after it.
        self.gated_in_gemv = self.gated_kernel and silu_bf16
        self.f_gated = torch.ops.iris.gated_silu if self.gated_in_gemv else self.fn(lambda gate, up: act(gate) * up)
        self.f_route, self.f_weighted_sum = self.fn(_route_softmax_topk), self.fn(_weighted_sum)
        self.f_pair_ids = self.fn(_gated_pair_ids)
        self.f_local_experts = self.fn(local_experts)
        self.residual_norm = self._use_residual_norm(self.embed, self.norm, *[t for layer in self.layers for t in (layer.ln1, layer.ln2)])

    # Measurement aid (bench/decode_bench.py --knock-out-sweep): steps of every layer left out of
    # the decode step, the tensor they take passed on in place of their result -- attention (q
    # goes to o_proj), the MLP's activation (gate goes to down_proj), the residual steps with
    # their norms (each projection's output is the next one's input) -- so that a replayed
    # graph shows what each costs on the critical path. The profiler's kernel durations cannot
    # show it where programmatic launches overlap a kernel with the wait of the next. The
    # tokens are meaningless while any is set. Dense MLPs only (Llama, Mistral, Qwen2).
    KNOCK_OUTS = frozenset({"attention", "activation", "norm"})

    def set_knock_out(self, names) -> None:
        names = frozenset(names)
        if names - self.KNOCK_OUTS:
            raise IrisError(f"iris.models: no such knock-out {sorted(names - self.KNOCK_OUTS)}; known: {sorted(self.KNOCK_OUTS)}")
        if names and any(isinstance(layer.mlp, _MixtralMoe) for layer in self.layers):
            # Without the norms, an MoE layer's weighted sum would become a launch of its own
            # (it is part of residual_norm's), which the sweep would count as the norms' gain.
            raise IrisError("iris.models: knock-outs are for dense MLPs, not Mixtral's experts")
        self.knock_out = names
        self._graph = None  # the next graph step captures the step as it now is

    def forward(self, token, pos):
        full, sliding = self.f_masks(self.positions, pos) if not self.fused else (None, None)
        x, h = self._embed(token, self.layers[0].ln1)  # [1, hidden]
        for i, layer in enumerate(self.layers):
            if "attention" in self.knock_out:
                attn = layer.qkv(h)[0].reshape(1, -1)
            else:
                attn = self._attention(layer, h, i, pos, self.window if layer.sliding else 0)
            if attn is None:
                q = self._qkv(layer, h, i, pos)
                attn = self.f_attention(q, self.cache.k[i], self.cache.v[i], sliding if layer.sliding else full)
            nxt = self.layers[i + 1].ln1 if i + 1 < len(self.layers) else self.norm
            o = self._project(layer.o, attn)
            if "norm" in self.knock_out:
                h = layer.mlp(self, o)
                continue
            if not self.residual_norm:
                x, h = self.f_add_norm(x, o, layer.ln2)
                x, h = self.f_add_norm(x, layer.mlp(self, h), nxt)
                continue
            x, h = torch.ops.iris.residual_norm(x, o, layer.ln2, self.eps, False)
            # an MoE layer's weighted sum of its experts joins the same launch
            terms, top = layer.mlp.terms(self, h) if isinstance(layer.mlp, _MixtralMoe) else (layer.mlp(self, h), None)
            x, h = torch.ops.iris.residual_norm(x, terms, nxt, self.eps, False, None, None, top)
        return self._logits(h)

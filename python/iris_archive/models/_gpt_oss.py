"""gpt-oss: attention with per-head sinks, sliding-window layers (config.layer_types), YaRN
rotary positions, and a top-k MoE of MXFP4 experts with gpt-oss's clamped SwiGLU. The
arithmetic follows transformers' modeling_gpt_oss (eager attention in BF16, router softmax
over the top-k logits in BF16) and iris.torch's IrisGptOssExperts, so greedy tokens match a
patched transformers model on the same archive; unlike transformers' forward, a step
captures into a CUDA graph."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._patch import _gpt_oss_gate
from ._decoder import Decoder
from ._layers import ExpertStack, GroupedLinear, Linear, norm_steps, use_iris_dense_gemv
from ._parallel import local_experts


class _Layer:
    def __init__(self, d, w, i: int, c: dict):
        p = f"model.layers.{i}"
        self.ln1, self.ln2 = w.take(f"{p}.input_layernorm.weight"), w.take(f"{p}.post_attention_layernorm.weight")
        self.qkv = d.reads(GroupedLinear(w, [f"{p}.self_attn.{n}_proj" for n in "qkv"], d.device, d.compiled))
        self.o = d.reads(Linear(w, f"{p}.self_attn.o_proj"))
        self.sinks = w.take(f"{p}.self_attn.sinks")
        self.router = d.reads(Linear(w, f"{p}.mlp.router"))
        m = f"{p}.mlp.experts"
        self.gate_up = d.reads(ExpertStack(w.take(f"{m}.gate_up_proj"), w.nbytes(f"{m}.gate_up_proj")), d.top_k)
        self.down = d.reads(ExpertStack(w.take(f"{m}.down_proj"), w.nbytes(f"{m}.down_proj")), d.top_k)
        self.down.columns_split = d._columns_split(f"{m}.down_proj")
        # expert parallelism (ep = tp): this rank's experts [experts_first, + experts_held), whole
        self.experts_first, self.experts_held = 0, None
        if d.tp is not None and d.tp.ep > 1:
            self.experts_first, self.experts_held = d.tp.first_row(f"{m}.gate_up_proj"), d.tp.rows(f"{m}.gate_up_proj")
        self.gate_up_bias, self.down_bias = w.take(f"{m}.gate_up_proj_bias"), w.take(f"{m}.down_proj_bias")
        self.fused_route = d._routes_fused(self.router)
        # the activation inside the gate_up GEMV: quantized experts and a BF16 bias (or none)
        self.activation_in_gemv = (d.activation_in_gemv and self.gate_up.quantized
                                   and (self.gate_up_bias is None or self.gate_up_bias.dtype == torch.bfloat16))
        if d.fused:
            use_iris_dense_gemv(self.qkv)
            use_iris_dense_gemv(self.o)
            self.sinks = self.sinks.to(torch.bfloat16).contiguous()  # the mirror casts them to the scores' BF16 too
        types = c.get("layer_types")
        self.sliding = (types[i] == "sliding_attention") if types is not None else (i % 2 == 0)



class GptOssDecoder(Decoder):
    family = "gpt_oss"

    def __init__(self, weights, max_len: int, device, compile: bool = False, fused: bool | None = None,
                 programmatic: bool | None = None, residual_norm: bool | None = None, rope_in_attention: bool | None = None,
                 activation_in_gemv: bool = False, iris_head: bool | None = None, gated_kernel: bool | None = None):
        super().__init__(weights, max_len, device, compile, fused, programmatic, residual_norm, rope_in_attention,
                         activation_in_gemv, iris_head, gated_kernel)
        c, w = self.config, weights
        self._read_attention_config(default_eps=1e-5)
        self.groups = self.heads // self.kv_heads
        self.window = int(c.get("sliding_window") or 128)
        self.top_k = int(c.get("num_experts_per_tok", c.get("experts_per_token", 4)))
        alpha, limit = self.alpha, self.limit = 1.702, float(c.get("swiglu_limit", 7.0))
        self.embed = w.take("model.embed_tokens.weight")
        n_layers = int(c["num_hidden_layers"])
        self.layers = [_Layer(self, w, i, c) for i in range(n_layers)]
        self.norm = w.take("model.norm.weight")
        self.lm_head = self.reads(self._head(Linear(w, "lm_head", bias=False)))
        self._make_rope_and_cache(n_layers, self.embed.dtype)
        self.rows = torch.zeros(self.top_k, dtype=torch.int32, device=self.device)
        heads, kv_heads, groups, head_dim = self.heads, self.kv_heads, self.groups, self.head_dim
        scaling, top_k = head_dim ** -0.5, self.top_k
        embed_norm, add_norm, norm = norm_steps(self.eps, weight_in_f32=True)

        def attention(q, keys, values, mask, sinks):
            # transformers' eager_attention_forward with sinks, at one query: BF16 matmuls, the
            # sink logit joins the softmax and is dropped after it.
            qg = q.view(kv_heads, groups, head_dim)
            scores = torch.matmul(qg, keys.transpose(1, 2)) * scaling  # [kv, groups, L]
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            combined = torch.cat([scores, sinks.view(kv_heads, groups, 1).to(scores.dtype)], dim=-1)
            combined = combined - combined.max(dim=-1, keepdim=True).values
            probs = F.softmax(combined, dim=-1, dtype=combined.dtype)[..., :-1]
            return torch.matmul(probs, values).reshape(1, heads * head_dim)

        def route(logits):
            # torch.topk, the op transformers' router uses: where BF16 router logits tie, the
            # same op picks the same expert
            top, idx = torch.topk(logits, top_k, dim=-1)
            picked = idx.reshape(-1)
            return F.softmax(top, dim=1, dtype=top.dtype), picked, picked.to(torch.int32)

        def gate(gate_up, bias, picked):
            return _gpt_oss_gate(gate_up + bias.index_select(0, picked), alpha, limit)

        def combine_add_norm(out, bias, picked, weights, x, weight):
            out = (out + bias.index_select(0, picked)) * weights.reshape(-1, 1)
            return add_norm(x, out.sum(dim=0, keepdim=True).to(out.dtype), weight)

        # expert parallelism: the bias joins each row on its expert's rank (combine_add_norm's
        # rounding), the rows are exchanged, then weighted and summed as above
        def with_bias(out, bias, picked):
            return out + bias.index_select(0, picked)

        def weighted_add_norm(out, weights, x, weight):
            out = out * weights.reshape(-1, 1)
            return add_norm(x, out.sum(dim=0, keepdim=True).to(out.dtype), weight)

        self.f_embed_norm, self.f_add_norm, self.f_attention = self.fn(embed_norm), self.fn(add_norm), self.fn(attention)
        self.f_norm = self.fn(norm)
        self.f_route, self.f_gate = self.fn(route), self.fn(gate)
        self.f_combine_add_norm = self.fn(combine_add_norm)
        self.f_local_experts, self.f_with_bias, self.f_weighted_add_norm = self.fn(local_experts), self.fn(with_bias), self.fn(weighted_add_norm)
        self.residual_norm = self._use_residual_norm(self.embed, self.norm, *[t for layer in self.layers
                                                                             for t in (layer.ln1, layer.ln2, layer.down_bias)])

    def use_exact_sums(self) -> None:
        """Decoder.use_exact_sums, with the experts' activation out of the gate_up launch: that
        kernel's sums are the fast arithmetic's (the exact mode keeps MXFP4 stacks quantized)."""
        super().use_exact_sums()
        for layer in self.layers:
            layer.activation_in_gemv = False

    def forward(self, token, pos):
        full = sliding = None
        if not self.fused:
            full = self.positions <= pos
            sliding = full & (self.positions > pos - self.window)
        x, h = self._embed(token, self.layers[0].ln1)
        for i, layer in enumerate(self.layers):
            attn = self._attention(layer, h, i, pos, self.window if layer.sliding else 0, layer.sinks)
            if attn is None:
                q = self._qkv(layer, h, i, pos)
                attn = self.f_attention(q, self.cache.k[i], self.cache.v[i], sliding if layer.sliding else full, layer.sinks)
            o = self._project(layer.o, attn)
            if self.residual_norm:
                x, h = torch.ops.iris.residual_norm(x, o, layer.ln2, self.eps, True)
            else:
                x, h = self.f_add_norm(x, o, layer.ln2)
            if layer.fused_route:
                weights, ids = self._route_fused(layer.router, h, self.top_k)
                picked = ids
            else:
                weights, picked, ids = self.f_route(layer.router(h))
            held, gate_up_ids, down_ids = None, ids, ids
            if layer.experts_held is not None:  # this rank's experts only; the others' pairs read nothing
                ids, picked, held = self.f_local_experts(ids, layer.experts_first, layer.experts_held)
                # a quantized stack takes -1 (no reads, NaN rows); a dense one, or the exact mode's,
                # gathers by index, so it takes the clamped ids (another expert's rows); both are
                # masked in the exchange
                gate_up_ids = ids if layer.gate_up.reads_nothing_for_negative_ids else picked
                down_ids = ids if layer.down.reads_nothing_for_negative_ids else picked
            if layer.activation_in_gemv:
                act = layer.gate_up.swiglu(h, gate_up_ids, self.rows, layer.gate_up_bias, self.alpha, self.limit)
            else:
                act = self.f_gate(layer.gate_up(h, gate_up_ids, self.rows), layer.gate_up_bias, picked)
            nxt = self.layers[i + 1].ln1 if i + 1 < len(self.layers) else self.norm
            down = self._project_experts(layer.down, act, down_ids, None)
            if held is not None:
                rows = self.tp.share_rows(self.f_with_bias(down, layer.down_bias, picked), held)
                if self.residual_norm:
                    x, h = torch.ops.iris.residual_norm(x, rows, nxt, self.eps, True, None, None, weights)
                else:
                    x, h = self.f_weighted_add_norm(rows, weights, x, nxt)
                continue
            if self.residual_norm:  # the experts' weighted sum with their biases, the residual and the norm
                x, h = torch.ops.iris.residual_norm(x, down, nxt, self.eps, True, layer.down_bias, ids, weights)
            else:
                x, h = self.f_combine_add_norm(down, layer.down_bias, picked, weights, x, nxt)
        return self._logits(h)

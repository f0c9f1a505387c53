"""iris.torch.patch: a transformers model on iris modules. Archive names are mapped to the
model's parameters with transformers' own checkpoint conversion rules; nn.Linear layers whose
weights are quantized become IrisLinear, gpt-oss and Mixtral expert stacks become modules
that run the grouped expert GEMV; every parameter left unset and every archive tensor left
unused is reported. Re-exported by iris.torch, whose names are the public ones."""

from __future__ import annotations

import torch

from ._errors import IrisError
from .torch import _C_DTYPE, Experts, IrisLinear, QuantTensor, load


def _pair_rows(cache: dict, tokens: int, top_k: int, device) -> torch.Tensor:
    """The token of each (token, expert) pair, [tokens * top_k] int32, made once per shape: the
    decode loop asks for the same one at every layer and step."""
    key = (tokens, top_k, device)
    rows = cache.get(key)
    if rows is None:
        rows = cache[key] = torch.arange(tokens, device=device, dtype=torch.int32).repeat_interleave(top_k)
    return rows


def _gpt_oss_gate(gate_up: torch.Tensor, alpha: float, limit: float) -> torch.Tensor:
    """gpt-oss's clamped SwiGLU on interleaved gate/up columns (transformers' GptOssExperts):
    gate = even columns clamped above at limit, up = odd columns clamped to [-limit, limit],
    (up + 1) * gate * sigmoid(alpha * gate)."""
    gate, up = gate_up[..., ::2], gate_up[..., 1::2]
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


class IrisGptOssExperts(torch.nn.Module):
    """transformers' GptOssExperts on quantized stacks: gate_up_proj [E, 2I, H] and down_proj
    [E, H, I] as the checkpoint stores them. Each projection is one grouped expert GEMV over
    the (token, expert) pairs the router chose, reading only those experts' tiles; the indices
    stay on the GPU. The gate is gpt-oss's, with alpha and limit copied off the replaced module
    as plain numbers: nothing here refers to that module, so it is freed once replaced (a bound
    method of it kept its BF16 weights alive, 38 GB for gpt-oss-20b)."""

    def __init__(self, original: torch.nn.Module, gate_up: QuantTensor, down: QuantTensor, gate_up_bias, down_bias,
                 config=None):
        super().__init__()
        self.num_experts = int(original.num_experts)
        # transformers' GptOssExperts: alpha 1.702, limit = config.swiglu_limit (7.0).
        self.alpha = float(getattr(original, "alpha", 1.702))
        self.limit = float(getattr(original, "limit", getattr(config, "swiglu_limit", 7.0)))
        self.gate_up, self.down = Experts(gate_up), Experts(down)
        self.gate_up_proj_bias, self.down_proj_bias = gate_up_bias, down_bias
        self._rows = {}

    def forward(self, hidden_states: torch.Tensor, router_indices=None, routing_weights=None) -> torch.Tensor:
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])
        tokens, top_k = router_indices.shape
        ids = router_indices.reshape(-1).to(torch.int32)
        rows = _pair_rows(self._rows, tokens, top_k, x.device)
        picked = ids.long()
        gate_up = self.gate_up.gemv(x, ids, rows) + self.gate_up_proj_bias[picked]
        out = self.down.gemv(_gpt_oss_gate(gate_up, self.alpha, self.limit), ids) + self.down_proj_bias[picked]
        out = out * routing_weights.reshape(-1, 1)
        return out.view(tokens, top_k, -1).sum(dim=1).to(hidden_states.dtype).reshape(shape)

    def extra_repr(self) -> str:
        return f"num_experts={self.num_experts}, alpha={self.alpha}, limit={self.limit}"


def _activation(original: torch.nn.Module, config):
    """A fresh activation module: from the config's hidden_act through transformers' ACT2FN,
    else a deep copy of the replaced module's act_fn (never the replaced module's own object
    graph, which must be free to go)."""
    name = getattr(config, "hidden_act", None)
    if isinstance(name, str):
        try:
            from transformers.activations import ACT2FN

            return ACT2FN[name]
        except (ImportError, KeyError):
            pass
    import copy

    return copy.deepcopy(original.act_fn)


class IrisMixtralExperts(torch.nn.Module):
    """transformers' MixtralExperts on the checkpoint's per-expert quantized w1 (gate), w3 (up)
    and w2 (down): three grouped expert GEMVs over the (token, expert) pairs the router chose,
    reading only those experts' tiles. Holds nothing of the replaced module."""

    def __init__(self, original: torch.nn.Module, w1: list, w2: list, w3: list, config=None):
        super().__init__()
        self.num_experts = int(original.num_experts)
        self.act_fn = _activation(original, config)
        self.w1, self.w2, self.w3 = Experts(w1), Experts(w2), Experts(w3)
        self._rows = {}

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor) -> torch.Tensor:
        tokens, top_k = top_k_index.shape
        ids = top_k_index.reshape(-1).to(torch.int32)
        rows = _pair_rows(self._rows, tokens, top_k, hidden_states.device)
        h = self.act_fn(self.w1.gemv(hidden_states, ids, rows)) * self.w3.gemv(hidden_states, ids, rows)
        out = self.w2.gemv(h, ids) * top_k_weights.reshape(-1, 1)
        return out.view(tokens, top_k, -1).sum(dim=1).to(hidden_states.dtype)


# -- archive names -> model parameters (transformers' checkpoint conversion rules)

class _Rule:
    """One of transformers' checkpoint conversion rules, read off its WeightRenaming or
    WeightConverter: source patterns (regexes, '*' standing for an expert index), one target,
    and for a converter the names and dims of its operations."""

    def __init__(self, rule):
        import re

        sources = _first_attr(rule, ("source_patterns", "source_keys"))
        targets = _first_attr(rule, ("target_patterns", "target_keys"))
        sources = [sources] if isinstance(sources, str) else list(sources or [])
        targets = [targets] if isinstance(targets, str) else list(targets or [])
        ops = getattr(rule, "operations", None)
        self.renaming = not ops
        self.operations = [(type(op).__name__, getattr(op, "dim", 0)) for op in (ops or [])]
        self.sources = sources
        self.target = targets[0] if len(targets) == 1 else None
        # A converter's '*' is an expert index (a captured integer); a renaming is a regex as is.
        self.patterns = [re.compile(src if self.renaming else re.escape(src).replace(r"\*", r"(\d+)")) for src in sources]

    def rename(self, name: str) -> str:
        for pattern in self.patterns:
            name = pattern.sub(self.target, name) if self.target is not None else name
        return name

    def match(self, name: str):
        """(target name, source index, expert index) when a converter takes this name."""
        for i, pattern in enumerate(self.patterns):
            m = pattern.search(name)
            if m:
                expert = int(m.group(1)) if m.groups() else 0
                return name[:m.start()] + self.target + name[m.end():], i, expert
        return None


def _first_attr(obj, names):
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    return None


def _conversion_rules(model) -> list:
    """The model's checkpoint conversion rules from transformers (5.x), or [] where this
    transformers has none (4.x loads checkpoint names as they are)."""
    try:
        from transformers import conversion_mapping
    except ImportError:
        return []
    raw = None
    getter = getattr(conversion_mapping, "get_model_conversion_mapping", None)
    if getter is not None:
        try:
            raw = getter(model)
        except TypeError:
            raw = None
    if raw is None:
        getter = getattr(conversion_mapping, "get_checkpoint_conversion_mapping", None)
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        raw = getter(model_type) if getter is not None and model_type else None
    return [_Rule(r) for r in raw or [] if _first_attr(r, ("source_patterns", "source_keys")) is not None]


class _Plan:
    """Where each archive tensor goes: `direct` maps a model name to one archive name;
    `groups` maps a model name to the rule and the archive names (by source pattern, then
    expert index) a converter merges into it."""

    def __init__(self, archive_names, model_names: set, rules: list):
        self.direct, self.groups = {}, {}
        renamings = [r for r in rules if r.renaming and r.target is not None]
        converters = [r for r in rules if not r.renaming and r.target is not None]
        for name in archive_names:
            renamed = name
            for r in renamings:
                renamed = r.rename(renamed)
            if renamed in model_names:
                self.direct[renamed] = name
            elif not self._take(name, renamed, converters, model_names):
                self.direct.setdefault(name, name)  # unknown to the model: reported as unused

    def _take(self, name: str, renamed: str, converters: list, model_names: set) -> bool:
        """Files `name` under the converter whose target the model has, if one takes it (its
        patterns are written against checkpoint names: tried on the name as stored, then as
        renamed)."""
        for rule in converters:
            for candidate in (name, renamed):
                found = rule.match(candidate)
                if found is not None and found[0] in model_names:
                    target, source, expert = found
                    self.groups.setdefault(target, (rule, {}))[1].setdefault(source, {})[expert] = name
                    return True
        return False

    def group_names(self, target: str) -> list:
        """The archive names merged into `target`, by source pattern, each in expert order."""
        rule, by_source = self.groups[target]
        return [[by_source[i][e] for e in sorted(by_source[i])] for i in sorted(by_source)]


def _merge(target: str, rule: _Rule, tensors: list, dtype) -> torch.Tensor:
    """Applies a converter's operations (transformers' MergeModulelist: stack each source's
    experts along dim; Concatenate: join the sources along dim) to the archive's tensors."""
    values = [[t.dequantize(dtype) if isinstance(t, QuantTensor) else t.to(dtype) for t in per_source] for per_source in tensors]
    for op, dim in rule.operations:
        if op == "MergeModulelist":
            values = [[torch.stack(v, dim=dim)] for v in values]
        elif op == "Concatenate":
            values = [[torch.cat([v[0] for v in values], dim=dim)]]
        else:
            raise IrisError(f"'{target}': iris cannot apply transformers' {op} conversion")
    if len(values) != 1 or len(values[0]) != 1:
        raise IrisError(f"'{target}': the conversion left {len(values)} tensors, not one")
    return values[0][0]


# -- patch

class PatchResult(dict):
    """What patch() returns: the state dict iris.torch.load produced (name -> tensor or
    QuantTensor; it owns the device memory, so keep it while the model runs), with
    `unset`: the model's parameters and persistent buffers the archive did not set, and
    `unused`: the archive's tensors the model took nothing from (both empty after a strict
    patch, which raises instead)."""

    def __init__(self, state_dict: dict, unset: list, unused: list):
        super().__init__(state_dict)
        self.unset, self.unused = unset, unused


def _module_and_leaf(model, name: str):
    parent, _, leaf = name.rpartition(".")
    return (model.get_submodule(parent) if parent else model), leaf


def _patch_experts(model: torch.nn.Module, sd: dict, plan: _Plan, used: set) -> int:
    """Replaces transformers' gpt-oss and Mixtral expert modules whose weights are quantized in
    the archive; returns how many were replaced. The archive names they take go into `used`."""
    replaced = 0
    config = getattr(model, "config", None)
    for name, module in list(model.named_modules()):
        kind = type(module).__name__
        if kind == "GptOssExperts":
            names = [plan.direct.get(f"{name}.{p}") for p in ("gate_up_proj", "down_proj", "gate_up_proj_bias", "down_proj_bias")]
            gu, dn, gub, dnb = (sd.get(n) if n else None for n in names)
            if isinstance(gu, QuantTensor) and isinstance(dn, QuantTensor):
                parent, leaf = _module_and_leaf(model, name)
                setattr(parent, leaf, IrisGptOssExperts(module, gu, dn, gub, dnb, config))
                used.update(n for n in names if n)
                replaced += 1
        elif kind == "MixtralExperts":
            w = _mixtral_expert_names(name, module, plan)
            if w and all(isinstance(sd.get(n), QuantTensor) for ns in w.values() for n in ns):
                parent, leaf = _module_and_leaf(model, name)
                setattr(parent, leaf, IrisMixtralExperts(module, *([sd[n] for n in w[p]] for p in ("w1", "w2", "w3")), config=config))
                used.update(n for ns in w.values() for n in ns)
                replaced += 1
    return replaced


def _mixtral_expert_names(name: str, module, plan: _Plan):
    """The archive names of a MixtralExperts' per-expert w1, w2, w3: from the conversion rules
    that fuse them into gate_up_proj and down_proj, else (no rules) as Mixtral checkpoints
    name them beside the module's layer."""
    gu, dn = f"{name}.gate_up_proj", f"{name}.down_proj"
    if gu in plan.groups and dn in plan.groups:
        gate_up, down = plan.group_names(gu), plan.group_names(dn)
        if len(gate_up) == 2 and len(down) == 1:
            return {"w1": gate_up[0], "w3": gate_up[1], "w2": down[0]}
        return None
    if ".layers." not in name:
        return None
    layer = name.split(".layers.")[1].split(".")[0]
    prefix = f"{name.split('.layers.')[0]}.layers.{layer}.block_sparse_moe.experts"
    names = {p: [f"{prefix}.{e}.{p}.weight" for e in range(module.num_experts)] for p in ("w1", "w2", "w3")}
    return names if all(plan.direct.get(n) == n for ns in names.values() for n in ns) else None


def _patch_linears(model: torch.nn.Module, sd: dict, plan: _Plan, used: set, installed: set) -> list:
    """Every nn.Linear whose weight is quantized in the archive becomes an IrisLinear; returns
    the biases such a Linear had that the archive lacks (reported as unset)."""
    missing_biases = []
    for name, module in list(model.named_modules()):
        if not isinstance(module, torch.nn.Linear):
            continue
        wname = plan.direct.get(f"{name}.weight")
        w = sd.get(wname) if wname else None
        if isinstance(w, QuantTensor):
            bname = plan.direct.get(f"{name}.bias")
            bias = sd.get(bname) if bname else None
            if module.bias is not None and not isinstance(bias, torch.Tensor):
                missing_biases.append(f"{name}.bias")
            iris_linear = IrisLinear(w, bias.to(_bias_dtype(module)) if isinstance(bias, torch.Tensor) else None)
            parent, leaf = _module_and_leaf(model, name)
            setattr(parent, leaf, iris_linear)
            used.update(n for n in (wname, bname if bias is not None else None) if n)
            if iris_linear.bias is not None:
                installed.add(id(iris_linear.bias))
    return missing_biases


def _bias_dtype(linear: torch.nn.Linear):
    return linear.bias.dtype if linear.bias is not None else torch.bfloat16


def _persistent_names(model: torch.nn.Module) -> list:
    """(name, module, leaf, tensor) of every parameter and persistent buffer, tied aliases
    included (a tied lm_head.weight is listed under both names)."""
    out = []
    for mname, module in model.named_modules(remove_duplicate=False):
        prefix = f"{mname}." if mname else ""
        for leaf, p in module._parameters.items():
            if p is not None:
                out.append((prefix + leaf, module, leaf, p))
        for leaf, b in module._buffers.items():
            if b is not None and leaf not in module._non_persistent_buffers_set:
                out.append((prefix + leaf, module, leaf, b))
    return out


def _set_tensors(model: torch.nn.Module, sd: dict, plan: _Plan, used: set, installed: set) -> None:
    """Sets every parameter and persistent buffer the archive holds (a new Parameter on the
    archive's device, so a meta-built model works; cast to the model's dtype where they
    differ). Tied parameters stay tied: every name of one tensor gets the same new one."""
    new_for = {}  # id(old tensor) -> the tensor that replaces it
    entries = _persistent_names(model)
    with torch.no_grad():
        for name, module, leaf, old in entries:
            if id(old) in new_for:
                continue
            value = _value_for(name, old, sd, plan, used)
            if value is None:
                continue
            if tuple(value.shape) != tuple(old.shape):
                raise IrisError(f"tensor '{name}': the archive has {list(value.shape)}, the model {list(old.shape)}")
            value = value if value.dtype == old.dtype else value.to(old.dtype)
            new = torch.nn.Parameter(value, requires_grad=False) if isinstance(old, torch.nn.Parameter) else value
            new_for[id(old)] = new
            installed.add(id(new))
        for name, module, leaf, old in entries:
            if id(old) in new_for:
                (module._parameters if leaf in module._parameters else module._buffers)[leaf] = new_for[id(old)]


def _value_for(name: str, old: torch.Tensor, sd: dict, plan: _Plan, used: set):
    """The archive's value for model tensor `name` (a QuantTensor that no iris module took is
    dequantized to the model's dtype; converter groups are merged), or None."""
    if name in plan.groups:
        names = plan.group_names(name)
        used.update(n for ns in names for n in ns)
        return _merge(name, plan.groups[name][0], [[sd[n] for n in ns] for ns in names], old.dtype)
    source = plan.direct.get(name)
    if source is None or source not in sd:
        return None
    used.add(source)
    v = sd[source]
    return v.dequantize(old.dtype if old.dtype in _C_DTYPE else torch.bfloat16) if isinstance(v, QuantTensor) else v


def _materialize_non_persistent_buffers(model: torch.nn.Module, device: torch.device) -> list:
    """Recomputes non-persistent buffers left on the meta device (rotary inv_freq: checkpoints
    do not hold them) by building the module's class again from its config on the device, as
    transformers' rotary modules are built; returns the names it could not recompute."""
    failed = []
    for mname, module in list(model.named_modules()):
        meta = [leaf for leaf in module._non_persistent_buffers_set
                if module._buffers.get(leaf) is not None and module._buffers[leaf].is_meta]
        if not meta:
            continue
        fresh = None
        config = getattr(module, "config", None)
        if config is not None:
            try:
                # The default device places the buffers (the `device=` argument is deprecated
                # in transformers 5.17 and gone in 5.18).
                with torch.device(device):
                    fresh = type(module)(config=config)
            except Exception:  # noqa: BLE001 - any failure is reported by name below
                fresh = None
        for leaf in meta:
            value = getattr(fresh, leaf, None) if fresh is not None else None
            if isinstance(value, torch.Tensor) and not value.is_meta:
                module._buffers[leaf] = value.to(device)
            else:
                failed.append(f"{mname}.{leaf}" if mname else leaf)
        for attr, value in (vars(fresh).items() if fresh is not None else ()):
            old = module.__dict__.get(attr)
            if isinstance(old, torch.Tensor) and old.is_meta and isinstance(value, torch.Tensor):
                module.__dict__[attr] = value.to(device)  # e.g. original_inv_freq, a plain attribute
    return failed


def patch(model: torch.nn.Module, path, device="cuda", strict: bool = True, nf4_table: str = "exact") -> PatchResult:
    """Loads an archive into a (transformers) model, one built on the meta device included.

    Archive names are mapped to the model's with the model's own checkpoint conversion rules
    (transformers 5.x renames some and fuses per-expert weights at load time, e.g. Mixtral's
    block_sparse_moe.experts.N.w1/w3 into mlp.experts.gate_up_proj; older transformers: names
    as they are). Then: every nn.Linear whose weight is quantized in the archive becomes an
    IrisLinear; MoE expert modules (gpt-oss, Mixtral) whose weights are quantized become
    Iris*Experts modules that run only the experts the router picks; every other parameter and
    persistent buffer is set from the archive (cast to the model's dtype; a quantized one no
    iris module runs is dequantized; fused ones are stacked and concatenated as transformers
    does). Non-persistent buffers left on the meta device (rotary inv_freq) are recomputed.

    strict=True raises IrisError naming every parameter or persistent buffer the archive left
    unset and every archive tensor the model did not take; strict=False returns them instead.
    Returns a PatchResult: the state dict iris.torch.load produced (it owns the device memory:
    keep it while the model runs), with .unset and .unused, the two lists. nf4_table: as
    iris.torch.load's."""
    sd = load(path, device, nf4_table=nf4_table)
    device = next((v.device for v in sd.values()), torch.device(device))
    model_names = {name for name, *_ in _persistent_names(model)}
    plan = _Plan(sd.keys(), model_names, _conversion_rules(model))
    used, installed = set(), set()
    _patch_experts(model, sd, plan, used)
    missing_biases = _patch_linears(model, sd, plan, used, installed)
    _set_tensors(model, sd, plan, used, installed)
    not_recomputed = _materialize_non_persistent_buffers(model, device)
    unset = sorted({name for name, _, _, t in _persistent_names(model) if id(t) not in installed} | set(missing_biases))
    unused = sorted(set(sd) - used)
    if strict and (unset or unused or not_recomputed):
        raise IrisError(_incomplete_message(path, unset, unused, not_recomputed))
    if not_recomputed:
        unset = sorted(set(unset) | set(not_recomputed))
    return PatchResult(sd, unset, unused)


def _incomplete_message(path, unset: list, unused: list, not_recomputed: list) -> str:
    parts = []
    if unset:
        parts.append(f"{len(unset)} model parameters or buffers the archive does not set: {', '.join(unset)}")
    if unused:
        parts.append(f"{len(unused)} archive tensors the model does not take: {', '.join(unused)}")
    if not_recomputed:
        parts.append(f"{len(not_recomputed)} non-persistent buffers left on the meta device that iris cannot recompute: "
                     f"{', '.join(not_recomputed)}")
    return f"{getattr(path, 'path', path)}: iris.torch.patch is incomplete: " + "; ".join(parts)

#include "converter/pipeline/quant_policy.h"

namespace iris {

namespace {

struct Named {
  Target t;
  const char* name;
};
constexpr Named kTargets[] = {{Target::kKeep, "keep"},         {Target::kBf16, "bf16"},
                              {Target::kMxfp4, "mxfp4"},       {Target::kNf4, "nf4"},
                              {Target::kFp8Tensor, "fp8"},     {Target::kFp8Channel, "fp8-channel"},
                              {Target::kFp8Block, "fp8-block"}, {Target::kNvfp4, "nvfp4"}};


// `seg` (no dots) against a glob segment where '*' matches any run of characters: the
// two-pointer walk, O(|pattern| x |seg|) at worst, so no input backtracks exponentially.
bool glob_segment(std::string_view pat, std::string_view seg) {
  size_t p = 0, s = 0, star = std::string_view::npos, mark = 0;
  while (s < seg.size()) {
    if (p < pat.size() && pat[p] == '*') {
      star = p++;
      mark = s;
    } else if (p < pat.size() && pat[p] == seg[s]) {
      ++p;
      ++s;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      s = ++mark;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == '.') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

bool is_norm_segment(std::string_view s) {
  if (!s.ends_with("norm")) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || c == '_')) return false;
  return true;
}

}  // namespace

// A checkpoint's skip list is untrusted text, so it is never compiled to a regex: a module
// pattern ("lm_head", "model.layers.*.self_attn") matches a tensor when its dot-separated
// segments equal a run of the name's segments ('*' a wildcard within one segment), the last
// one allowed to be followed by '_' ("experts.down_proj" matches "experts.down_proj_bias").
bool module_pattern_matches(const std::string& pattern, const std::string& name) {
  const auto pat = split_dots(pattern), segs = split_dots(name);
  if (pat.empty() || pat.size() > segs.size()) return false;
  for (size_t i = 0; i + pat.size() <= segs.size(); ++i) {
    bool ok = true;
    for (size_t j = 0; ok && j + 1 < pat.size(); ++j) ok = glob_segment(pat[j], segs[i + j]);
    if (!ok) continue;
    const std::string_view last = segs[i + pat.size() - 1];
    if (glob_segment(pat.back(), last)) return true;
    for (size_t k = 0; k < last.size(); ++k)
      if (last[k] == '_' && glob_segment(pat.back(), last.substr(0, k))) return true;
  }
  return false;
}

const char* target_name(Target t) {
  for (const auto& n : kTargets)
    if (n.t == t) return n.name;
  return "?";
}

std::optional<Target> target_from_name(const std::string& s) {
  for (const auto& n : kTargets)
    if (s == n.name) return n.t;
  return std::nullopt;
}

Format target_format(Target t) {
  switch (t) {
    case Target::kMxfp4: return Format::kMxfp4;
    case Target::kNvfp4: return Format::kNvfp4;
    case Target::kNf4: return Format::kNf4;
    case Target::kFp8Tensor:
    case Target::kFp8Channel:
    case Target::kFp8Block: return Format::kFp8E4M3;
    default: return Format::kRaw;
  }
}

bool already_in_target(const TensorDesc& d, Target t) {
  switch (t) {
    case Target::kKeep: return true;
    case Target::kBf16: return d.format == Format::kRaw && d.dtype == DType::kBF16;
    case Target::kMxfp4: return d.format == Format::kMxfp4;
    case Target::kNvfp4: return d.format == Format::kNvfp4;  // (either tool's convention: decoded as stored)
    case Target::kNf4: {
      if (d.format != Format::kNf4) return false;
      auto p = bnb4_params(d);
      return p.is_ok() && p->double_quant && p->block_size == 64;
    }
    case Target::kFp8Tensor:
    case Target::kFp8Channel:
    case Target::kFp8Block: {
      if (d.format != Format::kFp8E4M3) return false;
      auto p = fp8_params(d);
      if (!p.is_ok()) return false;
      if (t == Target::kFp8Tensor) return p->granularity == ScaleGranularity::kTensor;
      if (t == Target::kFp8Channel) return p->granularity == ScaleGranularity::kChannel;
      return p->granularity == ScaleGranularity::kBlock && p->block_n == 128 && p->block_k == 128;
    }
  }
  return false;
}

bool QuantPolicy::is_weight_matrix(const TensorDesc& d) {
  if (d.shape.size() < 2) return false;
  if (d.format == Format::kRaw && !is_float_dtype(d.dtype)) return false;
  static constexpr std::string_view kNotLinear[] = {"embed_tokens", "embed_positions", "wte", "wpe", "word_embeddings",
                                                    "position_embeddings", "tok_embeddings", "lm_head", "output", "router", "gate"};
  for (std::string_view seg : split_dots(d.name)) {
    if (is_norm_segment(seg)) return false;
    for (std::string_view n : kNotLinear)
      if (seg == n) return false;
  }
  // Biases: `P.bias`, and stacked expert biases named `P_bias` (gpt-oss experts.down_proj_bias).
  if (d.name.ends_with(".bias") || d.name.ends_with("_bias")) return false;
  return true;
}

Result<QuantPolicy> QuantPolicy::create(Target default_target, const std::vector<std::string>& rules,
                                        const std::vector<std::string>& skips, const std::vector<std::string>& source_skips) {
  QuantPolicy p;
  p.default_target_ = default_target;
  for (const auto& r : rules) {
    auto eq = r.rfind('=');
    if (eq == std::string::npos || eq == 0) return usage_error("--rule '" + r + "': expected REGEX=FORMAT");
    std::string pat = r.substr(0, eq), fmt = r.substr(eq + 1);
    auto t = target_from_name(fmt);
    if (!t) return usage_error("--rule '" + r + "': unknown format '" + fmt + "' (mxfp4, nf4, nvfp4, fp8, fp8-channel, fp8-block, bf16, keep)");
    try {
      p.rules_.push_back({pat, std::regex(pat), *t, 0});
    } catch (const std::regex_error& e) {
      return usage_error("--rule '" + r + "': invalid regular expression: " + e.what());
    }
  }
  for (const auto& s : skips) {
    try {
      p.skips_.push_back({s, std::regex(s), 0});
    } catch (const std::regex_error& e) {
      return usage_error("--skip '" + s + "': invalid regular expression: " + e.what());
    }
  }
  p.source_skips_ = source_skips;
  return p;
}

QuantPolicy::Decision QuantPolicy::decide(const TensorDesc& d) {
  bool skipped = false;  // every skip that matches counts, so none is reported unmatched wrongly
  for (auto& s : skips_)
    if (std::regex_search(d.name, s.re)) {
      ++s.matches;
      skipped = true;
    }
  if (skipped) return {Target::kKeep, "--skip"};
  for (auto& r : rules_)
    if (std::regex_search(d.name, r.re)) {
      ++r.matches;
      return {r.target, "rule '" + r.pattern + "'"};
    }
  if (default_target_ == Target::kKeep) return {Target::kKeep, "default (keep)"};
  for (uint64_t dim : d.shape)
    if (dim == 0) return {Target::kKeep, "empty tensor"};
  for (const auto& s : source_skips_)
    if (module_pattern_matches(s, d.name)) return {Target::kKeep, "source skip list"};
  if (!is_weight_matrix(d)) return {Target::kKeep, "not a weight matrix"};
  return {default_target_, "default"};
}

std::vector<std::string> QuantPolicy::unmatched_skips() const {
  std::vector<std::string> out;
  for (const auto& s : skips_)
    if (s.matches == 0) out.push_back(s.pattern);
  return out;
}

std::vector<std::string> QuantPolicy::unmatched_rules() const {
  std::vector<std::string> out;
  for (const auto& r : rules_)
    if (r.matches == 0) out.push_back(r.pattern);
  return out;
}

}  // namespace iris

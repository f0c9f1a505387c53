// Which format each tensor gets under `convert --quant`: --skip, then --rule (first match
// wins), then the default target for the weight matrices of linear layers and expert stacks.
// Norms, biases, embeddings, lm_head, routers, anything 1-D and the source's own skip list
// (modules_to_not_convert, llm_int8_skip_modules, ignore...) stay as they are by default.
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/status.h"
#include "formats/tensor_desc.h"

namespace iris {

enum class Target { kKeep, kBf16, kMxfp4, kNf4, kFp8Tensor, kFp8Channel, kFp8Block, kNvfp4 };

const char* target_name(Target t);
std::optional<Target> target_from_name(const std::string& s);  // "mxfp4", "fp8-block", ...
// The archive format a target produces (kRaw for bf16), and whether `d` already is it.
Format target_format(Target t);
bool already_in_target(const TensorDesc& d, Target t);

// Whether a module pattern of a checkpoint's skip list (untrusted: literal dotted segments,
// '*' within a segment; never a regex) names tensor `name` or one of its parent modules.
bool module_pattern_matches(const std::string& pattern, const std::string& name);

struct QuantRule {
  std::string pattern;
  std::regex re;
  Target target;
  size_t matches = 0;
};

class QuantPolicy {
 public:
  // `rules` are "REGEX=FORMAT"; `skips` are regexes; `source_skips` the checkpoint's own list.
  static Result<QuantPolicy> create(Target default_target, const std::vector<std::string>& rules,
                                    const std::vector<std::string>& skips, const std::vector<std::string>& source_skips);

  struct Decision {
    Target target;
    std::string why;  // "rule 'REGEX'", "default", "--skip", "source skip list", "not a weight matrix"
  };
  Decision decide(const TensorDesc& d);
  // Rules and skips that matched nothing (an error unless --allow-unmatched).
  std::vector<std::string> unmatched_rules() const;
  std::vector<std::string> unmatched_skips() const;

  // Default eligibility: a weight matrix of a linear layer or an expert stack.
  static bool is_weight_matrix(const TensorDesc& d);

 private:
  Target default_target_ = Target::kKeep;
  std::vector<QuantRule> rules_;
  struct Skip {
    std::string pattern;
    std::regex re;
    uint64_t matches = 0;
  };
  std::vector<Skip> skips_;
  std::vector<std::string> source_skips_;  // module patterns, matched by module_pattern_matches
};

}  // namespace iris

#include "kernels/tuning.h"

namespace iris {

namespace {
int g_dequant_unroll = 4;
bool g_gemv_tc = true;
int g_gemv_unroll = 2;
}  // namespace

int dequant_unroll() { return g_dequant_unroll; }
bool gemv_tensor_cores_allowed() { return g_gemv_tc; }
int gemv_unroll() { return g_gemv_unroll; }

Status set_kernel_variant(const std::string& name, const std::string& value) {
  auto bad = [&] { return usage_error("--variant " + name + "=" + value + ": unknown variant or value"); };
  if (name == "dequant-unroll") {
    if (value != "2" && value != "4" && value != "8") return bad();
    g_dequant_unroll = std::stoi(value);
  } else if (name == "gemv") {
    if (value != "auto" && value != "cuda-cores") return bad();
    g_gemv_tc = value == "auto";
  } else if (name == "gemv-unroll") {
    if (value != "1" && value != "2" && value != "4") return bad();
    g_gemv_unroll = std::stoi(value);
  } else {
    return bad();
  }
  return Status::ok();
}

}  // namespace iris

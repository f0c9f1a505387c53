// The bitsandbytes 4-bit oracle: FORMATS.md 3.2-3.4 written plainly, one element at a time
// (bnb csrc/kernels.cu kQuantizeBlockwise / kDequantizeBlockwise). The fast codecs
// (nf4_decode.cpp, nf4_encode.cpp) and the CUDA kernels must match it bit for bit.
#include <cfloat>
#include <cmath>

#include "quant/nf4.h"
#include "quant/tables.h"

namespace iris::quant {

float bnb_block_absmax(const Bnb4bitParams& p, uint64_t b) {
  if (!p.double_quant) return p.absmax[b];
  const uint8_t q = p.absmax_codes[b];
  const float v = p.nested_map ? p.nested_map[q] : dynamic_map_value(q);
  const float scaled = v * p.nested_absmax[b / p.nested_block_size];  // kernel pass 1
  return scaled + p.nested_offset;                                    // separate add (-ffp-contract=off)
}

void bnb4_decode_ref(const uint8_t* codes, uint64_t i0, uint64_t i1, const Bnb4bitParams& p, float* out) {
  for (uint64_t i = i0; i < i1; ++i) {
    const uint8_t byte = codes[i / 2];
    const uint8_t code = i % 2 == 0 ? byte >> 4 : byte & 15;  // HIGH nibble = even element
    const float value = p.code_table ? p.code_table[code] : nf4_to_f32(code);
    out[i - i0] = canonical_nan_if_nan(value * bnb_block_absmax(p, i / p.block_size));
  }
}

namespace {

// Max |x| over [i0, i1) as bnb's block reduction: fmaxf from `init`.
float block_absmax(const float* x, uint64_t i0, uint64_t i1, float init) {
  float m = init;
  for (uint64_t i = i0; i < i1; ++i) m = std::fmax(m, std::fabs(x[i]));
  return m;
}

}  // namespace

void nf4_encode_dq_ref(const float* in, uint64_t n, Nf4DoubleQuant* out) {
  const uint64_t bs = 64, nbs = 256, nabs = (n + bs - 1) / bs, nnest = (nabs + nbs - 1) / nbs;
  std::vector<float> absmax(nabs);
  out->codes.assign((n + 1) / 2, 0);
  // 1. First level. A short last block is padded with zeros, which take part in its max.
  for (uint64_t b = 0; b < nabs; ++b) {
    const uint64_t i0 = b * bs, i1 = i0 + bs < n ? i0 + bs : n;
    absmax[b] = block_absmax(in, i0, i1, i1 - i0 == bs ? -FLT_MAX : 0.0f);
    const float inv = 1.0f / absmax[b];
    for (uint64_t i = i0; i < i1 + (i1 - i0) % 2; ++i) {
      const float x = i < n ? in[i] : 0.0f;  // the padding element of an odd n
      const uint8_t c = nf4_encode(x * inv);
      out->codes[i / 2] |= uint8_t(i % 2 == 0 ? c << 4 : c);
    }
  }
  // 2. Offset: torch.mean of the absmax values.
  double sum = 0;
  for (uint64_t b = 0; b < nabs; ++b) sum += absmax[b];
  out->offset = nabs ? float(sum / double(nabs)) : 0.0f;
  // 3. Second level: absmax - offset, blocks of 256 over the dynamic map.
  out->absmax_codes.assign(nabs, 0);
  out->nested_absmax.assign(nnest, 0.0f);
  std::vector<float> centered(nabs);
  for (uint64_t b = 0; b < nabs; ++b) centered[b] = absmax[b] - out->offset;
  for (uint64_t j = 0; j < nnest; ++j) {
    const uint64_t a0 = j * nbs, a1 = a0 + nbs < nabs ? a0 + nbs : nabs;
    const float m = block_absmax(centered.data(), a0, a1, a1 - a0 == nbs ? -FLT_MAX : 0.0f);
    out->nested_absmax[j] = m;
    const float inv = 1.0f / m;
    for (uint64_t a = a0; a < a1; ++a) out->absmax_codes[a] = dynamic_map_encode(centered[a] * inv);
  }
}

}  // namespace iris::quant

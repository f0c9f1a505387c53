// Element decoders and code books shared by the CPU codecs and the CUDA kernels.
//
// Header-only; every function is IRIS_HD (host and device) and uses only bit arithmetic or
// a function-local constexpr table, so there is one definition of each value in the project.
// Tables are written as FP32 bit patterns: decimal literals would invite "improvements".
#pragma once

#include <cstdint>

#include "common/float_bits.h"

namespace iris::quant {

// OCP E2M1 (FORMATS.md 2.1): sign bit 3, exponent bits 2..1 (bias 1), mantissa bit 0:
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; 0x8 is -0. No Inf, no NaN.
IRIS_HD float e2m1_to_f32(uint8_t code) {
  const uint32_t e = (code >> 1) & 3u, m = code & 1u;
  // e = 0 is subnormal (0 or 0.5); otherwise (1 + m/2) * 2^(e-1), built from the FP32 fields.
  const uint32_t mag = e == 0 ? (m ? 0x3f000000u : 0u) : ((e + 126u) << 23) | (m << 22);
  return f32_from_bits(mag | (uint32_t(code & 8u) << 28));
}

// OCP E8M0 scale: 2^(e-127). Byte 0 is 2^-127, an FP32 subnormal, not zero.
// Byte 0xFF: NaN, as the OCP MX specification says (a NaN scale makes its block NaN).
// transformers instead computes ldexp(x, 128) (+-Inf for |x| >= 1); iris follows the
// specification. No checkpoint seen stores 0xFF (the fixtures have none), and the encoders
// of quant/ write it only for blocks that contain NaN or Inf.
IRIS_HD float e8m0_to_f32(uint8_t e) {
  if (e == 0xffu) return f32_from_bits(kCanonicalNanBits);
  return f32_from_bits(e == 0 ? 0x00400000u : uint32_t(e) << 23);
}

// FP8 E4M3 "fn" (FORMATS.md 4.1): bias 7, subnormals m * 2^-9, 0x7F/0xFF NaN, no Inf.
// Max finite 448 (0x7E).
IRIS_HD float e4m3_to_f32(uint8_t b) {
  const uint32_t s = uint32_t(b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return f32_from_bits(s | kCanonicalNanBits);
  // Subnormal m * 2^-9: exact in FP32 (a small integer times a power of two).
  if (e == 0) return f32_from_bits(s | f32_bits(float(m) * 0.001953125f));
  return f32_from_bits(s | ((e + 120u) << 23) | (m << 20));
}

// bitsandbytes NF4 code book (FORMATS.md 3.1), its FP32 constants verbatim (they equal the
// `quant_map` tensor bnb stores; tests/quant checks that against the fixture).
IRIS_HD float nf4_to_f32(uint8_t code) {
  static constexpr uint32_t kBits[16] = {0xbf800000u, 0xbf3239b1u, 0xbf066b30u, 0xbeca32a0u, 0xbe91a24du, 0xbe3d353fu,
                                         0xbdba7871u, 0x00000000u, 0x3da2faffu, 0x3e24cae3u, 0x3e7c04ddu, 0x3ead033au,
                                         0x3ee1a4b8u, 0x3f1007abu, 0x3f3913b3u, 0x3f800000u};
  return f32_from_bits(kBits[code & 15u]);
}

// The NF4 decision thresholds of bitsandbytes' dQuantizeNF4 (csrc/kernels.cu), the same
// float literals it compiles: threshold i (0..14) separates code i from code i + 1, and a
// value x takes code i + 1 only if x > threshold(i) (strict: a value on a midpoint takes the
// lower code; NaN exceeds nothing and takes code 0).
IRIS_HD float nf4_threshold(int i) {
  switch (i) {
    case 0: return -0.8480964004993439f;
    case 1: return -0.6106329262256622f;
    case 2: return -0.4599952697753906f;
    case 3: return -0.33967943489551544f;
    case 4: return -0.23460740596055984f;
    case 5: return -0.13791173323988914f;
    case 6: return -0.045525018125772476f;
    case 7: return 0.03979014977812767f;
    case 8: return 0.1202552504837513f;
    case 9: return 0.2035212516784668f;
    case 10: return 0.2920137718319893f;
    case 11: return 0.3893125355243683f;
    case 12: return 0.5016634166240692f;
    case 13: return 0.6427869200706482f;
    default: return 0.8614784181118011f;
  }
}

// bitsandbytes FP4 code book (get_4bit_type("fp4")): [0, 0.0625, 8, 12, 4, 6, 2, 3] / 12 and
// negatives (code bit 3 = sign), the values of its CUDA dequantizer dDequantizeFP4Tree.
// Code 8 is -0 here, as that kernel computes it (0 * absmax * -1); the `quant_map` tensor bnb
// stores holds +0 at index 8 (Python's `-0` is the integer 0). Codecs use whichever table
// they are given; the two differ only in the sign of a decoded zero.
IRIS_HD float bnb_fp4_to_f32(uint8_t code) {
  static constexpr uint32_t kBits[8] = {0x00000000u, 0x3baaaaabu, 0x3f2aaaabu, 0x3f800000u,
                                        0x3eaaaaabu, 0x3f000000u, 0x3e2aaaabu, 0x3e800000u};
  return f32_from_bits(kBits[code & 7u] | (uint32_t(code & 8u) << 28));
}

// The 256-entry signed dynamic map of bitsandbytes' double quantization
// (create_dynamic_map(signed=True)), sorted ascending, exactly as stored in checkpoints'
// `nested_quant_map` (copied from tests/data/fixtures/llama-nf4-dq; tests/quant compares).
// Not symmetric: +1.0 (index 255) exists, -1.0 does not; index 127 is 0.
IRIS_HD float dynamic_map_value(uint8_t i) {
  static constexpr uint32_t kBits[256] = {
    0xbf7e3333u, 0xbf7a999au, 0xbf770000u, 0xbf736666u, 0xbf6fcccdu, 0xbf6c3333u, 0xbf68999au, 0xbf650000u,
    0xbf616666u, 0xbf5dcccdu, 0xbf5a3333u, 0xbf56999au, 0xbf530000u, 0xbf4f6666u, 0xbf4bcccdu, 0xbf483333u,
    0xbf44999au, 0xbf410000u, 0xbf3d6666u, 0xbf39cccdu, 0xbf363334u, 0xbf32999au, 0xbf2f0000u, 0xbf2b6666u,
    0xbf27cccdu, 0xbf243334u, 0xbf20999au, 0xbf1d0000u, 0xbf196666u, 0xbf15cccdu, 0xbf123334u, 0xbf0e999au,
    0xbf0b0000u, 0xbf076666u, 0xbf03ccccu, 0xbf003333u, 0xbef93332u, 0xbef20000u, 0xbeeaccccu, 0xbee3999au,
    0xbedc6666u, 0xbed53333u, 0xbece0000u, 0xbec6ccccu, 0xbebf999au, 0xbeb86666u, 0xbeb13333u, 0xbeaa0000u,
    0xbea2ccccu, 0xbe9b999au, 0xbe946666u, 0xbe8d3334u, 0xbe860000u, 0xbe7d9999u, 0xbe6f3333u, 0xbe60cccdu,
    0xbe526666u, 0xbe440000u, 0xbe35999au, 0xbe273333u, 0xbe18cccdu, 0xbe0a6666u, 0xbdf80000u, 0xbddb3334u,
    0xbdc9eb85u, 0xbdc428f7u, 0xbdbe6667u, 0xbdb8a3d7u, 0xbdb2e148u, 0xbdad1eb8u, 0xbda75c2au, 0xbda1999au,
    0xbd9bd70au, 0xbd96147bu, 0xbd9051ebu, 0xbd8a8f5du, 0xbd84cccdu, 0xbd7e147bu, 0xbd728f5du, 0xbd670a3du,
    0xbd5b851fu, 0xbd500000u, 0xbd447ae1u, 0xbd38f5c3u, 0xbd2d70a3u, 0xbd21eb85u, 0xbd166667u, 0xbd0ae148u,
    0xbcfeb852u, 0xbce7ae15u, 0xbcd0a3d7u, 0xbcb9999au, 0xbca28f5du, 0xbc8b851fu, 0xbc68f5c3u, 0xbc3ae148u,
    0xbc1f3b64u, 0xbc160418u, 0xbc0ccccdu, 0xbc039581u, 0xbbf4bc6au, 0xbbe24dd3u, 0xbbcfdf3bu, 0xbbbd70a4u,
    0xbbab020du, 0xbb989374u, 0xbb8624ddu, 0xbb676c8au, 0xbb428f5cu, 0xbb1db22du, 0xbaf1a9fcu, 0xbaa7ef9du,
    0xba7765ffu, 0xba59e83eu, 0xba3c6a80u, 0xba1eecc1u, 0xba016f01u, 0xb9c7e283u, 0xb98ce705u, 0xb923d70bu,
    0xb8ba1f4bu, 0xb88aefb3u, 0xb8378034u, 0xb7b24206u, 0xb70205ffu, 0xb65a1a94u, 0xb513a3b7u, 0x00000000u,
    0x3513a3b7u, 0x365a1a94u, 0x370205ffu, 0x37b24206u, 0x38378034u, 0x388aefb3u, 0x38ba1f4bu, 0x3923d70bu,
    0x398ce705u, 0x39c7e283u, 0x3a016f01u, 0x3a1eecc1u, 0x3a3c6a80u, 0x3a59e83eu, 0x3a7765ffu, 0x3aa7ef9du,
    0x3af1a9fcu, 0x3b1db22du, 0x3b428f5cu, 0x3b676c8au, 0x3b8624ddu, 0x3b989374u, 0x3bab020du, 0x3bbd70a4u,
    0x3bcfdf3bu, 0x3be24dd3u, 0x3bf4bc6au, 0x3c039581u, 0x3c0ccccdu, 0x3c160418u, 0x3c1f3b64u, 0x3c3ae148u,
    0x3c68f5c3u, 0x3c8b851fu, 0x3ca28f5du, 0x3cb9999au, 0x3cd0a3d7u, 0x3ce7ae15u, 0x3cfeb852u, 0x3d0ae148u,
    0x3d166667u, 0x3d21eb85u, 0x3d2d70a3u, 0x3d38f5c3u, 0x3d447ae1u, 0x3d500000u, 0x3d5b851fu, 0x3d670a3du,
    0x3d728f5du, 0x3d7e147bu, 0x3d84cccdu, 0x3d8a8f5du, 0x3d9051ebu, 0x3d96147bu, 0x3d9bd70au, 0x3da1999au,
    0x3da75c2au, 0x3dad1eb8u, 0x3db2e148u, 0x3db8a3d7u, 0x3dbe6667u, 0x3dc428f7u, 0x3dc9eb85u, 0x3ddb3334u,
    0x3df80000u, 0x3e0a6666u, 0x3e18cccdu, 0x3e273333u, 0x3e35999au, 0x3e440000u, 0x3e526666u, 0x3e60cccdu,
    0x3e6f3333u, 0x3e7d9999u, 0x3e860000u, 0x3e8d3334u, 0x3e946666u, 0x3e9b999au, 0x3ea2ccccu, 0x3eaa0000u,
    0x3eb13333u, 0x3eb86666u, 0x3ebf999au, 0x3ec6ccccu, 0x3ece0000u, 0x3ed53333u, 0x3edc6666u, 0x3ee3999au,
    0x3eeaccccu, 0x3ef20000u, 0x3ef93332u, 0x3f003333u, 0x3f03ccccu, 0x3f076666u, 0x3f0b0000u, 0x3f0e999au,
    0x3f123334u, 0x3f15cccdu, 0x3f196666u, 0x3f1d0000u, 0x3f20999au, 0x3f243334u, 0x3f27cccdu, 0x3f2b6666u,
    0x3f2f0000u, 0x3f32999au, 0x3f363334u, 0x3f39cccdu, 0x3f3d6666u, 0x3f410000u, 0x3f44999au, 0x3f483333u,
    0x3f4bcccdu, 0x3f4f6666u, 0x3f530000u, 0x3f56999au, 0x3f5a3333u, 0x3f5dcccdu, 0x3f616666u, 0x3f650000u,
    0x3f68999au, 0x3f6c3333u, 0x3f6fcccdu, 0x3f736666u, 0x3f770000u, 0x3f7a999au, 0x3f7e3333u, 0x3f800000u
  };
  return f32_from_bits(kBits[i]);
}

}  // namespace iris::quant

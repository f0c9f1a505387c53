// <immintrin.h> for quant/*.cpp's intrinsics, where simd.h's IRIS_X86_INTRINSICS allows them.
// GCC 12's AVX-512 headers (which immintrin.h includes) trip -Wuninitialized on their own
// "undefined vector" idiom (GCC bug 105593, fixed in GCC 13): silenced for those headers only.
#pragma once

#include "quant/simd.h"

#ifdef IRIS_X86_INTRINSICS
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

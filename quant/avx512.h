// The AVX-512 intrinsics for quant/*.cpp, where simd.h's IRIS_X86_INTRINSICS allows them.
#pragma once

#include "quant/simd.h"

#ifdef IRIS_X86_INTRINSICS
// GCC 12's AVX-512 headers trip -Wuninitialized on their own "undefined vector" idiom (GCC
// bug 105593, fixed in GCC 13): silenced for those headers' lines only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

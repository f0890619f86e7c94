#pragma once
// What qdot_kernels.h uses, included by qdot_<level>.cpp before its target region, so that no inline
// function outside the kernels is compiled for one SIMD level and then shared with another at link time.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "mo/formats/ggml_types.h"
#include "mo/formats/gguf_blocks.h"
#include "mo/formats/k_scales.h"
#include "qdot.h"

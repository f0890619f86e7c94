#pragma once
// A region of code compiled for an instruction set the rest of the build does not assume (chosen at run
// time). GCC takes `#pragma GCC target`; clang ignores that pragma and needs the target attribute on
// each function, which `#pragma clang attribute` applies to every function declared in the region.
#define MO_SIMD_STR(...) #__VA_ARGS__
#if defined(__clang__)
#define MO_SIMD_TARGET_PUSH(features) _Pragma(MO_SIMD_STR(clang attribute push(__attribute__((target(features))), apply_to = function)))
#define MO_SIMD_TARGET_POP _Pragma("clang attribute pop")
#else
#define MO_SIMD_TARGET_PUSH(features) _Pragma("GCC push_options") _Pragma(MO_SIMD_STR(GCC target(features)))
#define MO_SIMD_TARGET_POP _Pragma("GCC pop_options")
#endif

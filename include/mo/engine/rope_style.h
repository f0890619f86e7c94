#pragma once
// Kept apart from weights.h so the CUDA sources (compiled as C++17) can include backend.h.
namespace mo::engine {

// How RoPE pairs the dimensions of a head: `normal` rotates (2i, 2i+1) — GGUF Llama, whose Q/K rows
// were permuted at conversion; `neox` rotates (i, i + d/2) — HF checkpoints and Qwen2.
enum class RopeStyle { normal, neox };

}  // namespace mo::engine

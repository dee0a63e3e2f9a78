// Internal to kernels/attention: the launch description the host dispatcher fills and the
// launchers (one per kernel family, each in its own .cu) consume. Plain data, no kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <iterator>

#include "attention/attention.hpp"

namespace tlb::attn {

// Tile shapes compiled for the fp16/bf16 mma.sync kernel: query rows per block, warps, keys per
// tile. Each warp owns 16 or 32 query rows (one or two m16 tiles).
enum class TileShape : int {
  q128w8,  // 128 rows, 8 warps x 16 rows, Q fragments held in registers, 64-key tiles (32 at
           // head_dim 64, where two blocks share an SM)
  q128w4,  // 128 rows, 4 warps x 32 rows, Q re-read from shared memory, 32-key tiles
  q64w4,   // 64 rows, 4 warps x 16 rows, Q in registers: more blocks for small batch*heads
  short64,   // 64 rows, 4 warps, one 64-key tile holds every key (seq <= 64)
  short128,  // 64 rows, 4 warps, one 128-key tile holds every key (seq <= 128)
};

enum class Family : int {
  mma16,    // fp16/bf16 on mma.sync m16n8k16
  tf32,     // fp32 storage on mma.sync m16n8k8 tf32
  fp32fma,  // fp32 storage, plain FMA (the `ieee` mode)
};

// Everything a kernel reads. Offsets are 64-bit: batch*heads*seq*head_dim may pass 2^31.
struct FlashParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  int64_t batch = 1, heads = 1, seq = 1;
  int head_dim = 64;                 // columns of q, k, v and o per head (<= the compiled width)
  int mask = 0;                      // MaskKind
  const int* valid_lens = nullptr;   // device, padding only
  float scale_log2 = 1.0f;           // softmax scale times log2(e): exponentials are exp2
  int splits = 1;                    // key ranges; > 1 writes partials instead of o
  int64_t keys_per_split = 0;        // a multiple of the kernel's key tile
  float* o_part = nullptr;           // [splits, batch*heads, seq, head_dim], unnormalised
  float* ml_part = nullptr;          // [splits, batch*heads, seq, 2]: (max*scale_log2, sum)
  int* item_counter = nullptr;       // persistent sm90 grid: {items claimed, producers done}, zero
                                     // between launches (the grid's last producer resets it)
};

// The sm_90a kernel's block shape: query rows (64 per consumer warpgroup) and keys per tile.
struct Sm90Tile {
  int q_rows, kv_cols;
};

struct FlashLaunch {
  Family family = Family::mma16;
  TileShape tile = TileShape::q128w8;  // mma16 only
  bool persistent = false;             // sm90 only: one block per SM walks the work items
  Sm90Tile sm90{};                     // sm90 only: the block shape (sm90_tile's or sm90_tile_tf32's)
  bool fma_exp = false;                // sm90 fp16/bf16 only: some exponentials on the FMA pipe
                                       // (widths where sm90_fma_exp_every > 0)
  void* v_transposed = nullptr;        // sm90 tf32 only: V^T, see tf32_v_keys
  DType dtype = DType::fp16;
  FlashParams p;  // p.head_dim picks the compiled width
};

// Launchers (TLB_LAUNCH_CHECK after each launch). attention_flash.cu:
void launch_flash_mma16(const FlashLaunch& l, cudaStream_t stream);
// Merges split-KV partials into o (any dtype). attention_flash.cu:
void launch_flash_combine(const FlashLaunch& l, cudaStream_t stream);
// attention_fwd_sm90.cu: the warp-specialised TMA kernel (sm_90a) for fp16/bf16, any head_dim
// that is a multiple of 8 up to 256, its block shape from sm90_tile. Only where
// flash_sm90_image_present() (an sm_90 device running the sm_90a image).
void launch_flash_sm90(const FlashLaunch& l, cudaStream_t stream);
bool flash_sm90_image_present();
// attention_flash_sm90.cu: the q128w8 tile on sm_90a warpgroup MMA (same rows, keys and
// split-KV partials, so the plan and workspace do not change). Only where
// flash_wgmma_image_present() (an sm_90 device running the sm_90a image).
void launch_flash_wgmma(const FlashLaunch& l, cudaStream_t stream);
bool flash_wgmma_image_present();
// attention_fwd_sm90_tf32.cu: the same kernel in tf32 (fp32 storage) at any head_dim up to
// 128 (widths of 32, 64, 96 and 128), its block shape from sm90_tile_tf32: V transposed into
// l.v_transposed first, then the kernel.
// Only where flash_sm90_image_present().
void launch_flash_sm90_tf32(const FlashLaunch& l, cudaStream_t stream);
// attention_flash_fp32.cu:
void launch_flash_tf32(const FlashLaunch& l, cudaStream_t stream);
void launch_flash_fp32fma(const FlashLaunch& l, cudaStream_t stream);

// The cp.async kernels (fp16/bf16 on mma.sync, fp32 in tf32 on mma.sync and in ieee on FMA)
// compile head widths 64 and 128, and fp16/bf16 also 256. A narrower head that is a multiple
// of 8 runs on the width at or above it: its loads zero-fill the missing columns (zeros add
// nothing to Q K^T, and P V's extra columns are never stored), its rows keep their own stride,
// and its stores stop at its last column. Its products stop at the head too, to the step each
// kernel takes (16 columns on mma.sync, 8 in tf32, 32 on FMA), so a head of 80 costs about what
// one of 80 or 96 would; loads and shared memory stay the width's. The 16-bit narrow heads run
// the two standard tiles the dispatcher picks (q128w8, q64w4), not q128w4 or the
// short-sequence kernel; heads over 128 run q64w4 alone (at 256 columns, O takes 128 registers
// a thread and 32-key tiles keep the block in 96 KB, which every sm_80+ part gives a block).
constexpr bool portable_head_dim_ok(int64_t head_dim) { return head_dim >= 8 && head_dim <= 128 && head_dim % 8 == 0; }
constexpr bool mma16_head_dim_ok(int64_t head_dim) { return head_dim >= 8 && head_dim <= 256 && head_dim % 8 == 0; }
constexpr int portable_width(int64_t head_dim) { return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256; }
// The FMA kernel (`ieee`) also compiles width 96: its loads, shared memory and register tiles
// are the width's, so heads of 72-96 columns do a quarter less of that than on width 128.
constexpr int fma_width(int64_t head_dim) { return head_dim <= 64 ? 64 : head_dim <= 96 ? 96 : 128; }

// Query rows and keys per block of each kernel: the dispatcher's split and workspace
// arithmetic and the kernels must agree on them. `width`: the compiled head width.
constexpr int tile_q_rows(Family f, TileShape t) {
  if (f != Family::mma16) return 64;
  return (t == TileShape::q128w8 || t == TileShape::q128w4) ? 128 : 64;
}
constexpr int tile_kv_cols(Family f, TileShape t, int width) {
  if (f == Family::fp32fma) return 64;
  if (f != Family::mma16) return 32;
  if (t == TileShape::short128) return 128;
  if (t == TileShape::q128w4 || (t == TileShape::q128w8 && width == 64) || width > 128) return 32;
  return 64;
}

// The warp-specialised sm_90a kernel: the width it compiles a head_dim to, and per width and
// mask its query rows (64 per consumer warpgroup) and keys per tile. A head runs on the
// narrowest compiled width at or above it; TMA fills its missing columns with zeros. Shared
// memory holds heads in 64-column blocks (one 128-byte swizzle row each), so widths 32, 80 and
// 96 keep the layout of 64 or 128 but their MMAs stop at their own width: a head of 80 costs
// 5/8 of a head of 128, not the whole of it. Registers bound the key tile: S (kv_cols / 2), P
// (kv_cols / 4) and O (width / 2) fp32 registers per thread stay live together, within the 240
// (two consumers) or 160 (three) a consumer thread gets. Shared memory (Q plus the K/V stages)
// bounds it too: 208 KB at 128 x 176, 224 KB at 256 x 80, 120 KB at 64 x 128 with three stages.
constexpr bool sm90_head_dim_ok(int64_t head_dim) { return head_dim >= 8 && head_dim <= 256 && head_dim % 8 == 0; }
// The compiled widths, ascending: each has its attention_fwd_sm90_d<width>.cu and its entry in
// launch_flash_sm90's table, which checks that it lists these.
inline constexpr int kSm90Widths[] = {32, 64, 80, 96, 128, 192, 256};
constexpr int sm90_width(int64_t head_dim) {
  for (int w : kSm90Widths)
    if (head_dim <= w) return w;
  return kSm90Widths[std::size(kSm90Widths) - 1];
}
constexpr int sm90_layout_width(int width) { return (width + 63) / 64 * 64; }
constexpr Sm90Tile sm90_tile(int64_t head_dim, bool causal) {
  switch (sm90_layout_width(sm90_width(head_dim))) {
    case 64: return {192, 128};                                   // three consumers
    case 128: return causal ? Sm90Tile{128, 128} : Sm90Tile{128, 176};  // causal: tiles on the diagonal
    case 192: return {128, 112};
    default: return {128, 80};
  }
}
// tf32 (4-byte elements): wgmma reads both operands of P V K-major only, so V goes through a
// workspace as V^T, [batch*heads][head_dim][keys rounded up to 8], zeros past seq, the keys of
// each group of 8 in tf32_v_position's order (attention_tile.cuh). Tiles hold half the
// elements a 16-bit tile does in the same shared memory, and P takes a register per element:
// 128 x 128 at widths 32 and 64 (Q 16 / 32 KiB, three stages of K and V^T at 16 / 32 KiB
// each), 128 x 64 at 96 and 128 (Q 48 / 64 KiB, three stages of 24 KiB / two of 32 KiB).
// Compiled at every 32 columns (a TMA box's width, 128 bytes): a head runs on the width at or
// above it, its missing columns TMA's zero fill of a box that still holds some of the head, so
// every multiple of 8 up to 128 runs here.
constexpr bool sm90_tf32_head_dim_ok(int64_t head_dim) { return portable_head_dim_ok(head_dim); }
constexpr int sm90_tf32_width(int64_t head_dim) { return static_cast<int>((head_dim + 31) / 32 * 32); }
constexpr Sm90Tile sm90_tile_tf32(int64_t head_dim) { return head_dim <= 64 ? Sm90Tile{128, 128} : Sm90Tile{128, 64}; }
constexpr int64_t tf32_v_keys(int64_t seq) { return (seq + 7) / 8 * 8; }

// The tile above is tuned on long sequences. On a short one the last key tile can be mostly
// past seq and still costs a whole tile of MMAs: 257 keys in tiles of 128 compute 384. Heads of
// layout width 64 without the causal mask also compile 128 rows x 144 keys (two consumers: S of
// 144 keys fits their registers, not three's), which takes 257 keys in two tiles (288); a
// sequence runs on it where it computes fewer keys than the long tile.
inline constexpr Sm90Tile kSm90ShortKeysTile{128, 144};
constexpr bool sm90_has_short_keys_tile(int64_t head_dim, bool causal) {
  return !causal && sm90_layout_width(sm90_width(head_dim)) == 64;
}
constexpr Sm90Tile sm90_tile(int64_t head_dim, bool causal, int64_t seq) {
  const Sm90Tile t = sm90_tile(head_dim, causal);
  if (!sm90_has_short_keys_tile(head_dim, causal)) return t;
  auto computed = [seq](int kv_cols) { return (seq + kv_cols - 1) / kv_cols * kv_cols; };
  return computed(kSm90ShortKeysTile.kv_cols) < computed(t.kv_cols) ? kSm90ShortKeysTile : t;
}

// The special-function unit issues 16 exponentials a clock per SM, the tensor cores 4096 16-bit
// FLOPs: per query row and key, a head of width w costs 4w FLOPs of MMA (w / 1024 clocks) and
// one exponential (1 / 16). At width 64 the two are equal, at 32 the exponentials take twice
// as long, so the compiled widths up to 64 also build a kernel that moves every
// sm90_fma_exp_every-th 8-key column of each tile to the FMA pipe (exp2_fma in
// attention_tile.cuh, about 8 of its 128 instructions a clock each): a quarter at 64, a third
// at 32, leaving the FMA pipe (about 3.5 instructions an exponential besides) below the unit
// on paper. Measured on an H100 it lost 13 % at 64 and 20 % at 32 (results/perf-log.md,
// 2026-12-08): an opt-in ("fmaexp"), not the default. 0: the width has no such kernel.
constexpr int sm90_fma_exp_every(int width) { return width <= 32 ? 3 : width <= 64 ? 4 : 0; }

}  // namespace tlb::attn

// Host side of the fused attention: which shapes the kernels cover, which variant runs a shape
// (kernel family, tile shape, short-sequence single tile, split-KV and its number of key
// ranges), the workspace that variant needs, and the launch. The plan is a pure function of the
// shape and of the engine: on an sm_90 GPU running the sm_90a image fp16/bf16 run the
// warp-specialised TMA kernel (attention_fwd_sm90.cuh), elsewhere the mma.sync tiles. Memory
// planning, which must not touch the device, sizes the workspace for the larger of the two.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "attention/attention.hpp"
#include "attention/attention_kernels.hpp"
#include "common/cuda_check.hpp"
#include "common/device_caps.hpp"
#include "common/stream_scratch.hpp"

namespace tlb {
namespace {

using attn::Family;
using attn::TileShape;

// The split-KV decision needs the machine's size, but workspace planning must not touch the
// device: plan for the H100/H200 SXM part (132 SMs). On a smaller GPU the same split only
// over-subscribes a little.
constexpr int64_t kPlanningSms = 132;
// Warps per SM the kernels are sized for (one 8-warp block, or two 4-warp blocks).
constexpr int64_t kWarpsPerSm = 8;
constexpr int kMaxSplits = 16;
// A split below this many key tiles spends more on its partial write and the combine than it
// gains in parallelism.
constexpr int64_t kMinTilesPerSplit = 4;
// The TMA kernel's items of at most this many key tiles (causal ones: on average) run on a
// persistent grid.
constexpr int64_t kPersistentMaxTiles = 16;
// Sequences up to this length fit one key tile of the short-sequence kernel.
constexpr int64_t kShortSeqMax = 128;
std::string_view tile_name(TileShape t) {
  switch (t) {
    case TileShape::q128w8: return "q128w8";
    case TileShape::q128w4: return "q128w4";
    case TileShape::q64w4:
    case TileShape::short64:
    case TileShape::short128: return "q64w4";
  }
  return "?";
}
int tile_warps(Family f, TileShape t) { return f == Family::mma16 && t == TileShape::q128w8 ? 8 : 4; }

enum class Variant { automatic, standard, short_seq, split_kv };
// The engines of the fp16/bf16 kernels: the warp-specialised TMA kernel ("tma",
// attention_fwd_sm90.cuh, the automatic choice on Hopper), the first sm_90a kernel ("wgmma",
// attention_flash_sm90.cu: the q128w8 tile on wgmma, loads by every thread, 64-key tiles; only
// where a spec asks for it) and the mma.sync tiles ("mma", everywhere else).
enum class Engine { automatic, tma, wgmma, mma };

// A parsed variant spec (see attention.hpp).
struct Spec {
  Variant variant = Variant::automatic;
  int splits = 0;  // split_kv: 0 lets the dispatcher choose
  bool has_tile = false;
  TileShape tile = TileShape::q128w8;
  Engine engine = Engine::automatic;
  enum class Grid { automatic, persistent, tiles } grid = Grid::automatic;  // the TMA kernel's
  bool long_tile = false;  // the TMA kernel on its long-sequence tile whatever seq is
  // The TMA kernel's exponentials: some on the FMA pipe ("fmaexp") or all on the
  // special-function unit ("mufuexp"); automatic: kFmaExpByDefault, where the width has it.
  enum class Exp { automatic, fma, mufu } exp = Exp::automatic;
};

// Whether the TMA kernel moves a share of the exponentials to the FMA pipe at the widths that
// compile it (attn::sm90_fma_exp_every), unless a spec says otherwise. Off: on an H100
// (results/perf-log.md, 2026-12-08) it cost 13 % at width 64 and 20 % at 32, the FMA pipe
// already carrying the softmax's other work.
constexpr bool kFmaExpByDefault = false;

// The widths the cp.async kernels compile; narrower heads run on them with zero-filled columns
// (attn::portable_width), except on the short-sequence kernel and the wgmma one.
bool is_sm80_head_dim(int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

Spec parse_spec(const char* text, const char* origin) {
  Spec o;
  if (text == nullptr) return o;
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view tok = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (tok.empty() || tok == "auto") continue;
    if (tok == "standard") {
      o.variant = Variant::standard;
    } else if (tok == "short") {
      o.variant = Variant::short_seq;
    } else if (tok == "splitkv") {
      o.variant = Variant::split_kv;
    } else if (tok.substr(0, 8) == "splitkv:") {
      o.variant = Variant::split_kv;
      const std::string n(tok.substr(8));
      char* end = nullptr;
      const long v = std::strtol(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || v < 2 || v > 64)
        throw std::invalid_argument(std::string(origin) + ": '" + std::string(tok) +
                                    "': the split count must be an integer in 2..64");
      o.splits = static_cast<int>(v);
    } else if (tok == "q128w8" || tok == "q128w4" || tok == "q64w4") {
      o.has_tile = true;
      o.tile = tok == "q128w8" ? TileShape::q128w8 : tok == "q128w4" ? TileShape::q128w4 : TileShape::q64w4;
    } else if (tok == "tma") {
      o.engine = Engine::tma;
    } else if (tok == "persistent" || tok == "tiles") {
      o.grid = tok == "persistent" ? Spec::Grid::persistent : Spec::Grid::tiles;
    } else if (tok == "longtile") {
      o.long_tile = true;
    } else if (tok == "fmaexp" || tok == "mufuexp") {
      o.exp = tok == "fmaexp" ? Spec::Exp::fma : Spec::Exp::mufu;
    } else if (tok == "wgmma") {
      o.engine = Engine::wgmma;
    } else if (tok == "mma") {
      o.engine = Engine::mma;
    } else {
      throw std::invalid_argument(std::string(origin) + ": unknown token '" + std::string(tok) +
                                  "' (expected auto, standard, short, splitkv, splitkv:N, q128w8, "
                                  "q128w4, q64w4, tma, wgmma, mma, persistent, tiles, longtile, fmaexp, "
                                  "mufuexp)");
    }
  }
  return o;
}

// TLBENCH_ATTN_VARIANT, parsed once.
const Spec& env_spec() {
  static const Spec o = parse_spec(std::getenv("TLBENCH_ATTN_VARIANT"), "TLBENCH_ATTN_VARIANT");
  return o;
}

struct Plan {
  Family family = Family::mma16;
  TileShape tile = TileShape::q128w8;
  Engine engine = Engine::mma;  // fp16/bf16: tma (tile from attn::sm90_tile), wgmma or mma;
                                // tf32: tma (attn::sm90_tile_tf32) or mma (its own kernel)
  bool persistent = false;      // tma: one block per SM walks the work items
  attn::Sm90Tile sm90{};        // tma: the block shape
  bool fma_exp = false;         // tma, fp16/bf16: a share of the exponentials on the FMA pipe
  bool short_seq = false;
  int splits = 1;
  int64_t keys_per_split = 0;
  uint64_t o_part_bytes = 0;     // offset of ml_part in the workspace
  uint64_t vt_offset = 0;        // tf32 on tma: where V^T starts in the workspace
  uint64_t workspace_bytes = 0;
};

uint64_t align256(uint64_t x) { return (x + 255) / 256 * 256; }

[[noreturn]] void reject(const std::string& msg) { throw std::invalid_argument("flash attention: " + msg); }

// Whether the current device runs the sm_90a kernels: an sm_90 GPU, and a build carrying
// sm_90a code (asked once: every sm_90 device runs the same image). No device at all is a
// plain "no".
bool device_has_sm90a() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const DeviceCaps& caps = device_caps();
  if (caps.major != 9 || caps.minor != 0) return false;
  static const bool images = attn::flash_sm90_image_present() && attn::flash_wgmma_image_present();
  return images;
}

// The engine a spec leaves for this shape. strict: an engine that cannot run it throws;
// otherwise (the environment's spec) it is dropped.
Engine resolve_engine(const Spec& spec, Family family, int64_t head_dim, bool sm90a, bool strict) {
  // A tile shape names one of the mma.sync kernel's tiles (or, with "wgmma", the first sm_90a
  // kernel's): it asks for that engine; "fmaexp" asks for the TMA kernel, the one that has it.
  Engine e = spec.engine;
  if (e == Engine::automatic && family == Family::mma16) {
    if (spec.has_tile) e = Engine::mma;
    else if (spec.exp == Spec::Exp::fma) e = Engine::tma;
  }
  std::string no;
  if (e == Engine::wgmma && family != Family::mma16) {
    no = "the wgmma kernel is fp16/bf16 only";
  } else if (e == Engine::tma && family == Family::fp32fma) {
    no = "the tma kernel runs fp16, bf16 and tf32, not fp32 ieee";
  } else if (e == Engine::tma && family == Family::tf32 && !attn::sm90_tf32_head_dim_ok(head_dim)) {
    no = "the tma kernel runs tf32 at head_dim up to 128 (multiples of 8), not " + std::to_string(head_dim);
  } else if ((e == Engine::tma || e == Engine::wgmma) && !sm90a) {
    no = "the sm_90a kernels need an sm_90 GPU and a build with sm_90a code";
  } else if (e == Engine::wgmma && family == Family::mma16 && !is_sm80_head_dim(head_dim)) {
    no = "the wgmma kernel covers head_dim 64 and 128, not " + std::to_string(head_dim);
  } else if (e == Engine::mma && family == Family::mma16 && !attn::mma16_head_dim_ok(head_dim)) {
    no = "the mma.sync kernel covers head_dim up to 256 (multiples of 8), not " + std::to_string(head_dim);
  }
  if (no.empty()) return e;
  if (strict) reject(no);
  return Engine::automatic;
}

// strict (a spec forced by the caller): a part of the spec that cannot run the shape throws.
// Otherwise (the environment's spec) such parts are dropped for this shape. sm90a: the device
// runs the sm_90a kernels.
Plan plan_variant(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim, MaskKind mask, DType dtype,
                  Fp32Math math, const Spec& spec, bool strict, bool sm90a) {
  Plan plan;
  plan.family = dtype != DType::fp32 ? Family::mma16 : math == Fp32Math::tf32 ? Family::tf32 : Family::fp32fma;
  const int64_t bh = batch * heads;
  const bool half = plan.family == Family::mma16;
  const Engine engine = resolve_engine(spec, plan.family, head_dim, sm90a, strict);
  const bool sm90_engine = engine == Engine::tma || engine == Engine::wgmma;
  Variant variant = spec.variant;

  const bool short_fits = half && seq <= kShortSeqMax && is_sm80_head_dim(head_dim);
  if (variant == Variant::short_seq && (sm90_engine || !short_fits)) {
    if (strict)
      reject(sm90_engine ? std::string("the short-sequence kernel runs on mma.sync, not the sm_90a kernels")
             : !half ? std::string("the short-sequence variant is fp16/bf16 only (fp32 tiles are 32 keys)")
             : !is_sm80_head_dim(head_dim)
                 ? "the short-sequence kernel covers head_dim 64 and 128, not " + std::to_string(head_dim)
                 : "the short-sequence variant needs seq <= " + std::to_string(kShortSeqMax) + ", got " +
                       std::to_string(seq));
    variant = Variant::automatic;
  }
  // Left to the dispatcher, a standard launch may still be split (few blocks, long keys).
  const bool auto_split = variant == Variant::automatic;
  if (variant == Variant::automatic) variant = short_fits && !sm90_engine ? Variant::short_seq : Variant::standard;

  const std::string no_fma_exp = "fmaexp is the tma kernel's, in fp16/bf16 at head_dim up to 64";
  const std::string no_grid = "persistent, tiles and longtile are the tma kernel's";
  if (variant == Variant::short_seq) {
    if (spec.exp == Spec::Exp::fma && strict) reject(no_fma_exp);
    if ((spec.grid != Spec::Grid::automatic || spec.long_tile) && strict) reject(no_grid);
    plan.short_seq = true;
    plan.tile = seq <= 64 ? TileShape::short64 : TileShape::short128;
    return plan;
  }

  // Standard tile. On Hopper the TMA kernel, whose tile follows the head (attn::sm90_tile), one
  // block per SM. Elsewhere 128 query rows per block share each K/V tile's shared-memory traffic
  // among as many rows as fit; with few blocks in flight, 64-row tiles double the blocks.
  // tf32 takes the TMA kernel on Hopper at the widths it compiles, its mma.sync kernel elsewhere.
  const bool tma_family = half || (plan.family == Family::tf32 && attn::sm90_tf32_head_dim_ok(head_dim));
  if (tma_family) plan.engine = engine == Engine::automatic ? (sm90a ? Engine::tma : Engine::mma) : engine;
  const bool tma = tma_family && plan.engine == Engine::tma;
  // A head narrower than the mma.sync kernel's width runs its two standard tiles only, one
  // over 128 columns the q64w4 tile alone (attn::portable_width).
  const bool narrow_mma = half && plan.engine == Engine::mma && !is_sm80_head_dim(head_dim);
  const bool wide_mma = half && plan.engine == Engine::mma && head_dim > 128;
  const bool tile_runs =
      wide_mma ? spec.tile == TileShape::q64w4 : !(narrow_mma && spec.tile == TileShape::q128w4);
  if (spec.has_tile && strict) {
    if (!half) reject("tile shapes are fp16/bf16 only; fp32 runs 64-row tiles of 32 (tf32) or 64 (ieee) keys");
    if (tma) reject("the tma kernel's tile follows the head_dim; it takes no tile shape");
    if (plan.engine == Engine::wgmma && spec.tile != TileShape::q128w8)
      reject("the wgmma kernel runs the 128-row tile only (q128w8's shape)");
    if (!tile_runs)
      reject("head_dim " + std::to_string(head_dim) +
             (wide_mma ? " runs the q64w4 tile only" : " runs the q128w8 and q64w4 tiles, not q128w4"));
  }
  int q_rows = 0, kv_cols = 0;
  int64_t slots = 0;  // blocks the GPU runs at once
  if ((spec.grid != Spec::Grid::automatic || spec.long_tile) && !tma && strict) reject(no_grid);
  const bool fma_exp_runs = tma && half && attn::sm90_fma_exp_every(attn::sm90_width(head_dim)) > 0;
  if (spec.exp == Spec::Exp::fma && !fma_exp_runs && strict) reject(no_fma_exp);
  plan.fma_exp = fma_exp_runs && (spec.exp == Spec::Exp::fma || (spec.exp == Spec::Exp::automatic && kFmaExpByDefault));
  if (tma) {
    const bool causal = mask == MaskKind::causal;
    plan.sm90 = !half           ? attn::sm90_tile_tf32(head_dim)
                : spec.long_tile ? attn::sm90_tile(head_dim, causal)
                                 : attn::sm90_tile(head_dim, causal, seq);
    q_rows = plan.sm90.q_rows;
    kv_cols = plan.sm90.kv_cols;
    slots = kPlanningSms;
  } else {
    if (half) {
      if (plan.engine == Engine::wgmma) {
        plan.tile = TileShape::q128w8;
      } else if (spec.has_tile && tile_runs) {
        plan.tile = spec.tile;
      } else if (wide_mma) {
        plan.tile = TileShape::q64w4;
      } else {
        const int64_t blocks128 = bh * ((seq + 127) / 128);
        plan.tile = blocks128 < kPlanningSms ? TileShape::q64w4 : TileShape::q128w8;
      }
    }
    q_rows = attn::tile_q_rows(plan.family, plan.tile);
    kv_cols = attn::tile_kv_cols(plan.family, plan.tile, attn::portable_width(head_dim));
    slots = kPlanningSms * kWarpsPerSm / tile_warps(plan.family, plan.tile);
  }
  const int64_t blocks = bh * ((seq + q_rows - 1) / q_rows);
  const int64_t key_tiles = (seq + kv_cols - 1) / kv_cols;

  int splits = 1;
  if (variant == Variant::split_kv) {
    splits = spec.splits > 0
                 ? spec.splits
                 : static_cast<int>(std::clamp<int64_t>(slots / std::max<int64_t>(blocks, 1), 2, kMaxSplits));
    splits = static_cast<int>(std::min<int64_t>(splits, key_tiles));
    if (splits < 2) {
      if (strict) reject("split-KV needs at least two key tiles (seq > " + std::to_string(kv_cols) + ")");
      splits = 1;
    }
  } else if (auto_split && blocks < slots) {
    splits = static_cast<int>(std::min<int64_t>({slots / blocks, key_tiles / kMinTilesPerSplit, kMaxSplits}));
    if (splits < 2) splits = 1;
  }
  int64_t tiles_per_item = key_tiles;
  if (splits > 1) {
    // Equal whole-tile ranges, none empty.
    const int64_t tiles_per_split = (key_tiles + splits - 1) / splits;
    splits = static_cast<int>((key_tiles + tiles_per_split - 1) / tiles_per_split);
    plan.splits = splits;
    plan.keys_per_split = tiles_per_split * kv_cols;
    tiles_per_item = tiles_per_split;
  }
  if (tma) {
    // A persistent grid hides each item's start and store behind its neighbours' work, which
    // pays where items are short; on long ones a block per item measured faster (H200, 16 heads
    // of 16384 keys: 671 against 639 TFLOP/s at head_dim 128). Causal items shrink along the
    // diagonal from the whole range to one tile: their mean is what counts.
    const int64_t mean_tiles = mask == MaskKind::causal ? (tiles_per_item + 1) / 2 : tiles_per_item;
    const bool automatic = mean_tiles <= kPersistentMaxTiles;
    plan.persistent = spec.grid == Spec::Grid::automatic ? automatic : spec.grid == Spec::Grid::persistent;
  }
  return plan;
}

void size_workspace(Plan& plan, int64_t batch, int64_t heads, int64_t seq, int64_t head_dim) {
  const uint64_t bh = static_cast<uint64_t>(batch * heads);
  if (plan.splits > 1) {
    const uint64_t rows = static_cast<uint64_t>(plan.splits) * bh * static_cast<uint64_t>(seq);
    plan.o_part_bytes = align256(rows * static_cast<uint64_t>(head_dim) * 4);
    plan.workspace_bytes = plan.o_part_bytes + align256(rows * 2 * 4);
  }
  if (plan.family == Family::tf32 && plan.engine == Engine::tma) {
    plan.vt_offset = plan.workspace_bytes;
    plan.workspace_bytes += align256(bh * static_cast<uint64_t>(head_dim) * static_cast<uint64_t>(attn::tf32_v_keys(seq)) * 4);
  }
}

// "d80w128": a head of 80 columns on the kernel compiled at 128 ("d64" where they agree).
std::string head_name(int64_t head_dim, int width) {
  // Appended piece by piece: GCC 12 takes `"d" + std::to_string(...)` for an overlapping copy
  // (-Wrestrict).
  std::string name(1, 'd');
  name += std::to_string(head_dim);
  if (width != head_dim) {
    name += 'w';
    name += std::to_string(width);
  }
  return name;
}

std::string variant_name(const Plan& plan, int64_t head_dim) {
  const std::string d = std::to_string(head_dim);
  const int width = attn::portable_width(head_dim);  // the cp.async kernels' (the sm_90a one has its own)
  const std::string portable = head_name(head_dim, width);
  const int kv_cols = attn::tile_kv_cols(plan.family, plan.tile, width);
  if (plan.short_seq) return "flash_short_d" + d + "_q64_kv" + std::to_string(kv_cols);
  const std::string prefix = plan.splits > 1 ? "flash_splitkv_x" + std::to_string(plan.splits) + "_" : "flash_fwd_";
  switch (plan.family) {
    case Family::mma16:
      if (plan.engine == Engine::tma)
        return prefix + "sm90_tma_" + head_name(head_dim, attn::sm90_width(head_dim)) + "_q" +
               std::to_string(plan.sm90.q_rows) + "_kv" + std::to_string(plan.sm90.kv_cols) +
               (plan.fma_exp ? "_fmaexp" + std::to_string(attn::sm90_fma_exp_every(attn::sm90_width(head_dim))) : "") +
               (plan.persistent ? "_persistent" : "");
      if (plan.engine == Engine::wgmma) return prefix + "sm90_wgmma_d" + d + "_q128wg2_kv64";
      return prefix + "sm80_" + portable + "_" + std::string(tile_name(plan.tile)) + "_kv" + std::to_string(kv_cols);
    case Family::tf32:
      if (plan.engine == Engine::tma)
        return prefix + "sm90_tma_tf32_" + head_name(head_dim, attn::sm90_tf32_width(head_dim)) + "_q" +
               std::to_string(plan.sm90.q_rows) + "_kv" + std::to_string(plan.sm90.kv_cols) +
               (plan.persistent ? "_persistent" : "");
      return prefix + "tf32_" + portable + "_q64_kv32";
    case Family::fp32fma:
      return prefix + "fp32fma_" + head_name(head_dim, attn::fma_width(head_dim)) + "_q64_kv" + std::to_string(kv_cols);
  }
  return prefix;
}

bool shape_supported(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim, DType dtype, std::string* why) {
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (batch < 1 || heads < 1 || seq < 1 || head_dim < 1)
    return no("empty shape (batch " + std::to_string(batch) + ", heads " + std::to_string(heads) + ", seq " +
              std::to_string(seq) + ", head_dim " + std::to_string(head_dim) + ")");
  const std::string hd = "head_dim " + std::to_string(head_dim);
  // Multiples of 8 run everywhere: up to 256 in fp16/bf16, up to 128 in fp32 (on the widths
  // of attn::portable_width and, on Hopper, the sm_90a kernel's).
  if (!attn::mma16_head_dim_ok(head_dim)) return no(hd + " is not a multiple of 8 in 8..256");
  if (dtype == DType::fp32 && !attn::portable_head_dim_ok(head_dim))
    return no(hd + " is over 128, the fp32 kernels' widest head");
  // One block per (64-row query tile, batch*head) must fit the grid's x dimension; TMA takes
  // 32-bit row coordinates.
  if ((seq + 63) / 64 * batch * heads > INT32_MAX || seq > INT32_MAX) return no("batch*heads*seq too large for one launch");
  return true;
}

struct Choice {
  Plan plan;
  Spec spec;
  bool strict = false;
};

Choice choose(const AttentionArgs& a) {
  Choice c;
  c.strict = a.force != nullptr;
  c.spec = c.strict ? parse_spec(a.force, "flash attention variant spec") : env_spec();
  const bool sm90a = !(a.dtype == DType::fp32 && a.fp32_math == Fp32Math::ieee) && device_has_sm90a();
  c.plan = plan_variant(a.batch, a.heads, a.seq, a.head_dim, a.mask, a.dtype, a.fp32_math, c.spec, c.strict, sm90a);
  size_workspace(c.plan, a.batch, a.heads, a.seq, a.head_dim);
  return c;
}

}  // namespace

bool flash_attention_supported(const LayerShape& s, DType dtype, std::string* why) {
  if (s.heads < 1 || s.d_model % s.heads != 0) {
    if (why) *why = "d_model " + std::to_string(s.d_model) + " not divisible by heads " + std::to_string(s.heads);
    return false;
  }
  return shape_supported(s.batch, s.heads, s.seq, s.head_dim(), dtype, why);
}

uint64_t flash_attention_workspace_bytes(const LayerShape& s, DType dtype) {
  if (!flash_attention_supported(s, dtype, nullptr)) return 0;
  // The fp32 math mode is a run option the shape does not carry, and planning must not ask the
  // device which engine runs: plan for the largest.
  uint64_t bytes = 0;
  auto plan_for = [&](Fp32Math math, bool sm90a) {
    Plan plan = plan_variant(s.batch, s.heads, s.seq, s.head_dim(), s.mask, dtype, math, env_spec(), false, sm90a);
    size_workspace(plan, s.batch, s.heads, s.seq, s.head_dim());
    bytes = std::max(bytes, plan.workspace_bytes);
  };
  plan_for(Fp32Math::tf32, false);
  plan_for(Fp32Math::tf32, true);
  if (dtype == DType::fp32) plan_for(Fp32Math::ieee, false);
  return bytes;
}

uint64_t flash_attention_workspace_bytes(const AttentionArgs& a) {
  if (!shape_supported(a.batch, a.heads, a.seq, a.head_dim, a.dtype, nullptr)) return 0;
  return choose(a).plan.workspace_bytes;
}

std::string flash_attention_variant(const AttentionArgs& a) {
  std::string why;
  if (!shape_supported(a.batch, a.heads, a.seq, a.head_dim, a.dtype, &why)) reject(why);
  return variant_name(choose(a).plan, a.head_dim);
}

bool flash_attention_has_sm90a() { return device_has_sm90a(); }

std::string flash_attention(const AttentionArgs& a, cudaStream_t stream) {
  std::string why;
  if (!shape_supported(a.batch, a.heads, a.seq, a.head_dim, a.dtype, &why)) reject(why);
  if (!a.q || !a.k || !a.v || !a.o) reject("null q, k, v or o");
  for (const void* ptr : {a.q, a.k, a.v, static_cast<const void*>(a.o)})
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) reject("q, k, v and o must be 16-byte aligned");
  if (a.mask == MaskKind::padding && !a.valid_lens) reject("padding mask without valid_lens");
  if (!(a.scale > 0.0f) || !std::isfinite(a.scale)) reject("scale must be positive and finite");

  const Choice c = choose(a);
  const Plan& plan = c.plan;
  const std::string name = variant_name(plan, a.head_dim);
  attn::FlashLaunch l;
  l.family = plan.family;
  l.tile = plan.tile;
  l.persistent = plan.persistent;
  l.sm90 = plan.sm90;
  l.fma_exp = plan.fma_exp;
  l.dtype = a.dtype;
  l.p.q = a.q;
  l.p.k = a.k;
  l.p.v = a.v;
  l.p.o = a.o;
  l.p.batch = a.batch;
  l.p.heads = a.heads;
  l.p.seq = a.seq;
  l.p.head_dim = static_cast<int>(a.head_dim);
  l.p.mask = static_cast<int>(a.mask);
  l.p.valid_lens = a.mask == MaskKind::padding ? a.valid_lens : nullptr;
  l.p.scale_log2 = a.scale * 1.4426950408889634f;  // log2(e): the kernels use exp2
  l.p.splits = plan.splits;
  l.p.keys_per_split = plan.keys_per_split;
  if (plan.persistent) {
    l.p.item_counter = static_cast<int*>(stream_scratch(stream, ScratchUse::attention_schedule, 2 * sizeof(int)));
  }
  if (plan.workspace_bytes > 0) {
    if (!a.workspace) reject(name + " needs a workspace of " + std::to_string(plan.workspace_bytes) + " bytes");
    if (reinterpret_cast<uintptr_t>(a.workspace) % 256 != 0) reject("workspace must be 256-byte aligned");
  }
  if (plan.splits > 1) {
    l.p.o_part = static_cast<float*>(a.workspace);
    l.p.ml_part = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + plan.o_part_bytes);
  }
  if (plan.family == Family::tf32 && plan.engine == Engine::tma) l.v_transposed = static_cast<char*>(a.workspace) + plan.vt_offset;

  switch (plan.family) {
    case Family::mma16:
      if (plan.engine == Engine::tma) attn::launch_flash_sm90(l, stream);
      else if (plan.engine == Engine::wgmma) attn::launch_flash_wgmma(l, stream);
      else attn::launch_flash_mma16(l, stream);
      break;
    case Family::tf32:
      if (plan.engine == Engine::tma) attn::launch_flash_sm90_tf32(l, stream);
      else attn::launch_flash_tf32(l, stream);
      break;
    case Family::fp32fma: attn::launch_flash_fp32fma(l, stream); break;
  }
  if (plan.splits > 1) attn::launch_flash_combine(l, stream);
  return name;
}

}  // namespace tlb

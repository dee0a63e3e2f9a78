// GEMM dispatch: which shapes the hand-written GEMM covers (and why not, when it does not),
// and which kernel variant and tile a shape gets on the current device.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/device_caps.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_internal.hpp"

namespace tlb {
namespace {

using gemm_detail::FmaTile;
using gemm_detail::MmaTile;
using gemm_detail::PersistentSchedule;
using gemm_detail::WgmmaTile;

struct DeviceInfo {
  int sms = 0;
  int major = 0, minor = 0;
  bool sm90_image = false;  // the build carries sm_90a code for the wgmma kernels
  int mma_ptx = 0;          // virtual architecture of the mma.sync kernels' code
};

const DeviceInfo& device_info() {
  constexpr int kMaxDevices = 64;
  static std::array<DeviceInfo, kMaxDevices> cache{};
  static std::mutex mu;
  int dev = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  DeviceInfo& d = cache[static_cast<size_t>(dev % kMaxDevices)];
  if (d.sms == 0) {
    const DeviceCaps& caps = device_caps();
    d.major = caps.major;
    d.minor = caps.minor;
    d.sms = caps.sms;
    if (d.major >= 8) d.mma_ptx = gemm_detail::mma_image_ptx_version();
    d.sm90_image = d.major == 9 && d.minor == 0 && gemm_detail::wgmma_sm90_image_present();
  }
  return d;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

bool fail(std::string* why, std::string msg) {
  if (why) *why = std::move(msg);
  return false;
}

// Throughput model of one tile: `speed` is the tile's relative per-SM rate when the SM is
// full (bigger tiles reuse each shared-memory byte more: a 64x64-per-warp tile issues 8
// ldmatrix per 32 mma, a 32x32 one 4 per 8), `ctas_per_sm` how many CTAs fit at once
// (registers and shared memory, see gemm_mma.cu / gemm_fp32_fma.cu).
struct TileModel {
  int bm, bn, warps, ctas_per_sm;
  double speed;

  // The tiles over an M x N output, partial ones included.
  int64_t tiles(int64_t M, int64_t N) const { return ((M + bm - 1) / bm) * ((N + bn - 1) / bn); }
};

// Relative time of a launch: rounds of resident CTAs times the work of one round, over the
// rate an SM reaches with that many warps (a lone 4-warp CTA cannot hide latency as well as
// 8 warps do, hence the warp factor). The tile with the smallest time wins; ties keep the
// earlier (bigger) tile.
double model_time(const TileModel& t, int64_t M, int64_t N, int sms) {
  const int64_t ctas = t.tiles(M, N);
  const int64_t per_sm = (ctas + sms - 1) / sms;
  const int64_t resident = std::min<int64_t>(t.ctas_per_sm, per_sm);
  const int64_t rounds = (ctas + sms * resident - 1) / (sms * resident);
  const double warp_factor = std::min(1.0, static_cast<double>(resident * t.warps) / 8.0);
  return static_cast<double>(rounds * resident) * t.bm * t.bn / (t.speed * warp_factor);
}

TileModel mma_model(MmaTile t) {
  const auto s = gemm_detail::mma_tile_shape(t);
  switch (t) {
    case MmaTile::m128n256_w8: return {s.bm, s.bn, s.warps, 1, 1.0};
    case MmaTile::m128n128_w4: return {s.bm, s.bn, s.warps, 2, 0.9};
    case MmaTile::m128n64_w4: return {s.bm, s.bn, s.warps, 3, 0.75};
    default: return {s.bm, s.bn, s.warps, 4, 0.6};
  }
}

// One 8-warp consumer pair per SM (193 KiB of shared memory); wgmma's per-SM rate is about
// twice what mma.sync reaches, the 128x256 tile a bit more for its operand reuse.
TileModel wgmma_model(WgmmaTile t) {
  const auto s = gemm_detail::wgmma_tile_shape(t);
  return t == WgmmaTile::m128n256 ? TileModel{s.bm, s.bn, 8, 1, 1.8} : TileModel{s.bm, s.bn, 8, 1, 1.5};
}

// The persistent ping-pong kernel: one CTA per SM running its share of the 128x128 tiles one
// after another (the model's rounds), each faster per area than the 128x256 kernel's tiles
// since no epilogue or pipeline fill stops its tensor cores.
constexpr TileModel kPingpongModel{128, 128, 8, 1, 2.0};
// And over its 128 x 192 tiles, at the same rate per area until measured.
constexpr TileModel kPingpongWideModel{128, 192, 8, 1, 2.0};
// Its cooperative schedule: the same rate per area over 256-row tiles, so that a grid whose
// tall tiles leave more SMs idle in the last round than ping-pong's (or fewer CTAs than SMs)
// ranks slower by as much.
constexpr TileModel kCooperativeModel{256, 128, 8, 1, 2.0};
// And over its wide tiles, 128 x 256.
constexpr TileModel kCooperativeWideModel{128, 256, 8, 1, 2.0};

// Stream-K over `waves` waves (1: the partial one; 2: it and the last full one), as measured
// on an H200 (results/perf-log.md, 2026-12-03): over two waves it gains 1.5-2.5 % where the
// grid is many waves deep (the partial wave is a small share of one, the runs a tile and a
// bit, and each cut tile's 64 KiB partial costs about a k-tile and a half to hand over); on
// grids under 16 waves deep (7.76 on case 8 and 12's down projections, the 4096^2
// out-projection) both schedules lost 2-7 % to the plain one, short units exposing the
// previous tile's epilogue, and over the partial wave alone (runs shorter than a tile) they
// lost everywhere. Those rank just behind the plain schedule: offered, measured, not picked.
// So do tiles of 16 k-tiles (K = 1024 in 16-bit types), where the epilogue takes about as
// long as a tile's MMAs and the cut tiles' short units leave it in the open: over two waves
// stream-K measured 1.7-2.7 % behind the plain schedule at 23.3 waves (case 12's head split,
// on an H100 and an H200) and level (-1.5 to +1.5 %) at 31.0, where 32 k-tiles and more gain.
// On the 128 x 192 tiles (one H100 table, ba1be62) the same two-wave variant ran 1.8-2.4 %
// behind the plain one at 20.85 waves (cases 8 and 10 up) and 0-2 % ahead at 21.33 and 62-83
// (case 13): there a cut tile costs about half a wave (`handover_waves`), not 3 k-tiles.
double pingpong_stream_k_time(const TileModel& t, int64_t M, int64_t N, int64_t K, int elem_bytes, int sms,
                              int waves, double handover_waves) {
  const int64_t tiles = t.tiles(M, N);
  const double plain = model_time(t, M, N, sms) * (1.0 + 1e-6 * waves);
  const double k_tiles = static_cast<double>((K * elem_bytes + 127) / 128);
  if (waves != 2 || tiles < 16 * static_cast<int64_t>(sms) || k_tiles < 32) return plain;
  const double stream_k = static_cast<double>(tiles) / sms + 3.0 / k_tiles + handover_waves;
  return std::min(plain, stream_k * t.bm * t.bn / t.speed);
}

TileModel fma_model(FmaTile t) {
  return t == FmaTile::m128n128 ? TileModel{128, 128, 8, 2, 1.0} : TileModel{64, 64, 8, 3, 0.6};
}

// The variants in the order the dispatcher would rank them for this shape.
struct Candidate {
  std::string name;
  enum Kind { mma, fma, wgmma, pingpong, pingpong_wide, cooperative, cooperative_wide } kind;
  int tile;  // pingpong, cooperative: the waves under stream-K (0: none)
  double time;
  int split = 1;    // wgmma only: CTAs of a cluster sharing one output tile's K
  int cluster = 1;  // persistent only: CTAs of a cluster sharing W k-tiles

  bool persistent() const {
    return kind == pingpong || kind == pingpong_wide || kind == cooperative || kind == cooperative_wide;
  }
  bool sm90() const { return kind == wgmma || persistent(); }
  PersistentSchedule schedule() const {
    switch (kind) {
      case cooperative: return PersistentSchedule::cooperative;
      case cooperative_wide: return PersistentSchedule::cooperative_wide;
      case pingpong_wide: return PersistentSchedule::pingpong_wide;
      default: return PersistentSchedule::pingpong;
    }
  }
};

enum class VariantPolicy { automatic, portable, sm90 };

// TLBENCH_GEMM_VARIANT: unset/"auto" (the dispatcher decides), "portable" (mma.sync / FMA
// only) or "sm90" (the wgmma kernels wherever they can run).
VariantPolicy variant_policy() {
  const char* env = std::getenv("TLBENCH_GEMM_VARIANT");
  const std::string v = env ? env : "";
  if (v.empty() || v == "auto") return VariantPolicy::automatic;
  if (v == "portable") return VariantPolicy::portable;
  if (v == "sm90") return VariantPolicy::sm90;
  throw std::invalid_argument("TLBENCH_GEMM_VARIANT must be auto, portable or sm90 (got '" + v + "')");
}

std::vector<Candidate> rank_candidates(const GemmArgs& a) {
  const DeviceInfo& dev = device_info();
  std::vector<Candidate> c;
  if (a.dtype == DType::fp32 && a.fp32_math == Fp32Math::ieee) {
    for (int i = 0; i < gemm_detail::kNumFmaTiles; ++i) {
      const auto t = static_cast<FmaTile>(i);
      c.push_back({gemm_detail::fma_tile_name(t), Candidate::fma, i,
                   model_time(fma_model(t), a.M, a.N, dev.sms)});
    }
  } else {
    for (int i = 0; i < gemm_detail::kNumMmaTiles; ++i) {
      const auto t = static_cast<MmaTile>(i);
      c.push_back({gemm_detail::mma_tile_name(t, a.dtype), Candidate::mma, i,
                   model_time(mma_model(t), a.M, a.N, dev.sms)});
    }
  }
  std::stable_sort(c.begin(), c.end(),
                   [](const Candidate& x, const Candidate& y) { return x.time < y.time; });
  if (dev.sm90_image && !(a.dtype == DType::fp32 && a.fp32_math == Fp32Math::ieee)) {
    // Every sm_90a variant is offered for every shape (the tests run each one). On a big grid
    // the ping-pong kernel and the 128-row tiles join the throughput ranking and the 64-row
    // ones go last; on a small grid the wgmma tiles go first, ranked by the latency model, and
    // the ping-pong kernel (one tile per CTA there: nothing to overlap) after them.
    const bool small = gemm_detail::small_wgmma_grid(a.M, a.N, dev.sms);
    const int elem_bytes = static_cast<int>(dtype_bytes(a.dtype));
    const auto options = gemm_detail::wgmma_options(
        a.M, a.N, a.K, elem_bytes,
        [&](WgmmaTile t, int split) { return gemm_detail::wgmma_max_active_clusters(t, a.dtype, split); });
    const double inf = std::numeric_limits<double>::infinity();
    // The persistent kernel in its three schedules, each plain (waves 0) and with stream-K over
    // one or two waves, at `time(waves)` (never picked on a small grid), without clusters and
    // in clusters of two where the tile rows pair up, at cluster_factor times the same time.
    auto offer_persistent = [&](Candidate::Kind kind, PersistentSchedule schedule, auto time) {
      const double pair_factor = gemm_detail::cluster_factor(a, schedule);
      struct Form {
        int cluster;
        double factor;
      };
      std::vector<Form> forms = {{1, 1.0}};
      // Pairs run on as many SMs as the GPCs hold pairs of (all 132 of an H100 or H200); the
      // model's time is per SM, so SMs a pair grid leaves idle stretch it.
      if (const int pairs = gemm_detail::persistent_capacity(schedule, 2); pairs > 0) {
        const double idle = std::max(1.0, static_cast<double>(dev.sms) / (2.0 * pairs));
        forms.push_back({2, pair_factor * idle});
      }
      for (const Form& sh : forms) {
        gemm_detail::PersistentLaunch l{.schedule = schedule, .cluster = sh.cluster};
        if (!gemm_detail::persistent_supported(a.M, a.N, l)) continue;
        const bool stream_k = gemm_detail::persistent_stream_k_applies(a.M, a.N, l);
        for (int waves : {0, 1, 2}) {
          if (waves > 0 && !stream_k) break;
          l.stream_k_waves = waves;
          c.push_back({gemm_detail::persistent_variant_name(a.dtype, l), kind, waves,
                       small ? inf : time(waves) * sh.factor, 1, sh.cluster});
        }
      }
    };
    // Ping-pong at its model's time, stream-K as pingpong_stream_k_time ranks it; on the
    // 128 x 192 tiles the same (a cut tile costing half a wave more) times pingpong_wide_factor.
    auto offer_pingpong = [&](Candidate::Kind kind, PersistentSchedule schedule, const TileModel& m, double f,
                              double handover_waves) {
      offer_persistent(kind, schedule, [&](int waves) {
        return f * (waves == 0 ? model_time(m, a.M, a.N, dev.sms)
                               : pingpong_stream_k_time(m, a.M, a.N, a.K, elem_bytes, dev.sms, waves, handover_waves));
      });
    };
    offer_pingpong(Candidate::pingpong, PersistentSchedule::pingpong, kPingpongModel, 1.0, 0.0);
    offer_pingpong(Candidate::pingpong_wide, PersistentSchedule::pingpong_wide, kPingpongWideModel,
                   gemm_detail::pingpong_wide_factor(a, dev.sms), 0.5);
    // The cooperative schedules at their models' times times cooperative_factor, their
    // stream-K variants as cooperative_stream_k_factor ranks them against their plain one, the
    // 128 x 256 tiles by wide_factor against the 256 x 128 ones.
    const int64_t k_tiles = (a.K * elem_bytes + 127) / 128;
    const double cooperative = gemm_detail::cooperative_factor(a);
    auto offer_cooperative = [&](Candidate::Kind kind, PersistentSchedule schedule, const TileModel& m, double f) {
      const int64_t tiles = m.tiles(a.M, a.N);
      const double plain = f * cooperative * model_time(m, a.M, a.N, dev.sms);
      offer_persistent(kind, schedule, [&](int waves) {
        return plain * gemm_detail::cooperative_stream_k_factor(tiles, dev.sms, k_tiles, waves);
      });
    };
    offer_cooperative(Candidate::cooperative, PersistentSchedule::cooperative, kCooperativeModel, 1.0);
    offer_cooperative(Candidate::cooperative_wide, PersistentSchedule::cooperative_wide, kCooperativeWideModel,
                      gemm_detail::wide_factor(a));
    for (const gemm_detail::WgmmaOption& o : options) {
      const bool big_tile = gemm_detail::wgmma_tile_shape(o.tile).bm == 128;
      const double time = small ? o.units
                          : big_tile ? model_time(wgmma_model(o.tile), a.M, a.N, dev.sms)
                                     : inf;
      c.push_back({gemm_detail::wgmma_tile_name(o.tile, a.dtype, o.split), Candidate::wgmma,
                   static_cast<int>(o.tile), time, o.split});
    }
    if (small) {
      const auto portable = std::stable_partition(c.begin(), c.end(),
                                                  [](const Candidate& x) { return x.sm90(); });
      std::stable_sort(c.begin(), portable, [](const Candidate& x, const Candidate& y) { return x.time < y.time; });
    } else {
      std::stable_sort(c.begin(), c.end(), [](const Candidate& x, const Candidate& y) { return x.time < y.time; });
    }
  }
  return c;
}

// The ranking depends only on the device and the shape, dtype, math and epilogue of the
// product (case 12's head split and bias-only QKV share M, N and K and rank apart), and the
// layer stack asks for it at every launch of an eager forward: it is worked out once per such
// key (names, cluster capacities) and then looked up.
const std::vector<Candidate>& ranked_candidates(const GemmArgs& a) {
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int, int, int>;
  static std::map<Key, std::vector<Candidate>> cache;
  static std::mutex mu;
  int dev = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&dev));
  const Key key{dev, a.M, a.N, a.K, static_cast<int>(a.dtype), static_cast<int>(a.fp32_math),
                static_cast<int>(a.epilogue)};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, rank_candidates(a)).first;
  return it->second;
}

// The candidate the policy picks from the ranked list (never empty).
const Candidate& choose(const std::vector<Candidate>& ranked, VariantPolicy policy) {
  for (const Candidate& c : ranked) {
    if (policy == VariantPolicy::sm90 && c.sm90()) return c;
    if (policy == VariantPolicy::portable && !c.sm90()) return c;
  }
  return ranked.front();
}

void launch(const GemmArgs& a, const Candidate& c, cudaStream_t stream) {
  if (c.kind == Candidate::fma) {
    gemm_detail::launch_gemm_fp32_fma(a, static_cast<FmaTile>(c.tile), stream);
  } else if (c.persistent()) {
    gemm_detail::launch_gemm_persistent_sm90(
        a, {.schedule = c.schedule(), .cluster = c.cluster, .stream_k_waves = c.tile}, stream);
  } else if (c.kind == Candidate::wgmma) {
    gemm_detail::launch_gemm_wgmma_sm90(a, static_cast<WgmmaTile>(c.tile), c.split, stream);
  } else {
    gemm_detail::launch_gemm_mma(a, static_cast<MmaTile>(c.tile), stream);
  }
}

void require_supported(const GemmArgs& a) {
  std::string why;
  if (!gemm_fused_supported(a, &why)) throw std::invalid_argument("gemm_fused: " + why);
}

}  // namespace

namespace gemm_detail {

// Measured on H100s (tlbench_kernel_bench gemm, three tables on three cards at 55034d6,
// f7f6442 and 3a74e82, results/perf-log.md 2026-12-07), the best cooperative variant against
// the best ping-pong one of the same GEMM, in every table:
// - fp16 / bf16 from K = 4096 on, without an activation: 1.05-1.11x on the 16384-long and
//   8192-long down projections (cases 10, 8, 13), 1.04-1.06x on case 10's head split, 1.03-1.04x
//   on its out-projection, 1.00-1.02x on case 12's down projection (K = 4096, N = 1024). There the
//   mainloop is long enough that the epilogue the cooperative consumers stop for costs less
//   than ping-pong's extra quarter of bytes a FLOP.
// - fp16 / bf16 GELUs (0.85-0.98x, K = 1024-4096), anything at K = 1024 (0.84-0.97x), bias-only
//   and ReLU at K = 2048 (0.92-0.98x): behind. Head splits and out-projections at K = 2048
//   went either way (0.96-1.03x).
// - TF32, whose k-tiles carry half the MMAs a byte: ahead from K = 2048 on (1.01-1.23x, GELUs
//   included) and past K = 1024 without an activation (case 9's head split, out-projection:
//   1.03-1.04x, over stream-K); behind on case 9's GELU (K = 1600: 0.92-0.96x) and at K = 1024
//   (case 4: 0.95-1.02x).
// Ahead there (0.9: clear of ping-pong's stream-K variants, whose model gains up to a wave's
// rounding), just behind everywhere else.
double cooperative_factor(const GemmArgs& a) {
  const bool tf32 = a.dtype == DType::fp32 && a.fp32_math == Fp32Math::tf32;
  const bool half = a.dtype == DType::fp16 || a.dtype == DType::bf16;
  const bool activation = a.epilogue == GemmEpilogue::bias_activation;
  const bool ahead = (half && a.K >= 4096 && !activation) || (tf32 && (a.K >= 2048 || (a.K > 1024 && !activation)));
  return ahead ? 0.9 : 1.0 + 1e-5;
}

// A cooperative launch's stream-K variant over `waves` waves as a factor of its plain one's
// time, over `tiles` tiles of `k_tiles` k-tiles on `ctas` CTAs (w = tiles / ctas waves, f its
// fraction past the full ones). The plain grid takes ceil(w) tiles' time; stream-K takes w
// plus what handing cut tiles over costs, fitted to the tables cooperative_factor cites
// (gains of stream-K over the plain cooperative schedule from 0.97x to 1.19x):
// - over the partial wave (1), 20 k-tiles plus 0.05 / f tiles: a short partial wave cuts
//   each of its tiles into about 1 / f runs, and the one that ends a tile adds the others'
//   partials in turn (case 9 in TF32, f = 0.15: 1.04-1.15x; the 16-bit down projections of
//   cases 10 and 13: 1.01-1.02x; case 12's, 64 k-tiles, 0.97-0.98x);
// - over the last full wave and the partial one (2), 25 k-tiles plus 0.1 tiles where f <= 0.5
//   (case 9 in TF32: 1.10-1.19x, ahead of one wave), and a whole tile more past it: runs of
//   more than a tile and a half measured 0.80-0.91x (the down projections at f = 0.88).
// Where stream-K gains nothing, it ranks just behind the plain launch (1 + 1e-6 per wave).
double cooperative_stream_k_factor(int64_t tiles, int ctas, int64_t k_tiles, int waves) {
  const double behind = 1.0 + 1e-6 * waves;
  if (waves == 0) return 1.0;
  const double w = static_cast<double>(tiles) / ctas, full = std::floor(w), f = w - full;
  if (w <= 1.0 || f <= 0.0) return behind;
  const double kt = static_cast<double>(std::max<int64_t>(k_tiles, 1));
  const double cost = waves == 1 ? 20.0 / kt + 0.05 / f : 25.0 / kt + 0.1 + (f > 0.5 ? 1.0 : 0.0);
  const double ratio = (w + cost) / std::ceil(w);
  return ratio < 1.0 ? ratio : behind;
}

// Measured on an H100 (3a74e82, results/perf-log.md 2026-12-07), the 128 x 256 tiles against
// the 256 x 128 ones of the same variant: with an activation 1.02-1.06x in fp16 and bf16 from
// K = 2048 on and 1.03-1.08x in TF32 (0.97-0.99x at K = 1024 in 16-bit types); without one
// 0.95-1.00x in 16-bit types (head splits and bias-only tiles the worst) and 0.98-1.05x in
// TF32. Just ahead of the 256 x 128 tiles with an activation past K = 1024, so that where the
// cooperative schedule ranks ahead of ping-pong it is these; just behind elsewhere.
double wide_factor(const GemmArgs& a) {
  const bool activation = a.epilogue == GemmEpilogue::bias_activation;
  return activation && a.K > 1024 ? 1.0 - 1e-6 : 1.0 + 4e-5;
}

// Measured on an H100 (ba1be62, results/perf-log.md 2026-12-07), the best 128 x 192 ping-pong
// variant against the best of every other family:
// - from K = 2048 on, on grids of 15 or more waves of these tiles: 1.04-1.09x with N >= 6144
//   (the up projections and head splits of cases 8, 10 and 13, fp16, bf16 and TF32; TF32's
//   case 10 head split 0.99x) and 1.03-1.06x on case 13's down projection (K = 8192), where
//   the cooperative tiles had been best;
// - on grids of 4-6 waves (the down and out-projections of cases 8 and 10, case 12's down
//   projection) 0.89-0.99x behind the cooperative tiles.
// Since the k-loop walks its ring as running values (60a1698), three H100 tables (60a1698,
// e63eeff, 43a2820) found them ahead on two more deep grids in fp16 and bf16: at K = 1024
// (case 12's up projections and bias-only QKV, 21 waves) 1.09-1.13x, where they had measured
// 0.85-0.97x with their epilogue partly spilled, and on case 13's out-projection (K = 2048,
// N = 2048) 1.04-1.06x; case 12's head split stayed behind (0.93-0.96x).
// Ahead (0.85: clear of the cooperative schedules' 0.9) on grids of 15 waves or more: in
// fp16 and bf16 from K = 2048 on, and at K = 1024 but for head splits; in TF32 from K = 2048
// with N >= 6144 or K >= 4096. A tenth behind elsewhere (offered and measured, not picked).
double pingpong_wide_factor(const GemmArgs& a, int sms) {
  const bool deep = kPingpongWideModel.tiles(a.M, a.N) >= 15 * static_cast<int64_t>(sms);
  const bool ahead = a.dtype == DType::fp32
                         ? a.fp32_math == Fp32Math::tf32 && a.K >= 2048 && (a.N >= 6144 || a.K >= 4096)
                         : a.K >= 2048 || (a.K >= 1024 && a.epilogue != GemmEpilogue::bias_qkv_split);
  return deep && ahead ? 0.85 : 1.1;
}

// Measured on H100s (tlbench_kernel_bench gemm, results/perf-log.md 2026-12-07), each
// persistent variant in clusters of two against itself without: ping-pong in TF32, whose
// k-tiles carry half the MMAs per byte, ran 1.07-1.16x from K = 1600 on (cases 9, 10 and 13,
// level on the 4096^2 out-projection) and 0.94-0.99x at K = 1024 (case 4), in four tables on
// four cards. In fp16 and bf16 the pairs ran 1.00-1.07x on case 13's 32768-row GEMMs in the
// first table (55034d6) and 0.97-0.99x in the three after it (but for the down projections,
// which the cooperative schedule takes), 0.93-1.01x on every other GEMM (K = 1024 the worst,
// the pair's shared ring making each CTA wait for the slower). The cooperative schedules,
// whose tiles already share each W k-tile between two consumers, stayed within 0.97-1.03x.
// On 128 x 192 ping-pong tiles in TF32 the pairs ran level or ahead (up to 1.13x on case 13);
// in fp16 and bf16, in three H100 tables (60a1698, e63eeff, 43a2820), ahead with the residual
// (1.02-1.14x on the down projections of cases 12 and 13) and on case 13's head split
// (1.02-1.04x), 0.97-0.99x with a bias or an activation (the up projections, case 12's
// bias-only QKV, case 13's out-projection). Ahead, then, for ping-pong in TF32 past K = 1024
// and for the 128 x 192 tiles in TF32 or with a residual or head split; just behind
// everywhere else (offered and measured, not picked).
double cluster_factor(const GemmArgs& a, PersistentSchedule s) {
  const bool tf32 = a.dtype == DType::fp32 && a.fp32_math == Fp32Math::tf32;
  const bool sixteen_bit = a.dtype != DType::fp32;
  const bool wide_ahead = s == PersistentSchedule::pingpong_wide &&
                          (tf32 || (sixteen_bit && (a.epilogue == GemmEpilogue::bias_residual ||
                                                    a.epilogue == GemmEpilogue::bias_qkv_split)));
  const bool ahead = (s == PersistentSchedule::pingpong && tf32 && a.K > 1024) || wide_ahead;
  return ahead ? 0.97 : 1.0 + 2e-5;
}

// A grid is small when even the 128x128 wgmma tile leaves half the SMs idle (case 1's
// 128-token GEMMs, case 2's 768-wide ones). There a launch is latency-bound: each CTA pulls
// its operands through its own SM, so what counts is the bytes each CTA streams,
// (BM + BN) x 128 bytes per k-tile, times the waves of CTAs, not the chip's throughput.
bool small_wgmma_grid(int64_t M, int64_t N, int sms) {
  return ((M + 127) / 128) * ((N + 127) / 128) * 2 <= sms;
}

namespace {

// Relative latency of one launch, in rows-times-k-tiles streamed by one CTA, times the waves
// of clusters the device runs (`capacity` at once). Measured on an H200 (tlbench_kernel_bench
// small, graph-replayed, see results/perf-log.md): a launch costs about 1.3 us plus 1.6 ns per
// unit, and a split adds about 2 us (cluster launch, the partial tiles through distributed
// shared memory, two cluster barriers), so it pays only where it removes more than ~1250 units.
constexpr double kSplitCostUnits = 1250.0;
double latency_units(const WgmmaTileShape& t, int split, int capacity, int64_t M, int64_t N, int64_t K,
                     int64_t bk) {
  const int64_t clusters = ((M + t.bm - 1) / t.bm) * ((N + t.bn - 1) / t.bn);
  const int64_t cap = std::max(1, capacity);
  const int64_t waves = (clusters + cap - 1) / cap;
  const int64_t k_tiles = (K + bk - 1) / bk;
  const int64_t per_rank = (k_tiles + split - 1) / split;
  return static_cast<double>(waves * (t.bm + t.bn) * per_rank) + (split > 1 ? kSplitCostUnits : 0.0);
}

}  // namespace

std::vector<WgmmaOption> wgmma_options(int64_t M, int64_t N, int64_t K, int elem_bytes,
                                       const std::function<int(WgmmaTile, int)>& capacity) {
  const int64_t bk = 128 / elem_bytes;  // a k-tile is 128 bytes of K per row
  const int64_t k_tiles = (K + bk - 1) / bk;
  std::vector<WgmmaOption> out;
  auto add = [&](WgmmaTile t, int split) {
    out.push_back({t, split, latency_units(wgmma_tile_shape(t), split, capacity(t, split), M, N, K, bk)});
  };
  add(WgmmaTile::m128n256, 1);
  add(WgmmaTile::m128n128, 1);
  for (WgmmaTile t : {WgmmaTile::m64n128, WgmmaTile::m64n64}) {
    const WgmmaTileShape shape = wgmma_tile_shape(t);
    const int64_t tiles = ((M + shape.bm - 1) / shape.bm) * ((N + shape.bn - 1) / shape.bn);
    for (int split = 1; split <= kMaxWgmmaSplit; split *= 2) {
      // One wave of clusters, and at least two k-tiles per rank (less cannot pay the split).
      if (split > 1 && (tiles > capacity(t, split) || k_tiles < 2 * split)) continue;
      add(t, split);
    }
  }
  return out;
}

}  // namespace gemm_detail

bool gemm_fused_supported(const GemmArgs& a, std::string* why) {
  if (a.M <= 0 || a.N <= 0 || a.K <= 0) {
    return fail(why, "M, N and K must be positive (got M=" + std::to_string(a.M) +
                         ", N=" + std::to_string(a.N) + ", K=" + std::to_string(a.K) + ")");
  }
  if (a.N % 8 != 0) return fail(why, "N % 8 != 0 (N=" + std::to_string(a.N) + ")");
  if (a.K % 8 != 0) return fail(why, "K % 8 != 0 (K=" + std::to_string(a.K) + ")");
  // Tile indices are 32-bit and one launch covers the whole output.
  if (a.M > (int64_t{1} << 31) / 2 || a.N > (int64_t{1} << 31) / 2) {
    return fail(why, "M or N beyond 2^30");
  }
  if (!a.A || !a.W) return fail(why, "A or W is null");
  if (!aligned16(a.A) || !aligned16(a.W) || !aligned16(a.bias)) {
    return fail(why, "A, W and bias must be 16-byte aligned");
  }
  switch (a.epilogue) {
    case GemmEpilogue::bias:
    case GemmEpilogue::bias_activation:
    case GemmEpilogue::bias_residual:
      if (!a.out) return fail(why, "out is null");
      if (!aligned16(a.out)) return fail(why, "out must be 16-byte aligned");
      if (a.epilogue == GemmEpilogue::bias_residual) {
        if (!a.residual) return fail(why, "bias_residual needs a residual");
        if (!aligned16(a.residual)) return fail(why, "residual must be 16-byte aligned");
        const auto bytes = static_cast<uintptr_t>(a.M * a.N * dtype_bytes(a.dtype));
        const auto r = reinterpret_cast<uintptr_t>(a.residual), o = reinterpret_cast<uintptr_t>(a.out);
        if (r < o + bytes && o < r + bytes) return fail(why, "residual overlaps out");
      }
      if (a.epilogue == GemmEpilogue::bias_activation && a.activation != Activation::gelu &&
          a.activation != Activation::gelu_tanh && a.activation != Activation::relu) {
        return fail(why, "unknown activation");
      }
      break;
    case GemmEpilogue::bias_qkv_split:
      if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.head_dim <= 0) {
        return fail(why, "qkv split needs positive batch, seq, heads and head_dim");
      }
      if (a.N != 3 * a.heads * a.head_dim) {
        return fail(why, "qkv split needs N == 3 * heads * head_dim (N=" + std::to_string(a.N) +
                             ", heads=" + std::to_string(a.heads) +
                             ", head_dim=" + std::to_string(a.head_dim) + ")");
      }
      if (a.M != a.batch * a.seq) return fail(why, "qkv split needs M == batch * seq");
      if (a.head_dim % 8 != 0) {
        return fail(why, "qkv split needs head_dim % 8 == 0 (head_dim=" + std::to_string(a.head_dim) + ")");
      }
      if (!a.q || !a.k || !a.v) return fail(why, "q, k or v is null");
      if (!aligned16(a.q) || !aligned16(a.k) || !aligned16(a.v)) {
        return fail(why, "q, k and v must be 16-byte aligned");
      }
      break;
    default: return fail(why, "unknown epilogue");
  }
  if (a.dtype != DType::fp16 && a.dtype != DType::bf16 && a.dtype != DType::fp32) {
    return fail(why, "unknown dtype");
  }
  // Planning runs without a device: there, shape support is the whole answer.
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return true;
  }
  const DeviceInfo& dev = device_info();
  if (dev.major < 8) {
    return fail(why, "needs compute capability 8.0 or later (device is " +
                         std::to_string(dev.major) + "." + std::to_string(dev.minor) + ")");
  }
  const bool tensor_cores = !(a.dtype == DType::fp32 && a.fp32_math == Fp32Math::ieee);
  if (tensor_cores && dev.mma_ptx < 80) {
    return fail(why, "this build has no sm_80-or-later code for the tensor-core GEMM (the device runs compute_" +
                         std::to_string(dev.mma_ptx) + "); build with CMAKE_CUDA_ARCHITECTURES including 80 or 90a");
  }
  return true;
}

std::vector<std::string> gemm_fused_variants(const GemmArgs& a) {
  std::vector<std::string> names;
  if (!gemm_fused_supported(a, nullptr)) return names;
  for (const Candidate& c : ranked_candidates(a)) names.push_back(c.name);
  return names;
}

void gemm_fused_variant(const GemmArgs& a, const std::string& variant, cudaStream_t stream) {
  require_supported(a);
  for (const Candidate& c : ranked_candidates(a)) {
    if (c.name == variant) return launch(a, c, stream);
  }
  throw std::invalid_argument("gemm_fused: variant '" + variant + "' cannot run this GEMM");
}

GemmArgs gemm_detail::with_split_map(const GemmArgs& a) {
  GemmArgs out = a;
  if (a.epilogue != GemmEpilogue::bias_qkv_split) return out;
  out.split.width = FastDivisor(static_cast<uint32_t>(a.heads * a.head_dim));
  out.split.head_dim = FastDivisor(static_cast<uint32_t>(a.head_dim));
  out.split.seq = FastDivisor(static_cast<uint32_t>(a.seq));
  out.split.head_stride = a.seq * a.head_dim;
  out.split.batch_stride = a.heads * out.split.head_stride;
  return out;
}

const char* gemm_store_mode() {
  switch (gemm_detail::epilogue_store_setting()) {
    case gemm_detail::EpilogueStore::tma: return "tma";
    case gemm_detail::EpilogueStore::copy: return "copy";
    case gemm_detail::EpilogueStore::staged: return "staged";
    case gemm_detail::EpilogueStore::automatic: return "auto";
    default: throw std::logic_error("gemm_store_mode: TLBENCH_GEMM_STORE read as no way out");
  }
}

std::string gemm_fused(const GemmArgs& a, cudaStream_t stream) {
  require_supported(a);
  const VariantPolicy policy = variant_policy();
  const std::vector<Candidate>& ranked = ranked_candidates(a);
  const Candidate& c = choose(ranked, policy);
  launch(a, c, stream);
  return c.name;
}

}  // namespace tlb

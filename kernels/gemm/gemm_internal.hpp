// Internal interface between the GEMM dispatcher (gemm_dispatch.cpp, host logic) and the
// kernel launchers (.cu files). Not part of the public GEMM API.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gemm/gemm.hpp"

namespace tlb::gemm_detail {

// Tile shapes of the portable tensor-core kernel (mma.sync + cp.async, sm_80 and later).
// Each is one template instantiation per dtype in gemm_mma.cu; the dispatcher picks by shape.
enum class MmaTile : int {
  m128n256_w8 = 0,  // 8 warps of 64x64: the big-GEMM tile
  m128n128_w4,      // 4 warps of 64x64: big GEMMs whose 128x256 grid would not fill the chip
  m128n64_w4,       // 4 warps of 64x32
  m64n64_w4,        // 4 warps of 32x32: small M or N
};
constexpr int kNumMmaTiles = 4;

struct MmaTileShape {
  int bm, bn, warps;
};
MmaTileShape mma_tile_shape(MmaTile t);

// Variant names as they appear in result rows: "mma_128x256x32_w8_s4" (fp16/bf16: BM x BN x BK,
// warps, stages) or "mma_128x256x16_w8_s4_tf32".
std::string mma_tile_name(MmaTile t, DType d);
void launch_gemm_mma(const GemmArgs& a, MmaTile t, cudaStream_t stream);
// The virtual architecture (e.g. 80, 90) the device runs the mma.sync kernels from; below 80
// they are stubs (the build did not target sm_80 or later).
int mma_image_ptx_version();

// `a` with its head split's map (GemmArgs::split) worked out, for bias_qkv_split (`a` as it
// is otherwise). Every launcher below runs its kernel on this, so that a launch that skips the
// dispatcher cannot leave the map at its defaults (which would send every element to v[0..7]).
GemmArgs with_split_map(const GemmArgs& a);

// The epilogue of `a` (its split map worked out) over the fp32 product [M, N] at `product`
// (row stride N; a.out itself for fp32 without head split), as a kernel of its own.
void launch_epilogue_pass(const GemmArgs& a, const float* product, cudaStream_t stream);

// fp32 `ieee`: plain FMA, no tensor cores (the layer stack runs such GEMMs on cuBLAS instead:
// gemm_cublas.hpp).
enum class FmaTile : int { m128n128 = 0, m64n64 };
constexpr int kNumFmaTiles = 2;
std::string fma_tile_name(FmaTile t);
void launch_gemm_fp32_fma(const GemmArgs& a, FmaTile t, cudaStream_t stream);

// Hopper: TMA + wgmma, producer/consumer warpgroups (sm_90a images only). The 64-row tiles
// serve small grids and may split K over a cluster of up to kMaxWgmmaSplit CTAs (each rank
// reduces its share of the tile's rows). Clusters of 8 measured slower than 4 on an H200:
// with 130+ KiB of shared memory per CTA, fewer of them fit the GPCs at once.
enum class WgmmaTile : int { m128n256 = 0, m128n128, m64n128, m64n64 };
constexpr int kNumWgmmaTiles = 4;
constexpr int kMaxWgmmaSplit = 4;
struct WgmmaTileShape {
  int bm, bn;
};
WgmmaTileShape wgmma_tile_shape(WgmmaTile t);
// "sm90_wgmma_128x256x64_s4", with "_splitk4" when K is split and "_tf32" for fp32.
std::string wgmma_tile_name(WgmmaTile t, DType d, int split);
// Whether this build carries sm_90a machine code for the wgmma kernels (the caller checks
// that the device is compute capability 9.0).
bool wgmma_sm90_image_present();
void launch_gemm_wgmma_sm90(const GemmArgs& a, WgmmaTile t, int split, cudaStream_t stream);
// How many clusters of `split` CTAs of this tile the current device runs at once (with
// split 1: how many CTAs). Clusters must fit inside one GPC, so this can be well under
// SMs / split.
int wgmma_max_active_clusters(WgmmaTile t, DType d, int split);

// Hopper, for grids that fill the chip: the persistent kernel (one CTA per SM, a TMA producer
// and two consumer warpgroups of 128 or 192 fp32 accumulators a thread each), in one of four
// schedules:
// - ping-pong: 128 x 128 tiles, the consumers taking them in turn, so one's epilogue runs
//   under the other's MMAs. "sm90_pingpong_128x128x64_s6" ("_tf32" for fp32).
// - pingpong_wide: the same on 128 x 192 tiles, 192 accumulators a thread: a sixth fewer
//   bytes per FLOP through L2 and a ninth fewer read from shared memory by the MMAs (m64n192
//   wgmmas), the epilogue still under the other consumer's MMAs. "sm90_pingpong_128x192x64_s4".
// - cooperative: 256 x 128 tiles, the consumers splitting each one by rows. Each k-tile's
//   48 KiB of operands feed twice the MMAs that a 128 x 128 tile's 32 KiB do (a quarter
//   fewer bytes per FLOP through L2 and shared memory), but the epilogue stops the tensor
//   cores. "sm90_coop_256x128x64_s4".
// - cooperative_wide: 128 x 256 tiles, the same split, each consumer 64 rows by 256 columns:
//   the same bytes per FLOP through L2 as cooperative, a sixth fewer read from shared memory by
//   the MMAs (one m64n256 wgmma a k-step instead of two m64n128). "sm90_coop_128x256x64_s4".
// In clusters of two ("sm90_pingpong_cluster2_..."), the CTAs of a cluster take vertically
// adjacent tiles, which share their W k-tiles: each CTA loads half of each and multicasts it
// to both, a quarter fewer bytes per FLOP through L2 (ping-pong) without a taller tile. It
// needs an even number of tile rows (persistent_supported).
// With stream_k_waves 1 or 2 ("sm90_pingpong_streamk1_..."): the tiles of the partial wave
// (1), or of the last full wave and the partial one (2), are shared out as equal runs of
// k-tiles, one per CTA (cluster), so no SM idles through the partial wave; a tile cut between
// CTAs is finished by the last of them, in a fixed order (results are deterministic). Stream-K
// needs persistent_stream_k_applies. max_ctas > 0 caps the grid below one CTA per SM (tests
// use it to give each CTA many tiles), rounded down to whole clusters but at least one.
enum class PersistentSchedule { pingpong, cooperative, cooperative_wide, pingpong_wide };
// How a tile leaves the kernel: from the accumulator registers by stmatrix (16-bit) or 8-byte
// stores (fp32) into boxes of shared memory, each box then stored by TMA (tma) or copied out
// by the consumer's threads (copy), or through an fp32 staging, stored run by run (staged; also
// tma's head split where a 128-row box of 64 16-bit or 32 fp32 columns would meet two heads or
// two sequences); the results are bit-identical. automatic chooses per launch
// (automatic_store); TLBENCH_GEMM_STORE=auto|staged|tma|copy picks for launches that do not
// say, for A/B measurements (read once; unset is auto, any other value is refused). On the
// 128 x 128 tiles the TMA stores ran 0.86-1.03x the staged path's speed on an H100, most
// rows slower; on the 128 x 192 tiles 1.00-1.05x the copied-out boxes (results/perf-log.md,
// 2026-12-07).
enum class EpilogueStore { from_env, automatic, staged, tma, copy };
EpilogueStore epilogue_store_setting();
// automatic's choice for a launch of schedule `s`: by TMA for the bias-only and activation
// epilogues of 16-bit products on 128 x 192 tiles; copied out for the head splits and GELUs
// of 16-bit products with K <= 1024; staged for everything else (which 128 x 192 tiles,
// boxes only, copy out).
EpilogueStore automatic_store(const GemmArgs& a, PersistentSchedule s);
// Rows of tiles (of tile pairs, in clusters of two) a raster group walks column by column
// (gemm_raster.cuh) by default. A launch may ask for others ("…_raster16_…": 16), for A/B
// runs and tests; the dispatcher offers none, since ping-pong without clusters in groups of
// 16 tile rows (the height of a cluster's 8 pairs) ran 0.88-1.01x the default on an H100
// (results/perf-log.md, 2026-12-07).
inline constexpr int kPersistentRasterRows = 8;
struct PersistentLaunch {
  PersistentSchedule schedule = PersistentSchedule::pingpong;
  int cluster = 1;  // CTAs of a cluster: 1, or 2 sharing W k-tiles
  int stream_k_waves = 0;
  int max_ctas = 0;
  EpilogueStore store = EpilogueStore::from_env;
  int raster_rows = kPersistentRasterRows;
};
std::string persistent_variant_name(DType d, const PersistentLaunch& l);
bool persistent_supported(int64_t M, int64_t N, const PersistentLaunch& l);
// Whether the grid has a partial wave for stream-K to spread: more tiles (pairs of tiles, in
// clusters of two) than CTAs (clusters), and not a multiple of them.
bool persistent_stream_k_applies(int64_t M, int64_t N, const PersistentLaunch& l);
void launch_gemm_persistent_sm90(const GemmArgs& a, const PersistentLaunch& l, cudaStream_t stream);
// How many clusters of `cluster` CTAs of the schedule's kernel the current device runs at
// once (cluster 1: CTAs, one per SM). A cluster's CTAs share a GPC, so a GPC with an odd
// number of SMs leaves one of them out.
int persistent_capacity(PersistentSchedule s, int cluster);
// The cooperative schedules' time in the dispatcher's ranking, as a factor of ping-pong's on
// the same grid: under 1 where they measured ahead (16-bit types from K = 4096 on without an
// activation; TF32 from K = 2048 on, or past 1024 without an activation), else just over 1,
// so that they are offered and benchmarked but ranked behind ping-pong.
double cooperative_factor(const GemmArgs& a);
// A cooperative stream-K variant over `waves` waves (0: none) as a factor of the plain
// launch's time, for `tiles` tiles of `k_tiles` k-tiles on `ctas` CTAs: under 1 where the
// partial wave it spreads costs more than handing cut tiles over does, else just over 1.
double cooperative_stream_k_factor(int64_t tiles, int ctas, int64_t k_tiles, int waves);
// The 128 x 256 cooperative tiles' time as a factor of the 256 x 128 ones': just under 1 with
// an activation past K = 1024, where they measured ahead, just over 1 elsewhere.
double wide_factor(const GemmArgs& a);
// The 128 x 192 ping-pong tiles' time as a factor of their model's (which counts how their
// grid rounds into waves) on `sms` SMs: under the cooperative schedules' factor on grids of 15
// or more waves where they measured ahead of every other family (fp16 and bf16 from K = 1024,
// head splits from 2048; TF32 from K = 2048 with N >= 6144 or K >= 4096), a tenth over 1
// elsewhere.
double pingpong_wide_factor(const GemmArgs& a, int sms);
// The same for a variant in clusters of two, as a factor of its time without: under 1 where
// the pairs measured ahead (ping-pong in TF32 past K = 1024; on 128 x 192 tiles in TF32, or
// with a residual or a head split), else just over 1.
double cluster_factor(const GemmArgs& a, PersistentSchedule s);

// Stream-K's scratch (gemm_workspace.cpp): a consumer's fp32 partial tile (up to 128 x 192)
// and a ready flag (zero between launches) in each of `slots` slots, two per SM (a cooperative
// CTA's consumers each leave their half of a cut tile in a slot of their own), one per device
// and stream, made on first use and kept (graphs hold its address). Launches on one stream run
// in order, so they share it safely.
inline constexpr int kStreamKPartialBytes = 128 * 192 * 4;
struct StreamKWorkspace {
  void* partials;
  int* ready;
  int slots;
};
StreamKWorkspace stream_k_workspace(cudaStream_t stream);

// The wgmma variants offered for an M x N x K product of `elem_bytes`-byte elements, where
// capacity(tile, split) is how many clusters of that split the device runs at once: the 128-row tiles unsplit; the 64-row tiles unsplit, and split 2 or 4 where one
// wave of clusters holds the grid and each rank gets at least two k-tiles. `units` is the
// small-grid latency model (see gemm_dispatch.cpp), in the order offered; a grid is small
// when the 128x128 tile would leave half the SMs idle, and there the dispatcher ranks every
// option by `units`.
struct WgmmaOption {
  WgmmaTile tile;
  int split;
  double units;
};
bool small_wgmma_grid(int64_t M, int64_t N, int sms);
std::vector<WgmmaOption> wgmma_options(int64_t M, int64_t N, int64_t K, int elem_bytes,
                                       const std::function<int(WgmmaTile, int)>& capacity);

}  // namespace tlb::gemm_detail

// The hand-written GEMM with fused epilogues against an fp64 host GEMM: every dtype and fp32
// math mode, every epilogue and activation, odd M, N and K that are multiples of 8 but not of
// the tile sizes, every tile variant the dispatcher can pick. Outputs are NaN-poisoned before
// each run (an element left unwritten shows up) and fenced by guard bytes (a write past the
// output shows up); inputs are allocated to their exact size so that compute-sanitizer flags
// any read past them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/rng.hpp"
#include "common/rounding.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_cublas.hpp"
#include "gemm/gemm_internal.hpp"
#include "gpu_test_util.hpp"
#include "reference/linear_cublas.hpp"
#include "test_support.hpp"

namespace {

using tlb::DeviceBuffer;
using tlb::DType;
using tlb::GemmArgs;
using tlb::GemmEpilogue;
using tlb::test::GuardedOutput;

struct Mode {
  DType dtype;
  tlb::Fp32Math math;
  const char* name;
  double tolerance;  // relative L2 error against fp64
};
const Mode kModes[] = {
    {DType::fp16, tlb::Fp32Math::tf32, "fp16", 2e-3},
    {DType::bf16, tlb::Fp32Math::tf32, "bf16", 1e-2},
    {DType::fp32, tlb::Fp32Math::tf32, "fp32-tf32", 5e-3},
    {DType::fp32, tlb::Fp32Math::ieee, "fp32-ieee", 1e-5},
};

struct Shape {
  int64_t M, N, K;
};
// M odd or 1; N and K multiples of 8 but (mostly) not of 32 or 64, so both the K tail of the
// last tile and partial N tiles are exercised; 1500 x 264 spans more tile-rows than one
// rasterisation group.
const Shape kShapes[] = {
    {1, 8, 8}, {7, 24, 520}, {63, 520, 24}, {257, 136, 1600}, {1500, 264, 40}, {129, 1600, 72},
};

// Every schedule of the persistent kernel.
const tlb::gemm_detail::PersistentSchedule kPersistentSchedules[] = {
    tlb::gemm_detail::PersistentSchedule::pingpong, tlb::gemm_detail::PersistentSchedule::pingpong_wide,
    tlb::gemm_detail::PersistentSchedule::cooperative, tlb::gemm_detail::PersistentSchedule::cooperative_wide};

uint64_t key_for(uint64_t a, uint64_t b, uint64_t c) {
  return tlb::mix64(tlb::mix64(a * 0x9e3779b97f4a7c15ull + b) ^ (c + 0x5851f42d4c957f2dull));
}

// An input tensor: its values (already rounded to the dtype) on the host and its bits in an
// allocation of exactly its size on the device.
struct Input {
  std::vector<float> host;
  DeviceBuffer dev;
};

Input make_input(size_t n, DType dt, tlb::DistKind kind, double bound, uint64_t key) {
  tlb::TensorDist dist;
  dist.key = key;
  dist.kind = kind;
  dist.bound = bound;
  Input t;
  t.host.resize(n);
  for (size_t i = 0; i < n; ++i) t.host[i] = tlb::sample_rounded(dist, i, dt);
  t.dev = tlb::test::upload_values(t.host, dt);
  return t;
}

// The GEMM's inputs and its fp64 product acc[m][n] = sum_k A[m][k] W[n][k] (no bias yet).
struct Problem {
  Input A, W, bias, residual;
  std::vector<double> acc;
};

Problem make_problem(const Mode& mode, const Shape& s, bool with_residual, uint64_t salt) {
  const uint64_t k0 = key_for(static_cast<uint64_t>(s.M), static_cast<uint64_t>(s.N * 131 + s.K),
                              salt * 16 + static_cast<uint64_t>(mode.dtype));
  const double bound = 1.0 / std::sqrt(static_cast<double>(s.K));
  Problem p;
  p.A = make_input(static_cast<size_t>(s.M * s.K), mode.dtype, tlb::DistKind::normal, 0.0, k0 + 1);
  p.W = make_input(static_cast<size_t>(s.N * s.K), mode.dtype, tlb::DistKind::uniform, bound, k0 + 2);
  p.bias = make_input(static_cast<size_t>(s.N), mode.dtype, tlb::DistKind::uniform, bound, k0 + 3);
  if (with_residual) {
    p.residual = make_input(static_cast<size_t>(s.M * s.N), mode.dtype, tlb::DistKind::normal, 0.0, k0 + 4);
  }
  p.acc.assign(static_cast<size_t>(s.M * s.N), 0.0);
  for (int64_t m = 0; m < s.M; ++m) {
    const float* a = &p.A.host[static_cast<size_t>(m * s.K)];
    for (int64_t n = 0; n < s.N; ++n) {
      const float* w = &p.W.host[static_cast<size_t>(n * s.K)];
      double sum = 0.0;
      for (int64_t k = 0; k < s.K; ++k) sum += static_cast<double>(a[k]) * static_cast<double>(w[k]);
      p.acc[static_cast<size_t>(m * s.N + n)] = sum;
    }
  }
  return p;
}

double activate(double x, tlb::Activation act) {
  switch (act) {
    case tlb::Activation::gelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case tlb::Activation::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    default: return x > 0.0 ? x : 0.0;
  }
}

// The fp64 result of the epilogue over the problem's product, [M, N].
std::vector<double> reference(const Problem& p, const Shape& s, GemmEpilogue epi, tlb::Activation act) {
  std::vector<double> ref(p.acc.size());
  for (int64_t m = 0; m < s.M; ++m) {
    for (int64_t n = 0; n < s.N; ++n) {
      const size_t i = static_cast<size_t>(m * s.N + n);
      double v = p.acc[i] + p.bias.host[static_cast<size_t>(n)];
      if (epi == GemmEpilogue::bias_activation) v = activate(v, act);
      if (epi == GemmEpilogue::bias_residual) v += p.residual.host[i];
      ref[i] = v;
    }
  }
  return ref;
}

// A product's shape and math, without data: what the dispatcher's ranking rules read.
GemmArgs ranked_shape(DType d, int64_t M, int64_t N, int64_t K, GemmEpilogue e = GemmEpilogue::bias,
                      tlb::Fp32Math math = tlb::Fp32Math::tf32, tlb::Activation act = tlb::Activation::gelu) {
  GemmArgs a;
  a.dtype = d;
  a.fp32_math = math;
  a.epilogue = e;
  a.activation = act;
  a.M = M;
  a.N = N;
  a.K = K;
  return a;
}

GemmArgs gemm_args(const Mode& mode, const Shape& s, const Problem& p, GemmEpilogue epi, tlb::Activation act) {
  GemmArgs a;
  a.dtype = mode.dtype;
  a.fp32_math = mode.math;
  a.epilogue = epi;
  a.activation = act;
  a.M = s.M;
  a.N = s.N;
  a.K = s.K;
  a.A = p.A.dev.get();
  a.W = p.W.dev.get();
  a.bias = p.bias.dev.get();
  a.residual = p.residual.dev.get();
  return a;
}

// Each output against its reference: every element written (poisoned outputs), none past
// the end (guards), within the mode's tolerance.
void check_outputs(const Mode& mode, const std::vector<GuardedOutput*>& outputs,
                   const std::vector<std::vector<double>>& refs) {
  for (size_t oi = 0; oi < outputs.size(); ++oi) {
    INFO("output " << oi);
    bool guards_intact = false;
    const std::vector<float> got = outputs[oi]->read(&guards_intact);
    const tlb::test::ErrorStats e = tlb::test::compare_finite(got, refs[oi]);
    const int64_t nans = e.nan + e.inf;  // NaN or Inf: never written, or computed wrong
    CHECK(guards_intact);
    CHECK(nans == 0);
    CHECK(e.rel_l2 <= mode.tolerance);
  }
}

// Runs every variant that can run `a`, then the dispatcher's own choice, each on freshly
// poisoned outputs, then cuBLAS's product with the epilogue pass, and checks each against
// the reference. `outputs` and `refs` pair up (one [M, N] output, or q/k/v for the head split).
void check_every_variant(const Mode& mode, GemmArgs a, std::vector<GuardedOutput*> outputs,
                         const std::vector<std::vector<double>>& refs) {
  const std::vector<std::string> variants = tlb::gemm_fused_variants(a);
  REQUIRE_FALSE(variants.empty());
  for (size_t vi = 0; vi <= variants.size(); ++vi) {
    const bool dispatcher = vi == variants.size();
    for (GuardedOutput* o : outputs) o->poison();
    std::string ran;
    if (dispatcher) {
      ran = tlb::gemm_fused(a, nullptr);
      CHECK(std::find(variants.begin(), variants.end(), ran) != variants.end());
    } else {
      ran = variants[vi];
      tlb::gemm_fused_variant(a, ran, nullptr);
    }
    TLB_CUDA_CHECK(cudaDeviceSynchronize());
    INFO(mode.name << " M=" << a.M << " N=" << a.N << " K=" << a.K << " variant " << ran
                   << (dispatcher ? " (dispatcher)" : ""));
    check_outputs(mode, outputs, refs);
  }
  // cuBLAS's product and the epilogue pass (what fp32 `ieee` GEMMs run in the layer stack),
  // through a product buffer of its own (poisoned: a run the pass skips stays NaN in the
  // output) and, where the output can hold it, in place (the aliasing; there cuBLAS's product
  // overwrites the poison, and a skipped run only shows as its missing epilogue).
  const tlb::reference::BlasHandle blas;
  const bool in_place_possible = a.dtype == DType::fp32 && a.epilogue != GemmEpilogue::bias_qkv_split;
  for (const bool in_place : {false, true}) {
    if (in_place && !in_place_possible) continue;
    for (GuardedOutput* o : outputs) o->poison();
    DeviceBuffer product;
    if (!in_place) {
      product = DeviceBuffer(static_cast<size_t>(a.M * a.N) * sizeof(float));
      TLB_CUDA_CHECK(cudaMemset(product.get(), 0xff, product.bytes()));  // NaN where the GEMM leaves it
    }
    const std::string ran = tlb::gemm_cublas_epilogue(blas.h, a, static_cast<float*>(product.get()), nullptr);
    TLB_CUDA_CHECK(cudaDeviceSynchronize());
    INFO(mode.name << " M=" << a.M << " N=" << a.N << " K=" << a.K << " " << ran << (in_place ? " in place" : ""));
    CHECK(ran == "cublas+epilogue_pass");
    check_outputs(mode, outputs, refs);
  }
  if (!in_place_possible)
    CHECK_THROWS_AS(tlb::gemm_cublas_epilogue(blas.h, a, nullptr, nullptr), std::invalid_argument);
}

// One [M, N] output of one epilogue on fresh inputs: every variant, then cuBLAS with the pass.
void check_one(const Mode& mode, const Shape& s, GemmEpilogue epi, tlb::Activation act, uint64_t salt) {
  const Problem p = make_problem(mode, s, epi == GemmEpilogue::bias_residual, salt);
  const std::vector<double> ref = reference(p, s, epi, act);
  GuardedOutput out(static_cast<size_t>(s.M * s.N), mode.dtype);
  GemmArgs a = gemm_args(mode, s, p, epi, act);
  a.out = out.ptr();
  check_every_variant(mode, a, {&out}, {ref});
}

void check_epilogue(GemmEpilogue epi, tlb::Activation act, const std::vector<Shape>& shapes, uint64_t salt) {
  for (const Mode& mode : kModes)
    for (const Shape& s : shapes) check_one(mode, s, epi, act, salt);
}

}  // namespace

TEST_CASE("gemm bias epilogue matches fp64 on odd shapes in every dtype and tile", "[gpu][kernels][gemm]") {
  TLB_REQUIRE_GPU();
  check_epilogue(GemmEpilogue::bias, tlb::Activation::gelu,
                 std::vector<Shape>(std::begin(kShapes), std::end(kShapes)), 1);
}

TEST_CASE("gemm bias+activation epilogue matches fp64 for gelu, gelu_tanh and relu", "[gpu][kernels][gemm]") {
  TLB_REQUIRE_GPU();
  const std::vector<Shape> shapes = {{7, 24, 520}, {257, 136, 1600}, {1500, 264, 40}};
  for (tlb::Activation act : {tlb::Activation::gelu, tlb::Activation::gelu_tanh, tlb::Activation::relu}) {
    INFO("activation " << tlb::to_string(act));
    check_epilogue(GemmEpilogue::bias_activation, act, shapes, 2 + static_cast<uint64_t>(act));
  }
}

TEST_CASE("gemm bias+residual epilogue matches fp64", "[gpu][kernels][gemm]") {
  TLB_REQUIRE_GPU();
  check_epilogue(GemmEpilogue::bias_residual, tlb::Activation::gelu,
                 {{1, 8, 8}, {63, 520, 24}, {257, 136, 1600}, {1500, 264, 40}}, 6);
}

TEST_CASE("gemm qkv head split writes q, k, v in [batch, heads, seq, head_dim]", "[gpu][kernels][gemm]") {
  TLB_REQUIRE_GPU();
  struct Split {
    int64_t batch, seq, heads, head_dim, K;
  };
  const Split splits[] = {
      {3, 7, 2, 64, 136}, {1, 257, 1, 128, 72}, {3, 63, 3, 80, 520}, {2, 1, 4, 80, 24}, {1, 1500, 2, 64, 40},
      {2, 256, 2, 64, 72},
  };
  for (const Mode& mode : kModes) {
    for (const Split& sp : splits) {
      const int64_t d = sp.heads * sp.head_dim;
      const Shape s{sp.batch * sp.seq, 3 * d, sp.K};
      const Problem p = make_problem(mode, s, false, 7);
      const std::vector<double> flat = reference(p, s, GemmEpilogue::bias, tlb::Activation::gelu);
      const size_t per = static_cast<size_t>(s.M * d);
      std::vector<std::vector<double>> refs(3, std::vector<double>(per));
      for (int64_t m = 0; m < s.M; ++m) {
        const int64_t b = m / sp.seq, t = m % sp.seq;
        for (int64_t n = 0; n < s.N; ++n) {
          const int64_t which = n / d, head = (n % d) / sp.head_dim, dim = n % sp.head_dim;
          refs[static_cast<size_t>(which)][static_cast<size_t>(((b * sp.heads + head) * sp.seq + t) * sp.head_dim + dim)] =
              flat[static_cast<size_t>(m * s.N + n)];
        }
      }
      GuardedOutput q(per, mode.dtype), k(per, mode.dtype), v(per, mode.dtype);
      GemmArgs a = gemm_args(mode, s, p, GemmEpilogue::bias_qkv_split, tlb::Activation::gelu);
      a.q = q.ptr();
      a.k = k.ptr();
      a.v = v.ptr();
      a.batch = sp.batch;
      a.seq = sp.seq;
      a.heads = sp.heads;
      a.head_dim = sp.head_dim;
      INFO("batch " << sp.batch << " seq " << sp.seq << " heads " << sp.heads << " head_dim " << sp.head_dim);
      check_every_variant(mode, a, {&q, &k, &v}, refs);
      // The persistent kernel's three ways out: boxes stored by TMA into q, k and v as 4-D
      // tensors (seq 256: every 128-row box in one sequence; the other splits stage anyway,
      // their boxes meeting several sequences or, at head_dim 80, two heads), boxes copied out
      // by the threads (every split), and the fp32 staging. All match the reference, and each
      // other bit for bit. (IEEE fp32 runs no tensor-core kernel.)
      if (mode.math == tlb::Fp32Math::ieee) continue;
      using tlb::gemm_detail::EpilogueStore;
      using tlb::gemm_detail::PersistentSchedule;
      const std::vector<std::string> variants = tlb::gemm_fused_variants(a);
      for (const PersistentSchedule schedule : kPersistentSchedules) {
        const std::string name = tlb::gemm_detail::persistent_variant_name(mode.dtype, {.schedule = schedule});
        if (std::find(variants.begin(), variants.end(), name) == variants.end()) continue;
        // One CTA: its consumers take every tile in turn, each box reusing the staging.
        const struct {
          EpilogueStore store;
          const char* name;
        } stores[] = {{EpilogueStore::tma, " storing boxes by TMA"},
                      {EpilogueStore::copy, " copying boxes out"},
                      {EpilogueStore::staged, " staged"}};
        std::vector<std::vector<float>> outs[3];
        for (int w = 0; w < 3; ++w) {
          INFO(name << stores[w].name);
          for (GuardedOutput* o : {&q, &k, &v}) o->poison();
          tlb::gemm_detail::launch_gemm_persistent_sm90(
              a, {.schedule = schedule, .max_ctas = 1, .store = stores[w].store}, nullptr);
          TLB_CUDA_CHECK(cudaDeviceSynchronize());
          check_outputs(mode, {&q, &k, &v}, refs);
          bool guards_intact = false;  // check_outputs has checked them
          for (GuardedOutput* o : {&q, &k, &v}) outs[w].push_back(o->read(&guards_intact));
        }
        for (size_t i = 0; i < 3; ++i) {
          CHECK(tlb::test::bit_identical(outs[0][i], outs[2][i]));
          CHECK(tlb::test::bit_identical(outs[1][i], outs[2][i]));
        }
      }
    }
  }
}

// More rows than a grid's y dimension holds (65535): the epilogue pass's blocks stride over
// the rest, with the bias and the residual, in fp32 (in place too) and 16-bit.
TEST_CASE("gemm epilogue pass covers more rows than one grid", "[gpu][kernels][gemm]") {
  TLB_REQUIRE_GPU();
  for (const Mode& mode : kModes) {
    if (mode.dtype == DType::fp32 && mode.math == tlb::Fp32Math::tf32) continue;
    check_one(mode, {65600, 8, 8}, GemmEpilogue::bias_residual, tlb::Activation::gelu, 12);
  }
}

TEST_CASE("gemm without bias computes the plain product", "[gpu][kernels][gemm]") {
  TLB_REQUIRE_GPU();
  for (const Mode& mode : kModes) {
    const Shape s{63, 520, 24};
    const Problem p = make_problem(mode, s, false, 8);
    GuardedOutput out(static_cast<size_t>(s.M * s.N), mode.dtype);
    GemmArgs a = gemm_args(mode, s, p, GemmEpilogue::bias, tlb::Activation::gelu);
    a.bias = nullptr;
    a.out = out.ptr();
    check_every_variant(mode, a, {&out}, {p.acc});
  }
}

TEST_CASE("gemm small grids split K over a cluster, deterministically", "[gpu][kernels][gemm]") {
  TLB_REQUIRE_GPU();
  // Case 1's down projection: 128 tokens, 512 outputs, K = 2048. Every split variant must
  // match fp64 (check_every_variant) and give the same bits on every run: the partial tiles
  // are added in rank order, whatever order the CTAs ran in.
  const Mode& mode = kModes[0];
  const Shape s{128, 512, 2048};
  const Problem p = make_problem(mode, s, true, 9);
  const std::vector<double> ref = reference(p, s, GemmEpilogue::bias_residual, tlb::Activation::gelu);
  GuardedOutput out(static_cast<size_t>(s.M * s.N), mode.dtype);
  GemmArgs a = gemm_args(mode, s, p, GemmEpilogue::bias_residual, tlb::Activation::gelu);
  a.out = out.ptr();
  check_every_variant(mode, a, {&out}, {ref});
  const std::vector<std::string> variants = tlb::gemm_fused_variants(a);
  const bool has_split = std::any_of(variants.begin(), variants.end(),
                                     [](const std::string& v) { return v.find("_splitk") != std::string::npos; });
  if (variants.front().rfind("sm90_", 0) != 0) {
    WARN("no sm_90a wgmma kernels on this GPU/build: the split-K variants do not exist here");
    CHECK_FALSE(has_split);
    return;
  }
  CHECK(has_split);
  // The dispatcher's first choice on this small grid is a 64-row tile with K split.
  CHECK(variants.front().rfind("sm90_wgmma_64x", 0) == 0);
  CHECK(variants.front().find("_splitk") != std::string::npos);
  for (const std::string& v : variants) {
    if (v.find("_splitk") == std::string::npos) continue;
    INFO("variant " << v);
    std::vector<float> first;
    for (int run = 0; run < 3; ++run) {
      out.poison();
      tlb::gemm_fused_variant(a, v, nullptr);
      TLB_CUDA_CHECK(cudaDeviceSynchronize());
      bool guards = false;
      const std::vector<float> got = out.read(&guards);
      CHECK(guards);
      if (run == 0) first = got;
      else CHECK(tlb::test::bit_identical(first, got));
    }
  }
}

TEST_CASE("gemm persistent kernel runs many tiles per CTA, in both schedules, every dtype and epilogue",
          "[gpu][kernels][gemm]") {
  TLB_REQUIRE_GPU();
  // The variant tests above give each CTA one tile at most. Capping the grid gives every CTA
  // a long run of tiles, odd and even counts, so that the ping-pong consumers take turns many
  // times, the cooperative ones share many tiles, and the ring's stages and phases run on
  // across tile boundaries: 1 CTA (all tiles, one after the other), 3 and 5 (uneven shares).
  // K = 8 is one k-tile per tile (every stage of the ring turns over every few tiles), K = 1000
  // has a K tail; M and N leave partial tiles.
  // Stream-K, over the partial wave and over it and the last full one, runs on every capped
  // grid with a partial wave (2, 3, 4, 5 and 7 CTAs over ping-pong's 32, 15, 15, 6 and 40
  // tiles, the cooperative schedule's 16, 9, 10, 4 and 20): with 16 and 63 k-tiles per tile its runs cut tiles
  // at many places, on either consumer, a tile meeting up to seven runs (one partial-wave tile
  // over 7 CTAs), so partials are written and finished across CTAs; each such launch runs
  // twice and must give the same bits. The cooperative schedule's 256-row tiles leave M = 300
  // and 601 a last tile row in which consumer 1 (the upper 128 rows) has no row inside M.
  // N = 392, 264 and 520 leave 8 columns of a last tile: the epilogue's first TMA box (64 16-bit
  // or 32 fp32 columns) partly inside, the others wholly outside; N = 200 leaves 72: the second
  // 16-bit box and the third fp32 one partly inside (and 2 x 2 or 3 x 2 tiles of 3 k-tiles, K's
  // tail in the last).
  // Raster groups of 16 tile rows (of 2 for the cooperative schedule, whose shapes here have
  // at most 4) must give the same bits, and stream-K in them the same bits twice.
  // In clusters of two (where the tile rows pair up: M = 1000 in both schedules, 300 and 333
  // in the cooperative one) 1, 2 and 3 clusters (for 1, 3 and 5 CTAs) take the same tiles pair
  // by pair and must give the same bits, however the boxes leave; stream-K runs on as many
  // clusters as the CTA counts above, so that 1000 x 520 x 1000 (20 pairs of ping-pong tiles,
  // 10 of cooperative ones) and 300 x 520 x 4000 hand cut tiles between clusters. Each
  // schedule must have run, and cut tiles under stream-K (more than one k-tile a tile), on its
  // own and in clusters.
  const std::vector<Shape> shapes = {{1000, 392, 8}, {601, 264, 1000}, {300, 520, 4000}, {333, 200, 136},
                                     {1000, 520, 1000}};
  const struct {
    GemmEpilogue epi;
    tlb::Activation act;
  } epilogues[] = {{GemmEpilogue::bias, tlb::Activation::gelu},
                   {GemmEpilogue::bias_activation, tlb::Activation::gelu},
                   {GemmEpilogue::bias_activation, tlb::Activation::gelu_tanh},
                   {GemmEpilogue::bias_activation, tlb::Activation::relu},
                   {GemmEpilogue::bias_residual, tlb::Activation::gelu}};
  using tlb::gemm_detail::EpilogueStore;
  using tlb::gemm_detail::PersistentLaunch;
  using tlb::gemm_detail::PersistentSchedule;
  std::map<std::pair<PersistentSchedule, int>, int> runs, stream_k_runs;  // by schedule and cluster
  for (const Mode& mode : kModes) {
    if (mode.math == tlb::Fp32Math::ieee) continue;  // no tensor cores: not this kernel's
    for (const Shape& s : shapes) {
      for (const auto& e : epilogues) {
        const Problem p = make_problem(mode, s, e.epi == GemmEpilogue::bias_residual, 10);
        const std::vector<double> ref = reference(p, s, e.epi, e.act);
        GuardedOutput out(static_cast<size_t>(s.M * s.N), mode.dtype);
        GemmArgs a = gemm_args(mode, s, p, e.epi, e.act);
        a.out = out.ptr();
        const std::vector<std::string> variants = tlb::gemm_fused_variants(a);
        for (const PersistentSchedule schedule : kPersistentSchedules) {
          const std::string name = tlb::gemm_detail::persistent_variant_name(mode.dtype, {.schedule = schedule});
          if (std::find(variants.begin(), variants.end(), name) == variants.end()) continue;
          const bool pairs = tlb::gemm_detail::persistent_supported(s.M, s.N, {.schedule = schedule, .cluster = 2});
          auto run = [&](int ctas, int stream_k_waves, EpilogueStore store = EpilogueStore::tma, int cluster = 1,
                         int raster_rows = tlb::gemm_detail::kPersistentRasterRows) {
            out.poison();
            const PersistentLaunch l{.schedule = schedule,
                                     .cluster = cluster,
                                     .stream_k_waves = stream_k_waves,
                                     .max_ctas = ctas,
                                     .store = store,
                                     .raster_rows = raster_rows};
            tlb::gemm_detail::launch_gemm_persistent_sm90(a, l, nullptr);
            TLB_CUDA_CHECK(cudaDeviceSynchronize());
            bool guards_intact = false;
            std::vector<float> got = out.read(&guards_intact);
            CHECK(guards_intact);
            const tlb::test::ErrorStats err = tlb::test::compare_finite(got, ref);
            CHECK(err.nan + err.inf == 0);
            CHECK(err.rel_l2 <= mode.tolerance);
            return got;
          };
          for (int ctas : {1, 2, 3, 4, 5, 7}) {
            INFO(mode.name << " " << name << " M=" << s.M << " N=" << s.N << " K=" << s.K << " epilogue "
                           << static_cast<int>(e.epi) << " activation " << static_cast<int>(e.act) << " CTAs " << ctas);
            if (ctas == 1 || ctas == 3 || ctas == 5) {
              const std::vector<float> by_tma = run(ctas, 0);
              // Tiles leave as boxes written by stmatrix (16-bit) or 8-byte stores (fp32),
              // stored by TMA or copied out by the threads; through the fp32 staging they must
              // come out the same, bit for bit.
              const std::vector<float> staged = run(ctas, 0, EpilogueStore::staged);
              {
                INFO("staged against TMA-stored");
                CHECK(tlb::test::bit_identical(by_tma, staged));
              }
              {
                INFO("staged against copied out");
                CHECK(tlb::test::bit_identical(run(ctas, 0, EpilogueStore::copy), staged));
              }
              ++runs[{schedule, 1}];
              {
                INFO("staged against raster groups of 16 tile rows");
                CHECK(tlb::test::bit_identical(
                    run(ctas, 0, EpilogueStore::staged, 1, schedule == PersistentSchedule::pingpong ? 16 : 2), staged));
              }
              if (pairs) {
                INFO("staged against " << (ctas + 1) / 2 << " clusters of two, every way out");
                CHECK(tlb::test::bit_identical(run(ctas + 1, 0, EpilogueStore::staged, 2), staged));
                CHECK(tlb::test::bit_identical(run(ctas + 1, 0, EpilogueStore::copy, 2), staged));
                CHECK(tlb::test::bit_identical(run(ctas + 1, 0, EpilogueStore::tma, 2), staged));
                ++runs[{schedule, 2}];
              }
            }
            for (int cluster : {1, 2}) {
              if (cluster == 2 && !pairs) continue;
              // As many clusters as CTAs above.
              const PersistentLaunch l{.schedule = schedule, .cluster = cluster, .max_ctas = ctas * cluster};
              if (!tlb::gemm_detail::persistent_stream_k_applies(s.M, s.N, l)) continue;
              for (int waves : {1, 2}) {
                INFO("stream-K over " << waves << " waves, clusters of " << cluster);
                const std::vector<float> first = run(l.max_ctas, waves, EpilogueStore::staged, cluster);
                CHECK(tlb::test::bit_identical(first, run(l.max_ctas, waves, EpilogueStore::staged, cluster)));
                INFO("copied out and TMA-stored against staged");
                CHECK(tlb::test::bit_identical(first, run(l.max_ctas, waves, EpilogueStore::copy, cluster)));
                CHECK(tlb::test::bit_identical(first, run(l.max_ctas, waves, EpilogueStore::tma, cluster)));
                if (s.K > 128) ++stream_k_runs[{schedule, cluster}];  // several k-tiles a tile: some cut
              }
              if (cluster == 1) {
                INFO("stream-K over 2 waves in raster groups of 16 tile rows, twice");
                const std::vector<float> tall = run(ctas, 2, EpilogueStore::staged, 1, 16);
                CHECK(tlb::test::bit_identical(tall, run(ctas, 2, EpilogueStore::staged, 1, 16)));
              }
            }
          }
        }
      }
    }
  }
  if (runs.empty()) {
    WARN("no sm_90a image or no compute capability 9.0 GPU: the persistent kernel does not exist here");
    return;
  }
  for (const PersistentSchedule schedule : kPersistentSchedules) {
    for (int cluster : {1, 2}) {
      INFO(tlb::gemm_detail::persistent_variant_name(tlb::DType::fp16, {.schedule = schedule, .cluster = cluster}));
      CHECK(runs[{schedule, cluster}] > 0);
      CHECK(stream_k_runs[{schedule, cluster}] > 0);
    }
  }
}

// How tiles leave by default, without a device: by TMA from the 16-bit 128 x 192 tiles of
// bias and activation epilogues, copied out where that measured ahead on H100s (16-bit head
// splits and GELUs at K <= 1024), staged elsewhere.
TEST_CASE("gemm epilogue stores 16-bit 128 x 192 tiles by TMA, copies short-K 16-bit head splits and GELUs out, stages the rest",
          "[kernels][gemm]") {
  using tlb::Activation;
  using tlb::DType;
  using tlb::gemm_detail::EpilogueStore;
  using tlb::gemm_detail::PersistentSchedule;
  const auto automatic_store = [](const GemmArgs& a) {
    return tlb::gemm_detail::automatic_store(a, PersistentSchedule::pingpong);
  };
  auto args = [](DType d, GemmEpilogue e, Activation act, int64_t K) {
    return ranked_shape(d, 16384, 4096, K, e, tlb::Fp32Math::tf32, act);
  };
  for (const DType d : {DType::fp16, DType::bf16, DType::fp32}) {
    CHECK(automatic_store(args(d, GemmEpilogue::bias_qkv_split, Activation::gelu, 2048)) == EpilogueStore::staged);
    CHECK(automatic_store(args(d, GemmEpilogue::bias, Activation::gelu, 1024)) == EpilogueStore::staged);
    CHECK(automatic_store(args(d, GemmEpilogue::bias_residual, Activation::gelu, 1024)) == EpilogueStore::staged);
    CHECK(automatic_store(args(d, GemmEpilogue::bias_activation, Activation::relu, 1024)) == EpilogueStore::staged);
    CHECK(automatic_store(args(d, GemmEpilogue::bias_activation, Activation::gelu, 2048)) == EpilogueStore::staged);
  }
  for (const DType d : {DType::fp16, DType::bf16}) {
    for (const Activation act : {Activation::gelu, Activation::gelu_tanh}) {
      CHECK(automatic_store(args(d, GemmEpilogue::bias_activation, act, 1024)) == EpilogueStore::copy);
      CHECK(automatic_store(args(d, GemmEpilogue::bias_activation, act, 64)) == EpilogueStore::copy);
    }
    CHECK(automatic_store(args(d, GemmEpilogue::bias_qkv_split, Activation::gelu, 1024)) == EpilogueStore::copy);
  }
  CHECK(automatic_store(args(DType::fp32, GemmEpilogue::bias_qkv_split, Activation::gelu, 1024)) ==
        EpilogueStore::staged);
  CHECK(automatic_store(args(DType::fp32, GemmEpilogue::bias_activation, Activation::gelu, 1024)) ==
        EpilogueStore::staged);
  // The 128 x 192 tiles: bias-only and activation tiles of 16-bit products by TMA at any K;
  // residual and head-split tiles, and TF32, as on the other tiles (their staging meaning a
  // copy there).
  const auto wide = [](const GemmArgs& a) {
    return tlb::gemm_detail::automatic_store(a, PersistentSchedule::pingpong_wide);
  };
  for (const DType d : {DType::fp16, DType::bf16}) {
    for (const int64_t K : {1024, 2048, 8192}) {
      CHECK(wide(args(d, GemmEpilogue::bias, Activation::gelu, K)) == EpilogueStore::tma);
      for (const Activation act : {Activation::gelu, Activation::gelu_tanh, Activation::relu})
        CHECK(wide(args(d, GemmEpilogue::bias_activation, act, K)) == EpilogueStore::tma);
      CHECK(wide(args(d, GemmEpilogue::bias_residual, Activation::gelu, K)) == EpilogueStore::staged);
    }
    CHECK(wide(args(d, GemmEpilogue::bias_qkv_split, Activation::gelu, 2048)) == EpilogueStore::staged);
    CHECK(wide(args(d, GemmEpilogue::bias_qkv_split, Activation::gelu, 1024)) == EpilogueStore::copy);
  }
  CHECK(wide(args(DType::fp32, GemmEpilogue::bias_activation, Activation::gelu, 2048)) == EpilogueStore::staged);
  CHECK(wide(args(DType::fp32, GemmEpilogue::bias, Activation::gelu, 2048)) == EpilogueStore::staged);
  for (const PersistentSchedule s : {PersistentSchedule::cooperative, PersistentSchedule::cooperative_wide})
    CHECK(tlb::gemm_detail::automatic_store(args(DType::fp16, GemmEpilogue::bias, Activation::gelu, 2048), s) ==
          EpilogueStore::staged);
}

// Clusters of two in the ranking, without a device: ahead of the same variant without for
// ping-pong in TF32 past K = 1024 (cases 9, 10 and 13 measured 1.07-1.16x, case 4's K = 1024
// 0.94-0.99x) and for the 128 x 192 tiles in TF32 or with a residual or head split; just
// behind everywhere else (16-bit 128 x 128 tiles: 0.93-1.01x; 16-bit 128 x 192 tiles with a
// bias or an activation 0.97-0.99x). An odd number of tile rows cannot pair up: no such
// variant, and a launch asking for one throws.
TEST_CASE("gemm clusters of two rank ahead for TF32 ping-pong past K = 1024 and wide tiles with long epilogues",
          "[kernels][gemm]") {
  using tlb::DType;
  using tlb::Fp32Math;
  using tlb::gemm_detail::PersistentSchedule;
  auto cluster_factor = [](DType d, Fp32Math math, PersistentSchedule s, int64_t K,
                           GemmEpilogue e = GemmEpilogue::bias) {
    return tlb::gemm_detail::cluster_factor(ranked_shape(d, 32768, 2048, K, e, math), s);
  };
  const PersistentSchedule pingpong = PersistentSchedule::pingpong, coop = PersistentSchedule::cooperative;
  const PersistentSchedule wide = PersistentSchedule::pingpong_wide;
  CHECK(cluster_factor(DType::fp32, Fp32Math::tf32, pingpong, 1600) < 1.0);   // case 9
  CHECK(cluster_factor(DType::fp32, Fp32Math::tf32, pingpong, 1024) > 1.0);   // case 4
  CHECK(cluster_factor(DType::fp32, Fp32Math::tf32, coop, 1600) > 1.0);
  CHECK(cluster_factor(DType::fp32, Fp32Math::ieee, pingpong, 4096) > 1.0);   // no tensor cores
  CHECK(cluster_factor(DType::fp32, Fp32Math::tf32, wide, 2048, GemmEpilogue::bias_activation) < 1.0);  // case 13 up
  CHECK(cluster_factor(DType::fp32, Fp32Math::ieee, wide, 8192, GemmEpilogue::bias_residual) > 1.0);  // no tensor cores
  using tlb::gemm_detail::persistent_supported;
  CHECK_FALSE(persistent_supported(601, 264, {.schedule = pingpong, .cluster = 2}));  // 5 tile rows
  CHECK_FALSE(persistent_supported(601, 264, {.schedule = coop, .cluster = 2}));      // 3
  CHECK_FALSE(persistent_supported(1000, 264, {.schedule = pingpong, .cluster = 3}));
  CHECK_FALSE(persistent_supported(1000, 264, {.schedule = pingpong, .raster_rows = 0}));
  CHECK(tlb::gemm_detail::persistent_variant_name(DType::fp16, {.schedule = pingpong, .raster_rows = 16}) ==
        "sm90_pingpong_raster16_128x128x64_s6");
  CHECK(tlb::gemm_detail::persistent_variant_name(DType::fp16, {.schedule = pingpong, .cluster = 2}) ==
        "sm90_pingpong_cluster2_128x128x64_s6");
  CHECK(tlb::gemm_detail::persistent_variant_name(DType::fp16, {.schedule = PersistentSchedule::cooperative_wide}) ==
        "sm90_coop_128x256x64_s4");
  CHECK(tlb::gemm_detail::persistent_variant_name(DType::fp32, {.schedule = PersistentSchedule::cooperative_wide}) ==
        "sm90_coop_128x256x32_s4_tf32");
  CHECK_FALSE(persistent_supported(257, 264, {.schedule = PersistentSchedule::cooperative_wide, .cluster = 2}));  // 3
  CHECK(tlb::gemm_detail::persistent_variant_name(DType::bf16, {.schedule = PersistentSchedule::pingpong_wide}) ==
        "sm90_pingpong_128x192x64_s4");
  CHECK(tlb::gemm_detail::persistent_variant_name(DType::fp32, {.schedule = PersistentSchedule::pingpong_wide,
                                                                .stream_k_waves = 2}) ==
        "sm90_pingpong_streamk2_128x192x32_s4_tf32");
  GemmArgs odd;
  odd.M = 601;
  odd.N = 264;
  odd.K = 64;
  CHECK_THROWS_AS(tlb::gemm_detail::launch_gemm_persistent_sm90(odd, {.schedule = pingpong, .cluster = 2}, nullptr),
                  std::logic_error);
  for (const DType d : {DType::fp16, DType::bf16}) {
    CHECK(cluster_factor(d, Fp32Math::tf32, pingpong, 2048) > 1.0);  // case 13
    CHECK(cluster_factor(d, Fp32Math::tf32, pingpong, 1024) > 1.0);  // case 12
    CHECK(cluster_factor(d, Fp32Math::tf32, pingpong, 8192) > 1.0);  // case 8 down
    CHECK(cluster_factor(d, Fp32Math::tf32, coop, 2048) > 1.0);
    CHECK(cluster_factor(d, Fp32Math::tf32, wide, 8192, GemmEpilogue::bias_residual) < 1.0);   // case 13 down
    CHECK(cluster_factor(d, Fp32Math::tf32, wide, 2048, GemmEpilogue::bias_qkv_split) < 1.0);  // case 13 head split
    CHECK(cluster_factor(d, Fp32Math::tf32, wide, 2048, GemmEpilogue::bias_activation) > 1.0);  // case 13 up
    CHECK(cluster_factor(d, Fp32Math::tf32, wide, 1024) > 1.0);  // case 12 bias-only QKV
  }
}

// The dispatcher keeps each product's ranking once worked out; the epilogue is part of the
// key. Case 12's head split and bias-only QKV share M, N and K (16384 x 3072 x 1024) and rank
// apart on Hopper (128 x 128 tiles for the split, 128 x 192 for the rest): asking for one
// first must not fix the other's.
TEST_CASE("gemm rankings are kept per epilogue, not per shape alone", "[gpu][kernels][gemm]") {
  TLB_REQUIRE_GPU();
  alignas(16) static uint8_t fake[64];  // never dereferenced: only the ranking is asked for
  GemmArgs split = ranked_shape(DType::fp16, 16384, 3072, 1024, GemmEpilogue::bias_qkv_split);
  split.A = split.W = split.q = split.k = split.v = fake;
  split.batch = 1;
  split.seq = 16384;
  split.heads = 16;
  split.head_dim = 64;
  GemmArgs bias = ranked_shape(DType::fp16, 16384, 3072, 1024);
  bias.A = bias.W = bias.out = fake;
  const std::vector<std::string> split_names = tlb::gemm_fused_variants(split);
  const std::vector<std::string> bias_names = tlb::gemm_fused_variants(bias);
  REQUIRE_FALSE(split_names.empty());
  REQUIRE_FALSE(bias_names.empty());
  const std::string wide = "sm90_pingpong_128x192x64_s4";
  if (std::find(bias_names.begin(), bias_names.end(), wide) == bias_names.end()) {
    WARN("no sm_90a GEMMs on this device: the two rankings are alike");
    return;
  }
  CHECK(bias_names.front() == wide);
  CHECK(split_names.front() != wide);
}

// The cooperative schedules' place in the ranking, without a device, as measured on H100s:
// ahead of ping-pong in 16-bit types from K = 4096 on without an activation, in TF32 from
// K = 2048 on or past 1024 without one; just behind everywhere else. Their stream-K variants
// by how much of a wave they spread, the 128 x 256 tiles ahead with activations past K = 1024.
TEST_CASE("gemm cooperative schedules rank ahead of ping-pong on long K without activations, more in TF32",
          "[kernels][gemm]") {
  using tlb::Activation;
  using tlb::DType;
  using tlb::gemm_detail::cooperative_factor;
  using tlb::gemm_detail::wide_factor;
  auto args = [](DType d, tlb::Fp32Math math, GemmEpilogue e, int64_t K) {
    return ranked_shape(d, 8192, 2048, K, e, math);
  };
  const tlb::Fp32Math tf32 = tlb::Fp32Math::tf32;
  const GemmEpilogue residual = GemmEpilogue::bias_residual, act = GemmEpilogue::bias_activation;
  CHECK(cooperative_factor(args(DType::fp32, tf32, residual, 8192)) < 1.0);  // case 13 down: 1.14-1.23x
  CHECK(cooperative_factor(args(DType::fp32, tf32, act, 2048)) < 1.0);       // case 13 up: 1.02-1.04x
  CHECK(cooperative_factor(args(DType::fp32, tf32, GemmEpilogue::bias_qkv_split, 1600)) < 1.0);  // case 9
  CHECK(cooperative_factor(args(DType::fp32, tf32, act, 1600)) > 1.0);       // case 9 up: 0.92-0.96x
  CHECK(cooperative_factor(args(DType::fp32, tf32, residual, 1024)) > 1.0);  // case 4
  CHECK(cooperative_factor(args(DType::fp32, tlb::Fp32Math::ieee, residual, 16384)) > 1.0);  // no tensor cores
  for (const DType d : {DType::fp16, DType::bf16}) {
    CHECK(cooperative_factor(args(d, tf32, residual, 16384)) < 1.0);  // case 10 down: 1.10-1.11x
    CHECK(cooperative_factor(args(d, tf32, GemmEpilogue::bias_qkv_split, 4096)) < 1.0);  // case 10: 1.05-1.06x
    CHECK(cooperative_factor(args(d, tf32, GemmEpilogue::bias, 4096)) < 1.0);            // case 10 out: 1.03x
    for (const auto& [e, K] : {std::pair{act, int64_t{4096}}, std::pair{GemmEpilogue::bias, int64_t{2048}},
                               std::pair{residual, int64_t{1024}}}) {
      const double f = cooperative_factor(args(d, tf32, e, K));
      CHECK(f > 1.0 + 2e-6);  // behind ping-pong's stream-K variants where they rank level with its plain one
      CHECK(f < 1.001);       // but ahead of anything the model ranks slower
    }
    CHECK(wide_factor(args(d, tf32, act, 2048)) < 1.0);
    CHECK(wide_factor(args(d, tf32, act, 1024)) > 1.0);
    CHECK(wide_factor(args(d, tf32, residual, 8192)) > 1.0);
  }
}

// The 128 x 192 ping-pong tiles' place in the ranking, without a device (132 SMs), as measured
// on H100s: ahead of every other family on grids of 15 waves or more of these tiles, in every
// tensor-core dtype from K = 2048 with N >= 6144 or K >= 4096 (cases 8, 10 and 13's up
// projections and head splits, case 13's down projection), in fp16 and bf16 also on case 13's
// out-projection (K = 2048, N = 2048) and at K = 1024 (case 12) but for the head split; a
// tenth behind on shallow grids and in the rest.
TEST_CASE("gemm 128 x 192 ping-pong tiles rank ahead on deep grids", "[kernels][gemm]") {
  using tlb::DType;
  using tlb::Fp32Math;
  using tlb::gemm_detail::cooperative_factor;
  using tlb::gemm_detail::pingpong_wide_factor;
  auto args = [](DType d, int64_t M, int64_t N, int64_t K, GemmEpilogue e = GemmEpilogue::bias) {
    return ranked_shape(d, M, N, K, e);
  };
  for (const DType d : {DType::fp16, DType::bf16, DType::fp32}) {
    INFO(tlb::to_string(d));
    const bool tf32 = d == DType::fp32;
    CHECK(pingpong_wide_factor(args(d, 4096, 16384, 4096), 132) < 0.9);   // case 10 up: 20.8 waves
    CHECK(pingpong_wide_factor(args(d, 8192, 6144, 2048), 132) < 0.9);    // case 8 head split: 15.5
    CHECK(pingpong_wide_factor(args(d, 32768, 8192, 2048), 132) < 0.9);   // case 13 up
    CHECK(pingpong_wide_factor(args(d, 32768, 2048, 8192), 132) < 0.9);   // case 13 down
    CHECK((pingpong_wide_factor(args(d, 32768, 2048, 2048), 132) < 0.9) == !tf32);  // case 13 out-projection
    CHECK((pingpong_wide_factor(args(d, 16384, 4096, 1024), 132) < 0.9) == !tf32);  // case 12 up: K = 1024
    CHECK(pingpong_wide_factor(args(d, 16384, 3072, 1024, GemmEpilogue::bias_qkv_split), 132) > 1.0);  // case 12
    CHECK(pingpong_wide_factor(args(d, 16384, 4096, 512), 132) > 1.0);    // K = 512: not measured
    CHECK(pingpong_wide_factor(args(d, 4096, 4096, 16384), 132) > 1.0);   // case 10 down: 5.3 waves
    CHECK(pingpong_wide_factor(args(d, 8192, 6144, 2048), 144) > 1.0);    // 14.2 waves on 144 SMs
    if (tf32) {
      tlb::GemmArgs ieee = args(d, 32768, 8192, 2048);
      ieee.fp32_math = Fp32Math::ieee;
      CHECK(pingpong_wide_factor(ieee, 132) > 1.0);  // no tensor cores
    }
    // Ahead of the cooperative schedules where they rank ahead of ping-pong.
    CHECK(pingpong_wide_factor(args(d, 4096, 12288, 4096), 132) < cooperative_factor(args(d, 4096, 12288, 4096)));
  }
}

// Cooperative stream-K against the plain launch, without a device (132 CTAs): ahead where a
// short partial wave leaves most SMs idle and the tiles are long (case 9 in TF32: 416 tiles,
// 200 k-tiles; two waves ahead of one), over one wave on deep long-K grids (case 13's 16-bit
// down projection: 2048 tiles, 128 k-tiles), behind on a nearly full partial wave of short
// tiles (case 12's down projection: 512 tiles, 64 k-tiles) and never over two waves there.
TEST_CASE("gemm cooperative stream-K ranks by the partial wave it spreads", "[kernels][gemm]") {
  using tlb::gemm_detail::cooperative_stream_k_factor;
  CHECK(cooperative_stream_k_factor(416, 132, 200, 0) == 1.0);
  CHECK(cooperative_stream_k_factor(416, 132, 200, 1) < 0.95);
  CHECK(cooperative_stream_k_factor(416, 132, 200, 2) < cooperative_stream_k_factor(416, 132, 200, 1));
  CHECK(cooperative_stream_k_factor(2048, 132, 128, 1) < 1.0);
  CHECK(cooperative_stream_k_factor(2048, 132, 128, 2) > 1.0);
  CHECK(cooperative_stream_k_factor(512, 132, 64, 1) > 1.0);
  CHECK(cooperative_stream_k_factor(512, 132, 64, 2) > cooperative_stream_k_factor(512, 132, 64, 1));
  CHECK(cooperative_stream_k_factor(264, 132, 200, 1) > 1.0);  // whole waves: nothing to spread
  CHECK(cooperative_stream_k_factor(100, 132, 200, 1) > 1.0);  // under one wave
}

// The small-grid latency model, without a device: an H200's 132 SMs and the cluster
// capacities it reported for these tiles (132 CTAs, 66 pairs, 30 clusters of 4). The
// choices are the fastest variants measured there (tlbench_kernel_bench small, see
// results/perf-log.md).
TEST_CASE("gemm small-grid model picks the variants measured fastest on an H200", "[kernels][gemm]") {
  using tlb::gemm_detail::WgmmaOption;
  using tlb::gemm_detail::WgmmaTile;
  const int sms = 132;
  auto capacity = [](WgmmaTile, int split) { return split == 1 ? 132 : split == 2 ? 66 : 30; };
  auto first = [&](int64_t M, int64_t N, int64_t K, int elem_bytes) {
    REQUIRE(tlb::gemm_detail::small_wgmma_grid(M, N, sms));
    std::vector<WgmmaOption> o = tlb::gemm_detail::wgmma_options(M, N, K, elem_bytes, capacity);
    std::stable_sort(o.begin(), o.end(), [](const WgmmaOption& a, const WgmmaOption& b) { return a.units < b.units; });
    return std::make_pair(tlb::gemm_detail::wgmma_tile_shape(o.front().tile), o.front().split);
  };
  struct Want {
    const char* what;
    int64_t M, N, K;
    int elem_bytes, bm, bn, split;
  };
  const Want wants[] = {
      {"case 1 qkv fp16 (3.1 us)", 128, 1536, 512, 2, 64, 64, 1},
      {"case 1 up fp16 (4.1 us)", 128, 2048, 512, 2, 64, 64, 1},
      {"case 1 down fp16 (5.2 us)", 128, 512, 2048, 2, 64, 64, 4},
      {"case 1 down tf32 (6.4 us)", 128, 512, 2048, 4, 64, 64, 4},
      {"case 2 down fp16 (15.7 us)", 1024, 768, 3072, 2, 64, 128, 1},
  };
  for (const Want& w : wants) {
    INFO(w.what);
    const auto [shape, split] = first(w.M, w.N, w.K, w.elem_bytes);
    CHECK(shape.bm == w.bm);
    CHECK(shape.bn == w.bn);
    CHECK(split == w.split);
  }
  // Splits are offered only within one wave of clusters: 32 tiles of 64x128 need 32
  // clusters of 4, more than the 30 that fit.
  for (const WgmmaOption& o : tlb::gemm_detail::wgmma_options(128, 2048, 512, 2, capacity))
    CHECK_FALSE((o.tile == WgmmaTile::m64n128 && o.split == 4));
  CHECK_FALSE(tlb::gemm_detail::small_wgmma_grid(4096, 1024, sms));  // case 4: throughput-bound
}

// Shape checks come before any device query, so these run without a GPU.
TEST_CASE("fp32 ieee GEMMs prefer cuBLAS with the epilogue pass, and no other dtype or math does", "[kernels][gemm]") {
  GemmArgs a;
  a.dtype = DType::fp32;
  a.fp32_math = tlb::Fp32Math::ieee;
  std::string why;
  CHECK(tlb::gemm_prefers_cublas(a, &why));
  CHECK(why.find("cuBLAS's SGEMM") != std::string::npos);
  a.fp32_math = tlb::Fp32Math::tf32;
  CHECK_FALSE(tlb::gemm_prefers_cublas(a, nullptr));
  for (DType d : {DType::fp16, DType::bf16}) {
    a.dtype = d;
    a.fp32_math = tlb::Fp32Math::ieee;  // ignored outside fp32
    CHECK_FALSE(tlb::gemm_prefers_cublas(a, nullptr));
  }
}

TEST_CASE("gemm_fused_supported rejects unsupported shapes with a reason", "[kernels][gemm]") {
  alignas(16) static uint8_t fake[64];  // never dereferenced: only shapes are judged here
  GemmArgs a;
  a.dtype = DType::fp16;
  a.M = 7;
  a.N = 24;
  a.K = 64;
  a.A = fake;
  a.W = fake;
  a.out = fake;
  std::string why;

  a.N = 20;
  CHECK_FALSE(tlb::gemm_fused_supported(a, &why));
  CHECK(why.find("N % 8 != 0") != std::string::npos);
  a.N = 24;

  a.K = 36;
  CHECK_FALSE(tlb::gemm_fused_supported(a, &why));
  CHECK(why.find("K % 8 != 0") != std::string::npos);
  a.K = 64;

  a.M = 0;
  CHECK_FALSE(tlb::gemm_fused_supported(a, &why));
  CHECK(why.find("positive") != std::string::npos);
  a.M = 7;

  a.A = fake + 8;
  CHECK_FALSE(tlb::gemm_fused_supported(a, &why));
  CHECK(why.find("aligned") != std::string::npos);
  a.A = fake;

  a.epilogue = GemmEpilogue::bias_residual;
  a.residual = nullptr;
  CHECK_FALSE(tlb::gemm_fused_supported(a, &why));
  CHECK(why.find("residual") != std::string::npos);
  a.residual = fake;  // the same bytes as out
  CHECK_FALSE(tlb::gemm_fused_supported(a, &why));
  CHECK(why.find("overlaps") != std::string::npos);

  a.epilogue = GemmEpilogue::bias_qkv_split;
  a.q = a.k = a.v = fake;
  a.batch = 1;
  a.seq = 7;
  a.heads = 1;
  a.head_dim = 8;
  a.N = 3 * 8 + 8;
  CHECK_FALSE(tlb::gemm_fused_supported(a, &why));
  CHECK(why.find("3 * heads * head_dim") != std::string::npos);
  a.heads = 2;
  a.head_dim = 4;
  a.N = 24;
  CHECK_FALSE(tlb::gemm_fused_supported(a, &why));
  CHECK(why.find("head_dim % 8") != std::string::npos);
  a.heads = 1;
  a.head_dim = 8;
  a.seq = 6;
  CHECK_FALSE(tlb::gemm_fused_supported(a, &why));
  CHECK(why.find("batch * seq") != std::string::npos);

  CHECK_THROWS_AS(tlb::gemm_fused(a, nullptr), std::invalid_argument);
}

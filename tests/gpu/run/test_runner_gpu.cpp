// The measurement engine on a real device: the accuracy reductions against an fp64 host loop
// (every dtype, planted NaN/Inf, sizes past the block cap), the CUDA run clock, the SM clock
// probe, the launch hold and the event probe, and `tlbench run` end to end through the binary: a tiny grid, A/A,
// a reference too big for the memory budget, SIGINT then --resume, and an injected kernel fault
// then --resume.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "accuracy.hpp"
#include "accuracy/compare.hpp"
#include "common/cuda_check.hpp"
#include "common/cuda_event.hpp"
#include "common/device_buffer.hpp"
#include "common/rounding.hpp"
#include "paired_timer.hpp"
#include "cpu/ablation/ablation_test_util.hpp"
#include "gpu_test_util.hpp"
#include "test_support.hpp"
#include "statistics.hpp"
#include "timing/clock_probe.hpp"
#include "timing/energy_meter.hpp"
#include "timing/event_cost.hpp"
#include "timing/launch_hold.hpp"
#include "timing/l2_flush.hpp"
#include "writers.hpp"

using namespace tlb;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Host values of `n` elements in `dtype` and their device copy.
struct DeviceVector {
  std::vector<double> host;  // the stored values, exactly
  DeviceBuffer dev;
};

DeviceVector upload(const std::vector<float>& values, DType dtype) {
  DeviceVector v;
  const size_t n = values.size();
  v.dev = DeviceBuffer(std::max<size_t>(n, 1) * static_cast<size_t>(dtype_bytes(dtype)));
  if (dtype == DType::fp32) {
    for (float f : values) v.host.push_back(f);
    TLB_CUDA_CHECK(cudaMemcpy(v.dev.get(), values.data(), n * 4, cudaMemcpyHostToDevice));
    return v;
  }
  std::vector<uint16_t> bits(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = dtype == DType::fp16 ? f32_to_f16_bits(values[i]) : f32_to_bf16_bits(values[i]);
    v.host.push_back(dtype == DType::fp16 ? f16_bits_to_f32(bits[i]) : bf16_bits_to_f32(bits[i]));
  }
  TLB_CUDA_CHECK(cudaMemcpy(v.dev.get(), bits.data(), n * 2, cudaMemcpyHostToDevice));
  return v;
}

using tlb::test::slurp;

using tlb::test::run_tlbench;

fs::path fresh_dir(const std::string& name) { return tlb::test::fresh_dir("tlbench-gpu", name); }

// Two small cases: odd sequence, a padding mask with a one-token element, d_model not a
// power of two.
const char* kTinyCases = R"({"cases": [
  {"id": 1, "name": "tiny-odd", "batch": 2, "seq": 7, "d_model": 64, "heads": 2, "d_ff": 128,
   "layers": 2, "mask": "causal"},
  {"id": 2, "name": "tiny-pad", "batch": 2, "seq": 33, "d_model": 96, "heads": 3, "d_ff": 256,
   "layers": 1, "mask": "padding", "valid_lens": [33, 1]}
]})";

fs::path write_cases(const fs::path& dir, const std::string& text) {
  const fs::path p = dir / "cases.json";
  std::ofstream(p) << text;
  return p;
}

std::vector<PointRow> rows_of(const fs::path& run) {
  return read_points_jsonl((run / "points.jsonl").string());
}

// Checks that every point of `rows` (case, dtype, configuration, policy) is there once;
// returns how many points there are.
size_t check_each_point_once(const std::vector<PointRow>& rows) {
  std::map<std::string, int> n;
  for (const PointRow& r : rows) ++n[std::to_string(r.case_id) + "|" + r.dtype + "|" + r.config + "|" + r.policy];
  for (const auto& [key, count] : n) {
    INFO(key);
    CHECK(count == 1);
  }
  return n.size();
}

const std::string kTinyArgs = "--quick --dtypes fp16,fp32 --configs 00000,11000,11111";
constexpr size_t kTinyPoints = 2 * 2 * 3;

}  // namespace

TEST_CASE("compare kernels match an fp64 host loop, NaN and Inf included", "[gpu][accuracy]") {
  TLB_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937_64 rng(2024);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> jitter(-0.03f, 0.03f);
  const Tolerance tol;
  // 1.3M elements exceed 1024 blocks x 1024 elements: the grid-stride loop is exercised.
  for (size_t n : {size_t{1}, size_t{1000}, size_t{1300007}}) {
    for (DType dtype : {DType::fp16, DType::bf16, DType::fp32}) {
      INFO("n = " << n << " dtype " << to_string(dtype));
      std::vector<float> ref(n), cand(n), golden(n);
      for (size_t i = 0; i < n; ++i) {
        golden[i] = normal(rng);
        ref[i] = golden[i] * (1.f + jitter(rng) * 0.1f);
        cand[i] = ref[i] * (1.f + jitter(rng)) + (i % 97 == 0 ? 0.01f : 0.f);
        if (i % 1009 == 5) ref[i] = 0.f;  // exact zeros in the reference: relative error floor
      }
      if (n > 100) {
        cand[17] = NAN;
        cand[n - 2] = INFINITY;
        cand[n / 2] = -INFINITY;
        ref[n / 3] = NAN;
      }
      DeviceVector dc = upload(cand, dtype), dr = upload(ref, dtype);
      DeviceBuffer dg(n * sizeof(float));
      TLB_CUDA_CHECK(cudaMemcpy(dg.get(), golden.data(), n * sizeof(float), cudaMemcpyHostToDevice));

      // fp64 host loop over the stored values, the same definitions as the kernels.
      double max_abs = 0, max_rel = 0, err = 0, gsq = 0;
      uint64_t viol = 0, nan = 0, inf = 0, ref_bad = 0;
      for (size_t i = 0; i < n; ++i) {
        const double c = dc.host[i], r = dr.host[i], g = golden[i];
        if (std::isnan(c)) ++nan;
        else if (std::isinf(c)) ++inf;
        if (!std::isfinite(r)) ++ref_bad;
        const double d = std::fabs(c - r);
        if (!(d <= tol.atol + tol.rtol * std::fabs(r))) ++viol;
        if (std::isfinite(c) && std::isfinite(r)) {
          max_abs = std::max(max_abs, d);
          max_rel = std::max(max_rel, d / std::max(std::fabs(r), tol.atol));
        }
        err += (c - g) * (c - g);
        gsq += g * g;
      }
      const StrictStats s = compare_to_reference(dc.dev.get(), dr.dev.get(), dtype, n, tol, stream);
      CHECK(s.elements == n);
      CHECK(s.violations == viol);
      CHECK(s.nan == nan);
      CHECK(s.inf == inf);
      CHECK(s.ref_nonfinite == ref_bad);
      CHECK(s.max_abs == max_abs);  // a maximum does not depend on the order
      CHECK(s.max_rel == max_rel);
      CHECK(strict_pass(s) == (viol == 0 && nan == 0 && inf == 0));

      const GoldenError ge = compare_to_golden(dc.dev.get(), dtype, dg.as<float>(), n, stream);
      CHECK(ge.nan == nan);
      CHECK(ge.inf == inf);
      if (nan > 0) {
        CHECK(std::isnan(ge.rel_l2));
      } else {
        CHECK(ge.rel_l2 == Approx(std::sqrt(err / gsq)).epsilon(1e-10));
      }
      // A candidate equal to the golden has no error.
      if (dtype == DType::fp32) {
        const GoldenError zero = compare_to_golden(dg.get(), DType::fp32, dg.as<float>(), n, stream);
        CHECK(zero.rel_l2 == 0.0);
      }
    }
  }
  // n = 0 touches nothing.
  const StrictStats empty = compare_to_reference(nullptr, nullptr, DType::fp16, 0, tol, stream);
  CHECK(empty.elements == 0);
  CHECK(strict_pass(empty));
  TLB_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("CUDA run clock times real work and reads a plausible SM clock", "[gpu][timer]") {
  TLB_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    DeviceBuffer probe(sizeof(ClockProbeSample));
    launch_clock_probe(probe.as<ClockProbeSample>(), kClockProbeSpinNs, stream);
    ClockProbeSample s;
    TLB_CUDA_CHECK(cudaMemcpyAsync(&s, probe.get(), sizeof s, cudaMemcpyDeviceToHost, stream));
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
    CHECK(s.valid == 1);
    CHECK(s.ns >= kClockProbeSpinNs);
    const double mhz = clock_probe_mhz(s);
    INFO("SM clock " << mhz << " MHz");
    CHECK(mhz > 100);
    CHECK(mhz < 5000);
  }
  // Writing 256 MiB against writing 128 MiB: bandwidth-bound, so about 2x.
  const size_t big = size_t{256} << 20, small = size_t{128} << 20;
  DeviceBuffer a(big), b(small);
  CudaRunClock::Options co;
  co.l2_flush = true;
  CudaRunClock clock(stream, co);
  int device = 0, l2 = 0;
  TLB_CUDA_CHECK(cudaGetDevice(&device));
  TLB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  CHECK(clock.l2_flush_bytes() >= 2 * static_cast<uint64_t>(l2));
  unsigned v = 0;
  TimerOptions to;
  to.stop.min_pairs = 20;
  to.stop.budget_ms = 2000;
  ClockTracker tracker;
  const PairedMeasurement m = measure_paired(
      clock, [&] { launch_l2_flush(a.get(), big, ++v, stream); },
      [&] { launch_l2_flush(b.get(), small, ++v, stream); }, to, tracker);
  INFO("speedup " << m.speedup.median << " [" << m.speedup.lo << ", " << m.speedup.hi << "], ref "
                  << m.ref.median << " ms, cand " << m.cand.median << " ms, clock "
                  << m.min_mhz << "-" << m.max_mhz << " MHz");
  CHECK(m.speedup.median > 1.6);
  CHECK(m.speedup.median < 2.4);
  CHECK(m.speedup.lo <= m.speedup.median);
  CHECK(m.speedup.hi >= m.speedup.median);
  CHECK(m.pairs >= 20);
  CHECK(m.max_mhz > 100);
  CHECK(tracker.max_mhz >= m.max_mhz);
  TLB_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("The energy meter's counter grows while the GPU works, at a plausible power, and the clock-event reasons read",
          "[gpu][timer]") {
  TLB_REQUIRE_GPU();
  std::string why;
  const std::optional<EnergyMeter> meter = EnergyMeter::open(0, why);
  INFO(why);
  REQUIRE(meter);  // the driver that runs a GPU brings NVML
  const double limit = meter->power_limit_w();
  INFO("power limit " << limit << " W");
  CHECK(limit > 50);
  CHECK(limit < 5000);
  cudaStream_t stream = nullptr;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DeviceBuffer a(size_t{256} << 20);
  const std::optional<unsigned long long> e0 = meter->energy_mj();
  const auto t0 = std::chrono::steady_clock::now();
  unsigned v = 0;
  // Half a second of writes: far longer than the counter's steps.
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(500)) {
    for (int i = 0; i < 8; ++i) launch_l2_flush(a.get(), a.bytes(), ++v, stream);
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  const std::optional<unsigned long long> e1 = meter->energy_mj();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // What holds the clock: every driver that runs an sm_80 or newer GPU says.
  const std::optional<unsigned long long> reasons = meter->clock_event_reasons();
  CHECK(reasons);
  REQUIRE(e0);
  REQUIRE(e1);
  REQUIRE(*e1 > *e0);
  const double watts = static_cast<double>(*e1 - *e0) / 1000.0 / s;
  INFO("mean power " << watts << " W over " << s << " s");
  CHECK(watts > 10);
  CHECK(watts < 2 * limit);
  TLB_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("A launch hold keeps the host's time out of events around the work it holds", "[gpu][timer]") {
  TLB_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    DeviceBuffer buf(size_t{64} << 20);
    const CudaEvent a, b;
    // The work is launched 30 ms of host time after the first event, as a slow host would.
    auto timed_ms = [&](LaunchHold* hold) {
      if (hold) hold->hold(stream);
      TLB_CUDA_CHECK(cudaEventRecord(a, stream));
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      TLB_CUDA_CHECK(cudaMemsetAsync(buf.get(), 1, buf.bytes(), stream));
      TLB_CUDA_CHECK(cudaEventRecord(b, stream));
      if (hold) hold->release();
      TLB_CUDA_CHECK(cudaEventSynchronize(b));
      return elapsed_ms(a, b);
    };
    CHECK(timed_ms(nullptr) > 25.0);  // without a hold the events hold the host's 30 ms
    LaunchHold hold;
    for (int i = 0; i < 3; ++i) {
      const double held = timed_ms(&hold);
      INFO("held " << held << " ms");
      CHECK(held < 5.0);
      CHECK_FALSE(hold.timed_out());
    }
    // Never released: the waiting kernel gives up after a second and says so.
    hold.hold(stream);
    const auto start = std::chrono::steady_clock::now();
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(hold.timed_out());
    CHECK(waited_s > 0.5);
    CHECK(waited_s < 5.0);
    // A hold left waiting (its work threw before release) is let go by its destructor at once,
    // not after the second the kernel would wait on its own.
    const auto left_at = std::chrono::steady_clock::now();
    {
      LaunchHold left;
      left.hold(stream);
    }
    const double let_go_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - left_at).count();
    CHECK(let_go_s < 0.5);
  }
  TLB_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("The event probe reads one event's GPU cost: microseconds, alike twice", "[gpu][timer]") {
  TLB_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double first = stats::median(probe_event_costs_ms(stream));
  const double second = stats::median(probe_event_costs_ms(stream));
  INFO("event cost " << 1e3 * first << " us, then " << 1e3 * second << " us");
  // 2-3 us on an H100 or H200 where explain's short forwards measured it; zero would mean the
  // chains were not told apart, tens of microseconds that the host's launches leaked in.
  CHECK(first > 0.0002);
  CHECK(first < 0.02);
  CHECK(std::fabs(second - first) < std::max(0.001, 0.5 * first));
  // The capture ended: the stream takes ordinary work again.
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  TLB_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  CHECK(status == cudaStreamCaptureStatusNone);
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  TLB_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("tlbench run: a tiny grid end to end, then A/A", "[gpu][runner]") {
  TLB_REQUIRE_GPU();
  const fs::path dir = fresh_dir("run");
  const fs::path cases = write_cases(dir, kTinyCases);
  const fs::path out = dir / "out";
  tlb::test::CommandResult r = run_tlbench("run --config " + cases.string() + " " + kTinyArgs +
                                               " --blocks 2 --layer-trace --stage-times --json --out " + out.string(),
                                           dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json summary = json::parse(r.out);
  CHECK(summary["state"].get<std::string>() == "complete");
  CHECK(summary["points_on_disk"].get<size_t>() == kTinyPoints);

  const auto rows = rows_of(out);
  REQUIRE(rows.size() == kTinyPoints);
  check_each_point_once(rows);
  // Forwards of a few microseconds of kernels: the eager reference is the host's launch rate,
  // so the probe must call some group host-bound and time its graph candidate against the
  // replay.
  CHECK(std::any_of(rows.begin(), rows.end(), [](const PointRow& p) {
    return p.host_bound == true && p.config == "11111" && p.speedup_vs_graph_ref.has_value();
  }));
  for (const char* config : {"11000", "00000"})
    CHECK(std::any_of(rows.begin(), rows.end(), [&](const PointRow& p) {
      return p.host_bound == true && p.config == config && p.speedup_vs_graph_ref.has_value();
    }));
  for (const PointRow& p : rows) {
    INFO(p.case_id << " " << p.dtype << " " << p.config << " " << p.status << " " << p.note);
    tlb::test::check_timed_row(p);
    CHECK(*p.tflops > 0);
    CHECK(*p.peak_bytes > 0);
    CHECK(*p.predicted_bytes > 0);
    CHECK(*p.nan_count == 0);
    CHECK(*p.inf_count == 0);
    CHECK(p.strict_pass.has_value());
    REQUIRE(p.golden_rel_l2.has_value());
    REQUIRE(p.golden_rel_l2_ref.has_value());
    CHECK(*p.golden_rel_l2_ref < (p.dtype == "fp16" ? 1e-2 : 1e-4));
    CHECK(p.golden_pass == true);
    REQUIRE(p.layers.has_value());
    CHECK(p.layer_rel_l2.size() == static_cast<size_t>(*p.layers));
    CHECK(!p.dispatch.empty());
    CHECK(!p.timestamp.empty());
    if (p.config == "00000") CHECK(*p.strict_violations == 0);
    // Two blocks apart in time: their spread recorded and held by the interval, which reaches
    // at least z · spread / sqrt(2) either side of the pooled median.
    // --stage-times: seven stages, each with a time and a floor at the run's ceilings.
    REQUIRE(p.stage_ms.size() == 7);
    REQUIRE(p.stage_floor_ms.size() == 7);
    for (size_t s = 0; s < 7; ++s) {
      CHECK(p.stage_ms[s] > 0);
      CHECK(p.stage_floor_ms[s] > 0);
    }
    REQUIRE(p.blocks == 2);
    REQUIRE(p.block_spread.has_value());
    CHECK(*p.block_spread >= 0);
    const double reach = std::exp(1.959 * *p.block_spread / std::sqrt(2.0));
    CHECK(*p.speedup_ci_low <= *p.speedup / reach * (1 + 1e-9));
    CHECK(*p.speedup_ci_high >= *p.speedup * reach * (1 - 1e-9));
    // The eager baseline against its own replay: a verdict on every row, and where it is
    // host-bound a graph candidate's speedup against the replay with its interval around it.
    REQUIRE(p.host_bound.has_value());
    REQUIRE(p.ref_graph_ms.has_value());
    CHECK(*p.ref_graph_ms > 0);
    CHECK(*p.ref_graph_ms <= *p.ref_ms * 1.05);  // a replay is never much slower than its eager run
    // Every candidate of a host-bound group, eager ones replayed from their own capture.
    CHECK(p.speedup_vs_graph_ref.has_value() == *p.host_bound);
    if (p.speedup_vs_graph_ref) {
      CHECK(*p.ref_graph_ms < *p.ref_ms);
      CHECK(*p.speedup_vs_graph_ref_ci_low <= *p.speedup_vs_graph_ref);
      CHECK(*p.speedup_vs_graph_ref <= *p.speedup_vs_graph_ref_ci_high);
      CHECK_THAT(p.note, Catch::Contains("host-bound baseline"));
      // The reference's own row: both sides replay the same forward, so its figure is 1 within
      // noise. Pairing the eager candidate against the replay, or the ratio inverted, reads
      // far from 1 here (the eager runs are launch-bound, the more so with synchronous launches).
      if (p.config == "00000") CHECK(*p.speedup_vs_graph_ref == Approx(1.0).epsilon(0.10));
    }
  }
  const json run = json::parse(slurp(out / "run.json"));
  CHECK(run["state"].get<std::string>() == "complete");
  CHECK(!run["device"]["name"].get<std::string>().empty());
  CHECK(run["device"]["sm_count"].get<int>() > 0);
  // How the kernels launched is part of the record (PDL never below compute capability 9.0).
  const std::string cc = run["device"]["compute_capability"].get<std::string>();
  if (std::stoi(cc.substr(0, cc.find('.'))) < 9) CHECK_FALSE(run["device"]["kernel_launch"]["pdl"].get<bool>());
  CHECK(run["device"]["kernel_launch"]["pdl"].is_boolean());
  const std::string pdl_mode = run["device"]["kernel_launch"]["pdl_mode"].get<std::string>();
  CHECK((pdl_mode == "default" || pdl_mode == "all" || pdl_mode == "off"));
  CHECK(run["device"]["kernel_launch"]["pdl"].get<bool>() == (pdl_mode != "off"));
  CHECK(run["device"]["kernel_launch"]["gemm_variant"].is_string());
  CHECK(run["tool"]["git_commit"].is_string());
  CHECK(run["seed"].is_number());
  CHECK(run["techniques"].size() == 5);
  CHECK(run["groups"].size() == 4);
  CHECK(run["options"]["blocks"].get<int>() == 2);
  CHECK(run["options"]["stage_times"].get<bool>());
  const json ceilings = json::parse(slurp(out / "ceilings.json"));
  CHECK(ceilings["ceilings"].contains("fp16"));
  CHECK(ceilings["ceilings"].contains("fp32-tf32"));
  CHECK(run["block_spread"]["all"]["points"].get<size_t>() == kTinyPoints);
  CHECK(run["block_spread"]["all"]["max"].get<double>() >= run["block_spread"]["all"]["median"].get<double>());
  for (const json& g : run["groups"]) CHECK(g["golden_computed"].get<bool>());
  CHECK(fs::exists(out / "matrix_fp16.csv"));
  CHECK(fs::exists(out / "matrix_fp32.csv"));
  // points.csv holds the header and the same rows.
  {
    std::ifstream csv(out / "points.csv");
    std::string header;
    std::getline(csv, header);
    CHECK(header == csv_header());
  }

  // The same folder again without --resume: refused, nothing touched.
  const std::string before = slurp(out / "points.jsonl");
  r = run_tlbench("run --config " + cases.string() + " --out " + out.string(), dir);
  CHECK(r.exit_code == 2);
  CHECK(slurp(out / "points.jsonl") == before);

  // A/A: one reference-against-itself point per case and dtype, ratios near 1.
  const fs::path aa = dir / "aa";
  r = run_tlbench("run --config " + cases.string() + " --dtypes fp16,fp32 --aa --quick --out " + aa.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("A/A noise floor") != std::string::npos);
  const auto aa_rows = rows_of(aa);
  REQUIRE(aa_rows.size() == 4);
  for (const PointRow& p : aa_rows) {
    CHECK(p.status == StatusKind::aa);
    CHECK(p.config == "00000");
    REQUIRE(p.speedup.has_value());
    CHECK(*p.speedup > 0.8);  // tiny launch-bound forwards: loose, but a swapped side would show
    CHECK(*p.speedup < 1.25);
    CHECK(*p.strict_violations == 0);
    CHECK(p.golden_pass == true);
    CHECK_FALSE(p.host_bound.has_value());  // A/A times the reference against itself only
    CHECK(p.blocks == 1);                     // --quick: one block
  }
  fs::remove_all(dir);
}

TEST_CASE("tlbench run: a reference over the memory budget is nonviable, attn-only is the baseline",
          "[gpu][runner]") {
  TLB_REQUIRE_GPU();
  const fs::path dir = fresh_dir("nonviable");
  // fp16 dense scores and probabilities: 4 x 4 x 8192^2 x (4 + 2) B = 6 GiB; everything else
  // is a few hundred MiB.
  const fs::path cases = write_cases(dir, R"({"cases": [
    {"id": 7, "name": "long-narrow", "batch": 4, "seq": 8192, "d_model": 256, "heads": 4,
     "d_ff": 512, "layers": 1, "mask": "causal"}]})");
  size_t free_b = 0, total_b = 0;
  TLB_CUDA_CHECK(cudaFree(nullptr));
  TLB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  // Leave the child about 1.5 GiB minus its own context: under the scores, over the rest.
  const size_t reserve_mib = (free_b >> 20) - 1536;
  const fs::path out = dir / "out";
  const tlb::test::CommandResult r = run_tlbench(
      "run --config " + cases.string() + " --dtypes fp16 --configs 00000,01000,11000,10000 --quick " +
          "--mem-reserve-mib " + std::to_string(reserve_mib) + " --out " + out.string(),
      dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto rows = rows_of(out);
  REQUIRE(rows.size() == 4);
  for (const PointRow& p : rows) {
    INFO(p.config << " " << p.status << " " << p.note);
    CHECK(p.baseline == "01000");
    if (p.config[1] == '0') {
      CHECK(p.status == StatusKind::nonviable);
      CHECK(!p.ref_ms.has_value());
      CHECK(!p.speedup.has_value());
      CHECK(p.note.find("attn-only") != std::string::npos);
    } else {
      CHECK(p.status.ran());
      REQUIRE(p.speedup.has_value());
      CHECK(!p.golden_rel_l2_ref.has_value());  // the reference did not run
      REQUIRE(p.golden_rel_l2.has_value());
      CHECK(*p.golden_threshold == 5e-3);       // the fp16 floor
      CHECK(p.golden_pass == true);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("tlbench run: SIGINT then --resume gives every point exactly once", "[gpu][runner]") {
  TLB_REQUIRE_GPU();
  // In one block each row is on disk before the next point starts; in two, a group's rows go
  // to disk together once its points' second blocks are timed, and an interrupted group is
  // measured again on resume.
  for (const std::string blocks : {"1", "2"}) {
    INFO("blocks " << blocks);
    const fs::path dir = fresh_dir("sigint" + blocks);
    const fs::path cases = write_cases(dir, kTinyCases);
    const fs::path out = dir / "out";
    tlb::test::CommandResult r = run_tlbench("run --config " + cases.string() + " " + kTinyArgs + " --blocks " +
                                                 blocks + " --out " + out.string(),
                                             dir, "TLBENCH_INJECT_SIGINT_AFTER=5");
    INFO(r.err);
    REQUIRE(r.exit_code == 130);
    CHECK(r.err.find("interrupted; resume with: tlbench run --resume " + out.string()) != std::string::npos);
    const size_t on_disk = rows_of(out).size();
    if (blocks == "1") CHECK(on_disk == 5);
    CHECK(on_disk >= 5);
    CHECK(on_disk < kTinyPoints);
    CHECK(json::parse(slurp(out / "run.json"))["state"].get<std::string>() == "interrupted");

    r = run_tlbench("run --resume " + out.string(), dir);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto rows = rows_of(out);
    CHECK(rows.size() == kTinyPoints);
    CHECK(check_each_point_once(rows) == kTinyPoints);
    for (const PointRow& p : rows) CHECK(p.blocks == std::stoi(blocks));
    const json run = json::parse(slurp(out / "run.json"));
    CHECK(run["state"].get<std::string>() == "complete");
    CHECK(run["segments"].size() == 2);
    fs::remove_all(dir);
  }
}

TEST_CASE("tlbench run --time-limit: a limit no point fits in is exit 2, and --resume takes a new limit",
          "[gpu][runner]") {
  TLB_REQUIRE_GPU();
  const fs::path dir = fresh_dir("timelimit");
  const fs::path cases = write_cases(dir, kTinyCases);
  const fs::path out = dir / "out";
  // 10 ms, gone before the first group begins (or, on a fast host, during it): not one point
  // finishes, so asking to be resumed with the same limit would loop; the limit is refused as
  // too short. The stage times of one configuration only, which the resume keeps from run.json.
  tlb::test::CommandResult r = run_tlbench("run --config " + cases.string() + " " + kTinyArgs + " --blocks 2 --out " +
                                               out.string() + " --time-limit 0.01 --stage-times-configs 11x00",
                                           dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 2);
  CHECK(r.err.find("time limit of 0.01 s: not one point finished within it, so the same limit cannot make progress; "
                   "continue with a longer one: tlbench run --resume " + out.string() + " --time-limit ...") !=
        std::string::npos);
  CHECK(rows_of(out).empty());
  json run = json::parse(slurp(out / "run.json"));
  CHECK(run["state"].get<std::string>() == "time-limit");
  CHECK(run["segments"][0]["time_limit_s"].get<double>() == 0.01);
  CHECK(run["options"].dump().find("time_limit") == std::string::npos);  // the process's, not the run's

  // A limit that fits the whole grid: every point once, the new limit in the new segment.
  r = run_tlbench("run --resume " + out.string() + " --time-limit 1h", dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("ignoring --time-limit") == std::string::npos);
  const auto rows = rows_of(out);
  CHECK(rows.size() == kTinyPoints);
  check_each_point_once(rows);
  for (const PointRow& p : rows) {
    INFO(p.case_id << " " << p.dtype << " " << p.config);
    CHECK(p.stage_ms.size() == (p.config == "11000" ? 7u : 0u));
  }
  run = json::parse(slurp(out / "run.json"));
  CHECK(run["state"].get<std::string>() == "complete");
  REQUIRE(run["segments"].size() == 2);
  CHECK(run["segments"][1]["time_limit_s"].get<double>() == 3600);
  fs::remove_all(dir);
}

TEST_CASE("tlbench run: an injected kernel fault stops with exit 3 and resume completes",
          "[gpu][runner]") {
  TLB_REQUIRE_GPU();
  const fs::path dir = fresh_dir("fault");
  const fs::path cases = write_cases(dir, kTinyCases);
  const fs::path out = dir / "out";
  tlb::test::CommandResult r = run_tlbench("run --config " + cases.string() + " " + kTinyArgs + " --out " + out.string(),
                        dir, "TLBENCH_INJECT_FAULT=2:fp16:11000");
  INFO(r.err);
  REQUIRE(r.exit_code == 3);
  CHECK(r.err.find("injected fault") != std::string::npos);
  CHECK(r.err.find("resume with: tlbench run --resume " + out.string()) != std::string::npos);
  const auto before = rows_of(out);
  CHECK(before.size() < kTinyPoints);
  for (const PointRow& p : before) CHECK(!(p.case_id == 2 && p.dtype == "fp16" && p.config == "11000"));
  CHECK(json::parse(slurp(out / "run.json"))["state"].get<std::string>() == "device-fault");

  r = run_tlbench("run --resume " + out.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto rows = rows_of(out);
  CHECK(rows.size() == kTinyPoints);
  check_each_point_once(rows);
  bool faulted_point_measured = false;
  for (const PointRow& p : rows)
    if (p.case_id == 2 && p.dtype == "fp16" && p.config == "11000") faulted_point_measured = p.speedup.has_value();
  CHECK(faulted_point_measured);
  fs::remove_all(dir);
}

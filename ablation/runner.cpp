#include "runner.hpp"

#include <cuda_runtime.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "dispatch_table.hpp"
#include "matrices.hpp"
#include "plan_report.hpp"
#include "provenance.hpp"
#include "results_reader.hpp"
#include "resume.hpp"
#include "run_control.hpp"
#include "stack/layer_stack.hpp"
#include "stack/memory_plan.hpp"
#include "writers.hpp"

namespace tlb {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ------------------------------------------------------------------ options

ModeDefaults mode_defaults(bool quick) {
  if (quick) return {3, 200, 25.0, 5.0, 1, 3};
  return {10, 2000, 100.0, 25.0, 3, 5};
}

void resolve_defaults(RunOptions& o) {
  const ModeDefaults d = mode_defaults(o.quick);
  if (o.min_reps <= 0) o.min_reps = d.min_reps;
  if (o.max_reps <= 0) o.max_reps = d.max_reps;
  if (o.point_budget_ms <= 0) o.point_budget_ms = d.point_budget_ms;
  if (o.max_reps < o.min_reps)
    throw ConfigError(fmt::format("--max-reps {} is below --min-reps {}", o.max_reps, o.min_reps));
  if (o.tol.atol < 0 || o.tol.rtol < 0) throw ConfigError("--atol and --rtol must be >= 0");
  if (o.memory_margin_mib < 0) throw ConfigError("--mem-reserve-mib must be >= 0");
  if (!(o.point_budget_ms > 0)) throw ConfigError("--point-budget-ms must be > 0");
}

TimerOptions timer_options(const RunOptions& o) {
  const ModeDefaults d = mode_defaults(o.quick);
  TimerOptions t;
  t.warmup_min_runs = d.warmup_min_runs;
  t.warmup_min_ms = d.warmup_min_ms;
  t.stop.min_pairs = static_cast<size_t>(o.min_reps);
  t.stop.max_pairs = static_cast<size_t>(o.max_reps);
  t.stop.budget_ms = o.point_budget_ms;
  t.stop.target_rel_half_width = o.target_rel_ci;
  t.stop.floor_pairs = std::min(d.floor_pairs, t.stop.min_pairs);
  return t;
}

json options_to_json(const RunOptions& o) {
  return {
      {"cases_path", o.cases_path},
      {"techniques_path", o.techniques_path},
      {"cases", o.cases_sel},
      {"configs", o.configs_sel},
      {"dtypes", o.dtypes_sel},
      {"out_dir", o.out_dir},
      {"quick", o.quick},
      {"seed", o.seed},
      {"fp32_math", std::string(to_string(o.fp32_math))},
      {"l2_flush", o.l2_flush},
      {"aa", o.aa},
      {"layer_trace", o.layer_trace},
      {"atol", o.tol.atol},
      {"rtol", o.tol.rtol},
      {"min_reps", o.min_reps},
      {"max_reps", o.max_reps},
      {"point_budget_ms", o.point_budget_ms},
      {"target_rel_ci", o.target_rel_ci},
      {"memory_margin_mib", o.memory_margin_mib},
      {"policy", o.policy},
      {"dispatch_table", o.dispatch_table},
  };
}

RunOptions options_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw ConfigError(source + ": $.options: expected an object");
  auto need = [&](const char* key) -> const json& {
    auto it = j.find(key);
    if (it == j.end()) throw ConfigError(fmt::format("{}: $.options.{}: missing", source, key));
    return *it;
  };
  auto str = [&](const char* key) {
    const json& v = need(key);
    if (!v.is_string())
      throw ConfigError(fmt::format("{}: $.options.{}: expected a string", source, key));
    return v.get<std::string>();
  };
  auto boolean = [&](const char* key) {
    const json& v = need(key);
    if (!v.is_boolean())
      throw ConfigError(fmt::format("{}: $.options.{}: expected true or false", source, key));
    return v.get<bool>();
  };
  auto number = [&](const char* key) {
    const json& v = need(key);
    if (!v.is_number())
      throw ConfigError(fmt::format("{}: $.options.{}: expected a number", source, key));
    return v.get<double>();
  };
  RunOptions o;
  o.cases_path = str("cases_path");
  o.techniques_path = str("techniques_path");
  o.cases_sel = str("cases");
  o.configs_sel = str("configs");
  o.dtypes_sel = str("dtypes");
  o.out_dir = str("out_dir");
  o.quick = boolean("quick");
  {
    const json& v = need("seed");
    if (!v.is_number_unsigned() && !v.is_number_integer())
      throw ConfigError(fmt::format("{}: $.options.seed: expected an integer", source));
    o.seed = v.get<uint64_t>();
  }
  if (!parse_fp32_math(str("fp32_math"), o.fp32_math))
    throw ConfigError(fmt::format("{}: $.options.fp32_math: expected tf32 or ieee", source));
  o.l2_flush = boolean("l2_flush");
  o.aa = boolean("aa");
  o.layer_trace = boolean("layer_trace");
  o.tol.atol = number("atol");
  o.tol.rtol = number("rtol");
  o.min_reps = static_cast<int64_t>(number("min_reps"));
  o.max_reps = static_cast<int64_t>(number("max_reps"));
  o.point_budget_ms = number("point_budget_ms");
  o.target_rel_ci = number("target_rel_ci");
  o.memory_margin_mib = number("memory_margin_mib");
  // Runs begun before auto points existed have neither key.
  if (j.contains("policy")) o.policy = str("policy");
  if (j.contains("dispatch_table")) o.dispatch_table = str("dispatch_table");
  return o;
}

std::string file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot read", path));
  uint64_t h = 1469598103934665603ull;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[i]);
      h *= 1099511628211ull;
    }
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

namespace {

// ------------------------------------------------------------------ helpers

std::string human_bytes(uint64_t b) {
  const double x = static_cast<double>(b);
  if (x >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", x / (1024.0 * 1024 * 1024));
  if (x >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", x / (1024.0 * 1024));
  return fmt::format("{:.1f} KiB", x / 1024.0);
}

std::string human_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

double wall_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::optional<double> finite_or_none(double v) {
  if (std::isnan(v)) return std::nullopt;
  return v;
}

// A stage switch as a bit string over the run's techniques ("01000"), or the stage names where
// the technique set cannot express it.
std::string bits_of(const TechniqueSet& t, const StageSwitch& s) {
  for (uint32_t c = 0; c < t.num_configs(); ++c)
    if (t.stages(c) == s) return t.bits(c);
  std::string names;
  for (int i = 0; i < kNumStages; ++i)
    if (s.on[i]) names += (names.empty() ? "" : "+") + std::string(to_string(static_cast<Stage>(i)));
  return names.empty() ? "reference" : names;
}

json case_json(const CaseSpec& c) {
  const LayerShape& s = c.shape;
  json dt = json::array();
  for (DType d : c.dtypes) dt.push_back(std::string(to_string(d)));
  return {{"id", c.id},
          {"name", c.name},
          {"batch", s.batch},
          {"seq", s.seq},
          {"d_model", s.d_model},
          {"heads", s.heads},
          {"d_ff", s.d_ff},
          {"layers", s.layers},
          {"mask", std::string(to_string(s.mask))},
          {"valid_lens", s.valid_lens},
          {"activation", std::string(to_string(s.activation))},
          {"eps", s.eps},
          {"policy", c.policy},
          {"dtypes", dt},
          {"seed", c.seed}};
}

// One point of the schedule. An auto point carries the configuration the dispatch table chose
// for it, and the note that says where the choice came from.
struct SchedPoint {
  size_t case_index = 0;
  DType dtype = DType::fp16;
  uint32_t config = 0;
  bool automatic = false;
  std::string auto_note;
  std::string key;
};

// What the schedule holds, for the header line and run.json.
struct ScheduleInfo {
  uint32_t configs = 0;    // fixed configurations per (case, dtype)
  size_t auto_points = 0;
  std::string narrowed;    // --quick's narrowing, if any
};

// What a (case, dtype) group keeps while its points run.
struct Group {
  CaseSpec spec;  // seed resolved
  DType dtype = DType::fp16;
  size_t elements = 0;
  bool set_up = false;
  bool golden_tried = false;
  // Golden (fp32 IEEE, streamed attention), its output kept on the device.
  DeviceBuffer golden_out;
  bool golden_ok = false;
  std::string golden_note;
  double golden_ms = 0;
  std::vector<std::vector<float>> golden_layers;
  // The case's data in the dtype and the baseline path over it.
  std::unique_ptr<CaseData> data;
  BaselineChoice baseline_choice;
  std::string baseline_bits;
  std::unique_ptr<StackPath> baseline;
  DeviceBuffer baseline_out;  // a copy: the candidate check never races the timing runs
  std::optional<GoldenError> baseline_golden;
  // A failure that makes every point of the group the same row.
  std::string failed_status;  // "oom" | "error" | empty
  std::string failed_note;
};

class StopRun {
 public:
  enum Kind { interrupted, device_fault };
  StopRun(Kind k, std::string what) : kind(k), what(std::move(what)) {}
  Kind kind;
  std::string what;
};

// ------------------------------------------------------------------ the runner

class Runner {
 public:
  Runner(RunOptions opt, CaseSet cases, TechniqueSet techniques, std::vector<SchedPoint> sched,
         ScheduleInfo info, json run_doc, FaultInjection fault, std::optional<long> sigint_after)
      : opt_(std::move(opt)),
        cases_(std::move(cases)),
        techniques_(std::move(techniques)),
        sched_(std::move(sched)),
        info_(std::move(info)),
        doc_(std::move(run_doc)),
        fault_(std::move(fault)),
        sigint_after_(sigint_after) {}

  int run();

 private:
  void setup_device();
  void set_up_group(Group& g);
  void ensure_golden(Group& g);
  std::optional<PointRow> measure_point(Group& g, const SchedPoint& p);
  std::optional<PointRow> measure(Group& g, const SchedPoint& p);
  void choose_from_run(const Group& g, SchedPoint& p) const;
  PointRow base_row(const Group& g, const SchedPoint& p) const;
  void print_header(size_t pending) const;
  void write_row(const PointRow& r);
  void progress(const PointRow& r);
  void save_run_json(const std::string& state);
  void record_group(const Group& g);
  int finish(const std::string& state, const std::string& message);
  json summary_json(const std::string& state, int exit_code) const;
  void print_aa_table(std::FILE* out) const;
  std::string resume_command() const;

  RunOptions opt_;
  CaseSet cases_;
  TechniqueSet techniques_;
  std::vector<SchedPoint> sched_;
  ScheduleInfo info_;
  json doc_;

  std::unique_ptr<PointWriter> writer_;
  std::vector<PointRow> rows_;  // everything on disk: earlier segments and this one
  DoneSet done_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CudaRunClock> clock_;
  ClockTracker tracker_;
  uint64_t budget_bytes_ = 0;
  uint64_t used_at_start_ = 0;
  FaultInjection fault_;
  std::optional<long> sigint_after_;
  size_t written_ = 0;      // rows written by this process
  size_t to_measure_ = 0;   // pending points when this process started
  double t_start_ = 0;
  bool tty_ = false;
  bool progress_shown_ = false;
};

void Runner::print_header(size_t pending) const {
  std::set<size_t> case_set;
  std::set<int> dtype_set;
  for (const SchedPoint& p : sched_) {
    case_set.insert(p.case_index);
    dtype_set.insert(static_cast<int>(p.dtype));
  }
  auto count = [](size_t n, const char* what) {
    return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
  };
  const std::string configs = info_.auto_points == 0
                                  ? count(info_.configs, "configuration")
                                  : "(" + count(info_.configs, "configuration") + " + auto)";
  fmt::print(stderr, "tlbench run: {} x {} x {} = {}, {} to measure, into {}{}\n",
             count(case_set.size(), "case"), configs, count(dtype_set.size(), "dtype"),
             count(sched_.size(), "point"), pending, opt_.out_dir,
             info_.narrowed.empty() ? "" : "; " + info_.narrowed);
}

std::string Runner::resume_command() const {
  return fmt::format("tlbench run --resume {}", opt_.out_dir);
}

void Runner::setup_device() {
  TLB_CUDA_CHECK(cudaSetDevice(0));
  TLB_CUDA_CHECK(cudaFree(nullptr));  // create the context before measuring what is free
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CudaRunClock::Options co;
  co.l2_flush = opt_.l2_flush;
  clock_ = std::make_unique<CudaRunClock>(stream_, co);
  size_t free_b = 0, total_b = 0;
  TLB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  used_at_start_ = static_cast<uint64_t>(total_b - free_b);
  const uint64_t margin = static_cast<uint64_t>(opt_.memory_margin_mib * 1024 * 1024);
  budget_bytes_ = free_b > margin ? free_b - margin : 0;
  doc_["memory_budget"] = {
      {"bytes", budget_bytes_},
      {"source", fmt::format("free memory of device 0 at start ({}) minus a {} margin",
                             human_bytes(free_b), human_bytes(margin))}};
}

void Runner::ensure_golden(Group& g) {
  if (g.golden_tried) return;
  g.golden_tried = true;
  const CaseMemory cm = case_memory(g.spec.shape, g.dtype);
  if (cm.golden_peak + g.elements * sizeof(float) > budget_bytes_) {
    g.golden_note = fmt::format("golden needs {} > budget {}; not computed",
                                human_bytes(cm.golden_peak), human_bytes(budget_bytes_));
    return;
  }
  try {
    g.golden_out = DeviceBuffer(g.elements * sizeof(float));
    CaseData gdata(g.spec, DType::fp32, g.dtype, stream_);
    PathOptions po;
    po.golden = true;
    po.fp32_math = Fp32Math::ieee;
    po.keep_layer_outputs = opt_.layer_trace;
    StackPath golden(gdata, po, stream_);
    golden.poison();
    const double t0 = wall_seconds();
    golden.run();
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    g.golden_ms = (wall_seconds() - t0) * 1e3;
    TLB_CUDA_CHECK(cudaMemcpyAsync(g.golden_out.get(), golden.output(),
                                   g.elements * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (opt_.layer_trace) g.golden_layers = golden.layer_outputs_host();
    g.golden_ok = true;
    g.golden_note = fmt::format("golden computed in {:.1f} ms", g.golden_ms);
  } catch (const DeviceOutOfMemory& e) {
    g.golden_out = DeviceBuffer();
    g.golden_note = fmt::format("golden could not be allocated: {}", e.what());
  } catch (const DeviceError& e) {
    if (e.sticky()) throw;
    g.golden_out = DeviceBuffer();
    g.golden_note = fmt::format("golden failed: {}", e.what());
  }
}

void Runner::set_up_group(Group& g) {
  if (g.set_up) return;
  g.set_up = true;
  ensure_golden(g);
  try {
    g.data = std::make_unique<CaseData>(g.spec, g.dtype, g.dtype, stream_);
    PathOptions po;
    po.stages = g.baseline_choice.stages;
    po.policy = g.spec.policy;
    po.fp32_math = opt_.fp32_math;
    g.baseline = std::make_unique<StackPath>(*g.data, po, stream_);
    g.baseline->poison();
    g.baseline->run();
    const size_t bytes = g.elements * static_cast<size_t>(dtype_bytes(g.dtype));
    g.baseline_out = DeviceBuffer(bytes);
    TLB_CUDA_CHECK(cudaMemcpyAsync(g.baseline_out.get(), g.baseline->output(), bytes,
                                   cudaMemcpyDeviceToDevice, stream_));
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (g.golden_ok)
      g.baseline_golden = compare_to_golden(g.baseline_out.get(), g.dtype,
                                            g.golden_out.as<float>(), g.elements, stream_);
  } catch (const DeviceOutOfMemory& e) {
    g.failed_status = "oom";
    g.failed_note = fmt::format("baseline {} could not be allocated: {}", g.baseline_bits, e.what());
  } catch (const DeviceError& e) {
    if (e.sticky()) throw;
    g.failed_status = "error";
    g.failed_note = fmt::format("baseline {} failed: {}", g.baseline_bits, e.what());
  } catch (const std::exception& e) {
    g.failed_status = "error";
    g.failed_note = fmt::format("baseline {} failed: {}", g.baseline_bits, e.what());
  }
  if (!g.failed_status.empty()) {
    g.baseline.reset();
    g.data.reset();
    g.baseline_out = DeviceBuffer();
  }
}

PointRow Runner::base_row(const Group& g, const SchedPoint& p) const {
  const CaseSpec& c = g.spec;
  PointRow r;
  r.case_id = c.id;
  r.case_name = c.name;
  r.batch = c.shape.batch;
  r.seq = c.shape.seq;
  r.d_model = c.shape.d_model;
  r.heads = c.shape.heads;
  r.d_ff = c.shape.d_ff;
  r.layers = c.shape.layers;
  r.mask = std::string(to_string(c.shape.mask));
  r.dtype = std::string(to_string(g.dtype));
  r.math = g.dtype == DType::fp32 ? std::string(to_string(opt_.fp32_math)) : "fp32-acc";
  r.config = techniques_.bits(p.config);
  r.config_names = techniques_.names(p.config);
  if (p.automatic) {
    r.auto_choice = r.config;
    r.config = "auto";
    r.config_names = "auto=" + r.config_names;
  }
  r.policy = c.policy;
  return r;
}

std::optional<PointRow> Runner::measure_point(Group& g, const SchedPoint& p) {
  if (!p.automatic) return measure(g, p);
  SchedPoint a = p;
  choose_from_run(g, a);
  std::optional<PointRow> r = measure(g, a);
  // The choice comes first in an auto row's note, whatever else the point has to say.
  if (r) r->note = a.auto_note + (r->note.empty() ? "" : "; " + r->note);
  return r;
}

// An auto point comes last in its (case, dtype) group. Where this run has measured fixed
// configurations of the group (this GPU, this build, this exact shape), the dispatcher takes
// the table those rows make, as `tlbench dispatch` would build it from the folder, over the
// table chosen at schedule time; rows on disk from an earlier segment count, so a resumed run
// chooses the same.
void Runner::choose_from_run(const Group& g, SchedPoint& p) const {
  results::Results own;
  own.dir = opt_.out_dir;
  for (const Technique& t : techniques_.items) own.techniques.push_back(t.name);
  const std::string dtype(to_string(g.dtype));
  for (const PointRow& row : rows_) {
    if (row.case_id != g.spec.id || row.dtype != dtype || row.config == "auto") continue;
    own.points.push_back(results::point_from_json(to_json(row), opt_.out_dir + "/points.jsonl"));
  }
  if (own.points.empty()) return;
  DispatchTable t;
  try {
    t = build_dispatch_table(own);
  } catch (const ConfigError&) {
    return;  // no usable row: the schedule-time choice stands
  }
  if (t.entries.empty()) return;
  const DispatchEntry& e = t.entries.front();
  uint32_t config = 0;
  const int n = techniques_.size();
  for (int i = 0; i < n && i < static_cast<int>(e.config.size()); ++i)
    if (e.config[static_cast<size_t>(i)] == '1') config |= 1u << (n - 1 - i);
  p.config = config;
  p.auto_note = fmt::format(
      "auto chose {} ({}) from this run's {} rows of case {} {}: the fastest passing golden "
      "({:.3f}x; by forward time, ties within noise to strict)",
      techniques_.bits(config), techniques_.names(config), own.points.size(), g.spec.id, dtype,
      e.speedup);
}

std::optional<PointRow> Runner::measure(Group& g, const SchedPoint& p) {
  PointRow r = base_row(g, p);
  const StageSwitch cand_stages = techniques_.stages(p.config);
  // Where the group keeps a golden output and a baseline copy, they count against the budget.
  const uint64_t kept = g.elements * (sizeof(float) + static_cast<size_t>(dtype_bytes(g.dtype)));
  const uint64_t budget = budget_bytes_ > kept ? budget_bytes_ - kept : 0;
  PathMemoryOptions mem_opt;
  mem_opt.fp32_math = opt_.fp32_math;
  mem_opt.keep_layer_outputs = opt_.layer_trace;
  const PointViability v = assess_point(g.spec, g.dtype, cand_stages, budget, mem_opt);
  g.baseline_choice = v.baseline;
  g.baseline_bits = bits_of(techniques_, v.baseline.stages);
  r.baseline = g.baseline_bits;
  r.predicted_bytes = static_cast<int64_t>(v.peak_bytes);
  if (opt_.aa && !v.baseline.is_reference) {
    // An A/A row is the reference against itself, whatever other points would be timed against.
    r.baseline = techniques_.bits(0);
    r.status = "nonviable";
    r.note = v.baseline.reason;
    if (!v.viable) r.note += "; " + v.reason;
    // The golden still runs: it streams attention and exists for every case.
    ensure_golden(g);
    r.note += "; " + g.golden_note;
    return r;
  }
  if (!v.viable) {
    r.status = "nonviable";
    r.note = v.reason;
    if (!v.baseline.is_reference) r.note += "; " + v.baseline.reason;
    return r;
  }
  set_up_group(g);
  if (!g.failed_status.empty()) {
    r.status = g.failed_status;
    r.note = g.failed_note;
    return r;
  }
  if (!v.baseline.is_reference) r.note = v.baseline.reason;
  if (fault_.matches(g.spec.id, g.dtype, r.config))
    throw DeviceError(fmt::format("injected fault at case {} {} {} (TLBENCH_INJECT_FAULT)",
                                  g.spec.id, to_string(g.dtype), r.config),
                      true);

  auto note = [&](const std::string& s) { r.note += (r.note.empty() ? "" : "; ") + s; };
  uint64_t peak_used = device_used_bytes();
  auto sample_memory = [&] { peak_used = std::max(peak_used, device_used_bytes()); };

  PathOptions po;
  po.stages = cand_stages;
  po.policy = g.spec.policy;
  po.fp32_math = opt_.fp32_math;
  std::unique_ptr<StackPath> cand;
  try {
    cand = std::make_unique<StackPath>(*g.data, po, stream_);
    sample_memory();
  } catch (const DeviceOutOfMemory& e) {
    r.status = "oom";
    note(fmt::format("candidate could not be allocated: {}", e.what()));
    return r;
  } catch (const DeviceError& e) {
    if (e.sticky()) throw;
    r.status = "error";
    note(fmt::format("candidate could not be built: {}", e.what()));
    return r;
  } catch (const std::exception& e) {
    r.status = "error";
    note(fmt::format("candidate could not be built: {}", e.what()));
    return r;
  }

  try {
    // Accuracy: one run into poisoned outputs, so an element the path never wrote is NaN.
    cand->poison();
    cand->run();
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    sample_memory();
    // What ran, stage by stage; a wanted technique that fell back names its stage and why.
    std::vector<std::string> fb_stages, fb_reasons;
    bool tensor_core_stage = false;
    for (const StageDispatch& d : cand->dispatch()) {
      r.dispatch += fmt::format("{}{}={}", r.dispatch.empty() ? "" : ";", to_string(d.stage),
                                d.variant.empty() ? (d.fused ? "fused" : "reference") : d.variant);
      if (d.wanted && !d.fused) {
        fb_stages.emplace_back(to_string(d.stage));
        fb_reasons.push_back(fmt::format("{}: {}", to_string(d.stage), d.reason));
      }
      if (d.fused && (d.stage == Stage::qkv || d.stage == Stage::attn || d.stage == Stage::ffn))
        tensor_core_stage = true;
    }
    for (size_t i = 0; i < fb_reasons.size(); ++i)
      r.fallback_reasons += (i ? "; " : "") + fb_reasons[i];
    if (opt_.aa) {
      r.status = "aa";
      if (g.dtype == DType::fp32) r.math = std::string(to_string(Fp32Math::ieee));
    } else if (!fb_stages.empty()) {
      r.status = "fallback:";
      for (size_t i = 0; i < fb_stages.size(); ++i) r.status += (i ? "," : "") + fb_stages[i];
    } else {
      r.status = "ok";
    }

    const StrictStats st =
        compare_to_reference(cand->output(), g.baseline_out.get(), g.dtype, g.elements, opt_.tol,
                             stream_);
    r.max_abs_err = st.max_abs;
    r.max_rel_err = st.max_rel;
    r.strict_violations = static_cast<int64_t>(st.violations);
    r.strict_pass = strict_pass(st);
    r.nan_count = static_cast<int64_t>(st.nan);
    r.inf_count = static_cast<int64_t>(st.inf);
    if (st.ref_nonfinite > 0)
      note(fmt::format("baseline output has {} non-finite elements", st.ref_nonfinite));
    if (g.golden_ok) {
      const GoldenError ge =
          compare_to_golden(cand->output(), g.dtype, g.golden_out.as<float>(), g.elements, stream_);
      std::optional<double> ref_err;
      if (v.baseline.is_reference && g.baseline_golden) ref_err = g.baseline_golden->rel_l2;
      const Fp32Math ran = (g.dtype == DType::fp32 && opt_.fp32_math == Fp32Math::tf32 &&
                            tensor_core_stage)
                               ? Fp32Math::tf32
                               : Fp32Math::ieee;
      const GoldenVerdict gv = golden_verdict(ge, ref_err, g.dtype, ran);
      r.golden_rel_l2 = ge.rel_l2;
      if (ref_err) r.golden_rel_l2_ref = *ref_err;
      r.golden_threshold = gv.threshold;
      r.golden_pass = gv.pass;
      if (!gv.pass) note(fmt::format("golden: rel-L2 {:.3e} > {}", ge.rel_l2, gv.rule));
    } else {
      note(g.golden_note);
      // Without a golden there is no error norm, but a NaN is still a failure.
      if (st.nan + st.inf > 0) r.golden_pass = false;
    }
    if (opt_.layer_trace && g.golden_ok && !g.golden_layers.empty()) {
      PathOptions tpo = po;
      tpo.keep_layer_outputs = true;
      // A separate short-lived path, so keeping layer outputs never touches the timed one.
      cand.reset();
      {
        StackPath trace(*g.data, tpo, stream_);
        trace.poison();
        trace.run();
        TLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
        sample_memory();
        r.layer_rel_l2 = layer_rel_l2(trace.layer_outputs_host(), g.golden_layers);
      }
      cand = std::make_unique<StackPath>(*g.data, po, stream_);
    }

    // Timing: baseline against candidate, ABBA.
    StackPath& base = *g.baseline;
    StackPath& c = *cand;
    const PairedMeasurement m = measure_paired(
        *clock_, [&base] { base.run(); }, [&c] { c.run(); }, timer_options(opt_), tracker_,
        [] { return interrupt_requested(); });
    sample_memory();
    if (m.stop == stats::StopReason::interrupted) return std::nullopt;
    r.ref_ms = finite_or_none(m.ref.median);
    r.ref_spread_ms = finite_or_none(1.4826 * m.ref.mad);
    r.cand_ms = finite_or_none(m.cand.median);
    r.cand_spread_ms = finite_or_none(1.4826 * m.cand.mad);
    r.speedup = finite_or_none(m.speedup.median);
    if (!r.speedup) {
      r.status = "error";
      note(fmt::format("no usable timed pair: {} attempted, {} left out because their SM clock "
                       "ratio strayed from the point's typical one",
                       m.pairs_attempted, m.throttled_pairs));
    }
    r.speedup_ci_low = finite_or_none(m.speedup.lo);
    r.speedup_ci_high = finite_or_none(m.speedup.hi);
    r.speedup_ci_level = m.speedup.confidence;
    r.reps = static_cast<int64_t>(m.pairs);
    r.reps_attempted = static_cast<int64_t>(m.pairs_attempted);
    r.warmup_runs = static_cast<int64_t>(m.warmup_runs);
    r.throttled_samples = static_cast<int64_t>(m.throttled_samples);
    r.stop_reason = std::string(stats::to_string(m.stop));
    r.min_mhz = finite_or_none(m.min_mhz);
    r.max_mhz = finite_or_none(m.max_mhz);
    const double flops = forward_flops(g.spec.shape);
    if (r.cand_ms && *r.cand_ms > 0) r.tflops = flops / (*r.cand_ms * 1e-3) / 1e12;
    if (r.ref_ms && *r.ref_ms > 0) r.ref_tflops = flops / (*r.ref_ms * 1e-3) / 1e12;
  } catch (const DeviceOutOfMemory& e) {
    r.status = "oom";
    note(fmt::format("out of memory while running: {}", e.what()));
  } catch (const DeviceError& e) {
    if (e.sticky()) throw;
    r.status = "error";
    note(e.what());
  } catch (const std::exception& e) {
    r.status = "error";
    note(e.what());
  }
  r.peak_bytes = static_cast<int64_t>(peak_used > used_at_start_ ? peak_used - used_at_start_ : 0);
  return r;
}

void Runner::write_row(const PointRow& row) {
  PointRow r = row;
  r.timestamp = utc_timestamp();
  writer_->append(r);
  done_.add(r);
  rows_.push_back(r);
  ++written_;
  progress(r);
  if (sigint_after_ && static_cast<long>(written_) == *sigint_after_) std::raise(SIGINT);
}

void Runner::progress(const PointRow& r) {
  if (!tty_) return;
  const double elapsed = wall_seconds() - t_start_;
  const double eta =
      elapsed / static_cast<double>(written_) * static_cast<double>(to_measure_ - written_);
  std::string what = r.status;
  if (r.speedup && (r.status == "ok" || r.status == "aa" || r.status.rfind("fallback", 0) == 0))
    what = fmt::format("{:.3f}x [{:.3f}, {:.3f}]", *r.speedup, r.speedup_ci_low.value_or(NAN),
                       r.speedup_ci_high.value_or(NAN));
  fmt::print(stderr, "\r\033[K[{:>5}/{}] case {} {} {} {}: {}  elapsed {}  ETA {}", written_,
             to_measure_, r.case_id, r.case_name, r.dtype, r.config, what,
             human_duration(elapsed), human_duration(eta));
  std::fflush(stderr);
  progress_shown_ = true;
}

void Runner::record_group(const Group& g) {
  const std::string golden_note =
      g.golden_tried ? g.golden_note : "not computed: no point of this group was measured";
  json e = {{"case_id", g.spec.id},
            {"case_name", g.spec.name},
            {"dtype", std::string(to_string(g.dtype))},
            {"golden_computed", g.golden_ok},
            {"golden_ms", g.golden_ok ? json(g.golden_ms) : json(nullptr)},
            {"golden_note", golden_note},
            {"baseline", g.baseline_bits},
            {"baseline_reason", g.baseline_choice.reason},
            {"baseline_golden_rel_l2",
             g.baseline_golden && std::isfinite(g.baseline_golden->rel_l2)
                 ? json(g.baseline_golden->rel_l2)
                 : json(nullptr)},
            {"failed", g.failed_status.empty() ? json(nullptr) : json(g.failed_note)}};
  json& groups = doc_["groups"];
  if (!groups.is_array()) groups = json::array();
  for (json& old : groups)
    if (old.value("case_id", -1) == g.spec.id && old.value("dtype", std::string()) == e["dtype"].get<std::string>()) {
      old = e;
      return;
    }
  groups.push_back(e);
}

void Runner::save_run_json(const std::string& state) {
  doc_["state"] = state;
  doc_["updated_time"] = utc_timestamp();
  json& seg = doc_["segments"].back();
  seg["points_written"] = written_;
  seg["state"] = state;
  std::map<std::string, int> by_status;
  int failures = 0;
  for (const PointRow& r : rows_) {
    ++by_status[r.status.rfind("fallback", 0) == 0 ? "fallback" : r.status];
    if (r.golden_pass && !*r.golden_pass) ++failures;
  }
  doc_["points"] = {{"scheduled", sched_.size()},
                    {"on_disk", rows_.size()},
                    {"by_status", by_status},
                    {"golden_failures", failures}};
  write_file_atomic(opt_.out_dir + "/run.json", doc_.dump(2) + "\n");
}

void Runner::print_aa_table(std::FILE* out) const {
  fmt::print(out, "A/A noise floor: reference against itself, median of paired ratios and its "
                  "interval\n");
  fmt::print(out, "{:>4}  {:<20} {:<5} {:>8}  {:<21} {:>6}\n", "case", "name", "dtype", "ratio",
             "interval", "pairs");
  double worst = 0, widest = 0;
  std::string worst_where;
  for (const PointRow& r : rows_) {
    if (r.status != "aa" || !r.speedup) {
      if (r.status == "nonviable" || r.status == "oom" || r.status == "error")
        fmt::print(out, "{:>4}  {:<20} {:<5} {:>8}  {}\n", r.case_id, r.case_name, r.dtype,
                   r.status, r.note.substr(0, 100));
      continue;
    }
    const double lo = r.speedup_ci_low.value_or(NAN), hi = r.speedup_ci_high.value_or(NAN);
    fmt::print(out, "{:>4}  {:<20} {:<5} {:>8.4f}  [{:.4f}, {:.4f}]     {:>6}\n", r.case_id,
               r.case_name, r.dtype, *r.speedup, lo, hi, r.reps.value_or(0));
    if (std::fabs(*r.speedup - 1) > worst) {
      worst = std::fabs(*r.speedup - 1);
      worst_where = fmt::format("case {} {}", r.case_id, r.dtype);
    }
    widest = std::max(widest, std::max(hi - *r.speedup, *r.speedup - lo));
  }
  if (!worst_where.empty())
    fmt::print(out, "worst |ratio - 1|: {:.2f} % ({}); widest half-interval: {:.2f} %\n",
               100 * worst, worst_where, 100 * widest);
}

json Runner::summary_json(const std::string& state, int exit_code) const {
  std::map<std::string, int> by_status;
  json failures = json::array();
  for (const PointRow& r : rows_) {
    ++by_status[r.status.rfind("fallback", 0) == 0 ? "fallback" : r.status];
    if (r.golden_pass && !*r.golden_pass)
      failures.push_back({{"case_id", r.case_id},
                          {"dtype", r.dtype},
                          {"config", r.config},
                          {"golden_rel_l2", r.golden_rel_l2 && std::isfinite(*r.golden_rel_l2)
                                                ? json(*r.golden_rel_l2)
                                                : json(nullptr)},
                          {"golden_threshold", r.golden_threshold.value_or(0)},
                          {"nan_count", r.nan_count.value_or(0)}});
  }
  json s = {{"out_dir", opt_.out_dir},
            {"state", state},
            {"exit_code", exit_code},
            {"points_scheduled", sched_.size()},
            {"points_on_disk", rows_.size()},
            {"points_written_now", written_},
            {"by_status", by_status},
            {"golden_failures", failures},
            {"elapsed_s", wall_seconds() - t_start_}};
  if (state != "complete") s["resume_command"] = resume_command();
  if (opt_.aa) {
    json aa = json::array();
    for (const PointRow& r : rows_)
      if (r.status == "aa" && r.speedup)
        aa.push_back({{"case_id", r.case_id},
                      {"dtype", r.dtype},
                      {"ratio", *r.speedup},
                      {"ci_low", r.speedup_ci_low.value_or(0)},
                      {"ci_high", r.speedup_ci_high.value_or(0)},
                      {"pairs", r.reps.value_or(0)}});
    s["aa_noise_floor"] = aa;
  }
  return s;
}

int Runner::finish(const std::string& state, const std::string& message) {
  if (progress_shown_) fmt::print(stderr, "\n");
  std::vector<std::string> matrices;
  try {
    matrices = write_matrices(rows_, opt_.out_dir);
  } catch (const std::exception& e) {
    fmt::print(stderr, "tlbench: could not write the matrices: {}\n", e.what());
  }
  doc_["matrices"] = matrices;
  if (tracker_.max_mhz > 0) doc_["segments"].back()["sm_clock_max_observed_mhz"] = tracker_.max_mhz;
  doc_["end_time"] = utc_timestamp();
  doc_["segments"].back()["end_time"] = doc_["end_time"];
  if (opt_.aa) doc_["aa_noise_floor"] = summary_json(state, 0)["aa_noise_floor"];
  save_run_json(state);

  int rc = 0;
  if (state == "interrupted") rc = 130;
  else if (state == "device-fault") rc = 3;
  else {
    // A point that could not run (status error: a device or library failure that did not
    // poison the context) is a device failure for CI, ahead of an accuracy failure.
    for (const PointRow& r : rows_) {
      if (r.status == "error") rc = 3;
      else if (r.golden_pass && !*r.golden_pass && rc == 0) rc = 1;
    }
  }

  std::map<std::string, int> by_status;
  for (const PointRow& r : rows_) ++by_status[r.status.rfind("fallback", 0) == 0 ? "fallback" : r.status];
  std::string counts;
  for (const auto& [k, n] : by_status) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, k);
  if (opt_.aa) print_aa_table(stderr);
  fmt::print(stderr, "{} of {} points on disk ({}); {} measured now in {}; results in {}\n",
             rows_.size(), sched_.size(), counts.empty() ? "none" : counts, written_,
             human_duration(wall_seconds() - t_start_), opt_.out_dir);
  int failed = 0, errors = 0;
  for (const PointRow& r : rows_) {
    failed += r.golden_pass && !*r.golden_pass;
    errors += r.status == "error";
  }
  if (failed > 0)
    fmt::print(stderr, "{} point(s) failed the golden accuracy criterion (see note in points.csv)\n",
               failed);
  if (errors > 0)
    fmt::print(stderr, "{} point(s) could not run (status error; see note in points.csv)\n", errors);
  if (!message.empty()) fmt::print(stderr, "{}\n", message);
  if (opt_.json) fmt::print("{}\n", summary_json(state, rc).dump(2));
  return rc;
}

int Runner::run() {
  t_start_ = wall_seconds();
  tty_ = ::isatty(STDERR_FILENO) != 0;

  writer_ = std::make_unique<PointWriter>(opt_.out_dir);
  rows_ = writer_->existing();
  done_ = DoneSet(rows_);
  std::vector<std::string> keys;
  for (const SchedPoint& p : sched_) keys.push_back(p.key);
  to_measure_ = pending_points(keys, done_).size();

  json seg = {{"start_time", utc_timestamp()}, {"command_line", opt_.command_line}};
  if (!doc_.contains("segments") || !doc_["segments"].is_array()) doc_["segments"] = json::array();
  doc_["segments"].push_back(seg);

  try {
    setup_device();
    const DeviceInfo dev = query_device(0);
    doc_["segments"].back()["device"] = dev.name;
    if (!doc_.contains("device")) {
      doc_["device"] = to_json(dev);
    } else if (doc_["device"].value("name", "") != dev.name) {
      fmt::print(stderr, "tlbench: warning: resuming on {} a run begun on {}; rows say which "
                         "segment measured them by timestamp\n",
                 dev.name, doc_["device"].value("name", ""));
    }
  } catch (const DeviceError& e) {
    // Context creation failing after the device was seen: nothing measured, files intact.
    save_run_json("device-fault");
    fmt::print(stderr, "tlbench: device failure: {}\nresume with: {}\n", e.what(), resume_command());
    return 3;
  }
  install_interrupt_handlers();
  save_run_json("running");
  print_header(to_measure_);

  std::string stop_state = "complete", stop_message;
  size_t i = 0;
  try {
    while (i < sched_.size()) {
      // One (case, dtype) group: its points are contiguous in the schedule.
      size_t end = i;
      while (end < sched_.size() && sched_[end].case_index == sched_[i].case_index &&
             sched_[end].dtype == sched_[i].dtype)
        ++end;
      bool any_pending = false;
      for (size_t k = i; k < end; ++k) any_pending |= !done_.contains(sched_[k].key);
      if (!any_pending) {
        i = end;
        continue;
      }
      Group g;
      g.spec = cases_.cases[sched_[i].case_index];
      g.spec.seed = data_seed(g.spec, opt_.seed);
      g.spec.policy = layer_policy(g.spec);
      g.dtype = sched_[i].dtype;
      g.elements = static_cast<size_t>(g.spec.shape.tokens() * g.spec.shape.d_model);
      for (size_t k = i; k < end; ++k) {
        if (done_.contains(sched_[k].key)) continue;
        if (interrupt_requested()) throw StopRun(StopRun::interrupted, "");
        std::optional<PointRow> row = measure_point(g, sched_[k]);
        if (!row) throw StopRun(StopRun::interrupted, "");
        write_row(*row);
      }
      if (interrupt_requested()) {
        record_group(g);
        throw StopRun(StopRun::interrupted, "");
      }
      record_group(g);
      save_run_json("running");
      i = end;
    }
  } catch (const StopRun& s) {
    stop_state = "interrupted";
    stop_message = fmt::format("interrupted; resume with: {}", resume_command());
  } catch (const DeviceError& e) {
    // Sticky faults (and any device error outside a point) poison the context: stop here.
    stop_state = "device-fault";
    const SchedPoint* at = i < sched_.size() ? &sched_[i] : nullptr;
    for (const SchedPoint& p : sched_)
      if (!done_.contains(p.key)) {
        at = &p;
        break;
      }
    stop_message = fmt::format(
        "tlbench: device fault{}: {}\n{} points are on disk; resume with: {}",
        at ? fmt::format(" at case {} {} {}", cases_.cases[at->case_index].id,
                         to_string(at->dtype),
                         at->automatic ? std::string("auto") : techniques_.bits(at->config))
           : std::string(),
        e.what(), rows_.size(), resume_command());
  }
  if (stream_) {
    // After a sticky fault this fails too; there is nothing left to protect.
    cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }
  return finish(stop_state, stop_message);
}

// run.json's record of a dispatch table: where it is from and a fingerprint of its content.
json dispatch_table_record(const DispatchTable& t) {
  const std::string text = dispatch_table_json(t);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return {{"origin", t.origin},
          {"provenance", dispatch_provenance(t)},
          {"results", t.source.results},
          {"gpu", t.source.gpu},
          {"git_commit", t.source.git_commit},
          {"time", t.source.time},
          {"quick", t.source.quick},
          {"entries", t.entries.size()},
          {"fingerprint", fmt::format("fnv1a64:{:016x}", h)}};
}

TechniqueSet load_techniques_for(const std::string& techniques_path, const std::string& cases_path) {
  if (!techniques_path.empty()) return load_techniques(techniques_path);
  const fs::path beside = fs::path(cases_path).parent_path() / "techniques.json";
  std::error_code ec;
  if (fs::is_regular_file(beside, ec)) return load_techniques(beside.string());
  return default_techniques();
}

std::string default_out_dir() { return "runs/" + utc_now("%Y%m%d-%H%M%S"); }

std::string absolute(const std::string& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

}  // namespace

int run_command(RunOptions opt) {
  json doc;
  const std::string command_line = opt.command_line;
  const bool json_summary = opt.json;
  // Test hooks are read first: a malformed one is a usage error, before anything is written.
  FaultInjection fault = fault_injection_from_env();
  std::optional<long> sigint_after = sigint_after_from_env();
  if (opt.resume) {
    // Everything but the command line comes from the run being continued.
    const std::string dir = opt.out_dir;
    const std::string run_json = dir + "/run.json";
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      throw ConfigError(fmt::format("--resume {}: no such folder", dir));
    std::ifstream in(run_json);
    if (!in) throw ConfigError(fmt::format("--resume {}: {} is missing; not a tlbench run folder", dir, run_json));
    try {
      doc = json::parse(in);
    } catch (const json::parse_error& e) {
      throw ConfigError(fmt::format("{}: {}", run_json, e.what()));
    }
    if (!doc.is_object() || !doc.contains("options"))
      throw ConfigError(fmt::format("{}: $.options: missing", run_json));
    opt = options_from_json(doc["options"], run_json);
    opt.out_dir = dir;
    opt.resume = true;
    for (const char* which : {"cases", "techniques"}) {
      const json& f = doc.value(std::string(which) + "_file", json::object());
      const std::string path = f.value("path", "");
      const std::string want = f.value("fingerprint", "");
      if (path.empty() || want.empty()) continue;
      if (file_fingerprint(path) != want)
        throw ConfigError(fmt::format("{}: {} file {} changed since the run began ({} != {}); "
                                      "restore it or start a new run",
                                      run_json, which, path, file_fingerprint(path), want));
    }
  }
  opt.command_line = command_line;
  opt.json = json_summary;
  resolve_defaults(opt);
  // Recorded absolute, so a resume from another folder reads the same table.
  if (!opt.resume && !opt.dispatch_table.empty()) opt.dispatch_table = absolute(opt.dispatch_table);

  // Load and validate everything before the first byte is written.
  const CaseSet cases = load_cases(opt.cases_path);
  const TechniqueSet techniques = load_techniques_for(opt.techniques_path, opt.cases_path);
  Selection sel =
      parse_selection(opt.cases_sel, opt.configs_sel, opt.dtypes_sel, cases, techniques);
  apply_policy_option(sel, opt.policy);
  if (opt.quick && !opt.aa) narrow_for_quick(sel, techniques);
  const std::vector<GridPoint> grid = build_grid(cases, techniques, sel, opt.seed);
  // The dispatch table is read (and checked) whenever one is named or a point needs it.
  const bool any_auto =
      !opt.aa && std::any_of(grid.begin(), grid.end(), [](const GridPoint& p) { return p.automatic; });
  std::optional<DispatchTable> table;
  if (any_auto || !opt.dispatch_table.empty()) table = dispatch_table_for(opt.dispatch_table);

  if (!opt.resume) {
    if (opt.out_dir.empty()) opt.out_dir = default_out_dir();
    std::error_code ec;
    if (fs::exists(opt.out_dir, ec))
      throw ConfigError(fmt::format("--out {}: the folder exists; continue that run with "
                                    "--resume {} or choose another folder",
                                    opt.out_dir, opt.out_dir));
  }

  std::string why;
  if (!cuda_device_present(&why)) {
    fmt::print(stderr, "{}\n", why);
    return 3;
  }

  // The schedule: grid order; A/A keeps one reference point per (case, dtype).
  // An auto point's configuration is chosen here from the dispatch table; where the run also
  // measures its group's fixed configurations it is chosen again, from those rows, when its
  // turn comes (choose_from_run).
  std::vector<SchedPoint> sched;
  ScheduleInfo info;
  info.configs = opt.aa ? 1 : selected_config_count(sel, techniques);
  info.narrowed = sel.narrowed;
  std::set<std::pair<size_t, int>> seen;
  for (const GridPoint& gp : grid) {
    SchedPoint p;
    p.case_index = gp.case_index;
    p.dtype = gp.dtype;
    p.config = gp.config;
    const CaseSpec& c = cases.cases[p.case_index];
    if (opt.aa) {
      if (!seen.insert({gp.case_index, static_cast<int>(gp.dtype)}).second) continue;
      p.config = 0;
    } else if (gp.automatic) {
      const AutoConfig a = auto_config(*table, c, p.dtype, opt.fp32_math, techniques);
      p.automatic = true;
      p.config = a.config;
      p.auto_note = a.note;
      ++info.auto_points;
    }
    p.key = point_key(c.id, to_string(p.dtype), p.automatic ? "auto" : techniques.bits(p.config),
                      layer_policy(c));
    sched.push_back(p);
  }

  if (!opt.resume) {
    std::error_code ec;
    fs::create_directories(opt.out_dir, ec);
    if (ec) throw ConfigError(fmt::format("--out {}: cannot create: {}", opt.out_dir, ec.message()));
    opt.cases_path = absolute(opt.cases_path);
    if (!opt.techniques_path.empty()) opt.techniques_path = absolute(opt.techniques_path);
    doc = json::object();
    doc["tool"] = tool_json();
    doc["state"] = "running";
    doc["start_time"] = utc_timestamp();
    doc["command_line"] = opt.command_line;
    doc["seed"] = opt.seed;
    doc["options"] = options_to_json(opt);
    doc["mode"] = opt.aa ? "aa" : "ablation";
    doc["cases_file"] = {{"path", opt.cases_path}, {"fingerprint", file_fingerprint(opt.cases_path)}};
    // The built-in technique set has no file to fingerprint.
    doc["techniques_file"] = {{"path", techniques.source},
                              {"fingerprint", fs::is_regular_file(techniques.source, ec)
                                                  ? file_fingerprint(techniques.source)
                                                  : std::string()}};
    json tech = json::array();
    for (const Technique& t : techniques.items)
      tech.push_back({{"name", t.name}, {"description", t.description}});
    doc["techniques"] = tech;
    json cj = json::array();
    for (const CaseSpec& c : cases.cases) cj.push_back(case_json(c));
    doc["cases"] = cj;
    doc["grid"] = {{"points", sched.size()},
                   {"configurations", info.configs},
                   {"auto_points", info.auto_points}};
    if (!info.narrowed.empty()) doc["grid"]["narrowed"] = info.narrowed;
    doc["golden_tolerances"] = json::array();
    for (const GoldenTolerance& t : kGoldenTolerances)
      doc["golden_tolerances"].push_back({{"dtype", std::string(to_string(t.dtype))},
                                          {"math", std::string(to_string(t.math))},
                                          {"floor", t.floor},
                                          {"allowance", t.allowance},
                                          {"ratio", kGoldenRatio}});
  }
  doc["resume_command"] = fmt::format("tlbench run --resume {}", opt.out_dir);
  if (info.auto_points > 0) {
    // The table auto points are chosen from. A resumed run keeps its points but may meet another
    // table (a rebuilt binary): the rows say which they used, run.json keeps both.
    const json used = dispatch_table_record(*table);
    if (doc.contains("dispatch_table") && doc["dispatch_table"] != used) {
      fmt::print(stderr, "tlbench: warning: auto points measured from now on use {}, not the "
                         "table this run began with ({})\n",
                 dispatch_provenance(*table), doc["dispatch_table"].value("provenance", "?"));
      if (!doc["earlier_dispatch_tables"].is_array()) doc["earlier_dispatch_tables"] = json::array();
      doc["earlier_dispatch_tables"].push_back(doc["dispatch_table"]);
    }
    doc["dispatch_table"] = used;
  }

  Runner runner(opt, cases, techniques, std::move(sched), std::move(info), std::move(doc),
                std::move(fault), sigint_after);
  return runner.run();
}

}  // namespace tlb

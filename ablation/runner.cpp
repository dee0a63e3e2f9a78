#include "runner.hpp"

#include <cuda_runtime.h>
#include <fmt/core.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "ceilings_cache.hpp"
#include "common/cuda_check.hpp"
#include "dispatch_table.hpp"
#include "matrices.hpp"
#include "point_measure.hpp"
#include "provenance.hpp"
#include "resume.hpp"
#include "run_control.hpp"
#include "run_document.hpp"
#include "run_report.hpp"
#include "run_schedule.hpp"
#include "shard.hpp"
#include "time_limit.hpp"
#include "writers.hpp"

namespace tlb {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// How long after a stop was asked a run may take to reach its next poll before the watchdog
// says where it waits: a timing batch or a stage-time pass of the slowest official point (case
// 14's FP32 reference, a quarter of a second a forward) takes a few seconds.
constexpr double kStopGraceS = 30;

// A point as the watchdog names it: "case 13 fp16, configuration 11010".
std::string point_label(int case_id, std::string_view dtype, std::string_view config) {
  return fmt::format("case {} {}, configuration {}", case_id, dtype, config);
}
std::string point_label(const PointRow& r) { return point_label(r.case_id, r.dtype, r.config); }

// Thrown inside the group loop where Ctrl-C (or SIGTERM) asked the run to stop, or
// --time-limit's deadline passed.
struct Interrupted {};
// Thrown before a group that --time-limit says will not fit; the message says why.
struct OutOfTime {
  std::string message;
};

class Runner {
 public:
  // group_model: each (case, dtype) group's modelled time, for --time-limit.
  Runner(RunOptions opt, CaseSet cases, TechniqueSet techniques, Schedule sched, json run_doc,
         FaultInjection fault, std::optional<long> sigint_after, std::vector<ShardGroup> group_model,
         std::optional<ConfigPatterns> stage_time_points)
      : opt_(std::move(opt)),
        cases_(std::move(cases)),
        techniques_(std::move(techniques)),
        sched_(std::move(sched)),
        doc_(std::move(run_doc)),
        fault_(std::move(fault)),
        sigint_after_(sigint_after),
        group_model_(std::move(group_model)),
        stage_time_points_(std::move(stage_time_points)) {}

  int run();

 private:
  bool open_device();
  void measure_ceilings_first();
  void measure_groups();
  void measure_group(size_t begin, size_t end);
  void measure_group_in_time(size_t begin, size_t end);
  std::string group_name(const SchedPoint& p) const;
  std::string point_name(const SchedPoint& p) const;
  void doing(std::string what) {
    if (watchdog_) watchdog_->doing(std::move(what));
  }
  bool all_points_done() const {
    return std::all_of(sched_.points.begin(), sched_.points.end(),
                       [&](const SchedPoint& p) { return done_.contains(p.key); });
  }
  std::vector<RowAwaitingStages> measure_in_blocks(Group& g, const MeasureContext& ctx, const std::vector<size_t>& which,
                                                   const std::vector<PointRow>& known);
  std::string device_fault_message(const DeviceError& e) const;
  void write_row(const PointRow& r);
  void save_run_json(const std::string& state);
  int finish(const std::string& state, const std::string& message);
  // A time limit within which not one point finished: a resume with the same limit cannot
  // progress, so it is the limit that is wrong (exit 2, as for a bad option), not a reason to
  // try again.
  bool limit_left_no_progress(const std::string& state) const { return state == kTimeLimitState && written_ == 0; }
  std::string resume_command() const { return resume_command_for(opt_.out_dir); }
  MeasureContext context() {
    return {opt_,          techniques_,    stream_, *clock_,
            tracker_,      budget_bytes_,  used_at_start_, fault_,
            stage_time_points_ ? &*stage_time_points_ : nullptr};
  }

  RunOptions opt_;
  CaseSet cases_;
  TechniqueSet techniques_;
  Schedule sched_;
  json doc_;

  std::unique_ptr<PointWriter> writer_;
  std::vector<PointRow> rows_;  // everything on disk: earlier segments and this one
  const SchedPoint* measuring_ = nullptr;  // the point whose block is being timed
  DoneSet done_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CudaRunClock> clock_;
  ClockTracker tracker_;
  uint64_t budget_bytes_ = 0;
  uint64_t used_at_start_ = 0;
  FaultInjection fault_;
  std::optional<long> sigint_after_;
  std::vector<ShardGroup> group_model_;
  std::optional<TimeBudget> time_budget_;
  std::optional<ConfigPatterns> stage_time_points_;  // --stage-times-configs; none: every point
  size_t written_ = 0;     // rows written by this process
  size_t to_measure_ = 0;  // pending points when this process started
  double t_start_ = 0;
  std::optional<ProgressLine> progress_;
  std::optional<StopWatchdog> watchdog_;  // last: its thread outlives nothing it reads
};

// The stream, the run clock and the memory budget, and the device in run.json. Returns false
// (with run.json saying "device-fault") where the context cannot be created.
bool Runner::open_device() {
  try {
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
    doc_["memory_budget"] = {{"bytes", budget_bytes_},
                             {"source", fmt::format("free memory of device 0 at start ({}) minus a {} margin",
                                                    human_bytes(free_b), human_bytes(margin))}};
    const DeviceInfo dev = query_device(0);
    doc_["segments"].back()["device"] = dev.name;
    // Per process: where its thread ran against the GPU's NUMA node, and how busy the host
    // was; eager (host-bound) timings move with them between processes.
    doc_["segments"].back()["host"] = host_json(0);
    if (!doc_.contains("device")) {
      doc_["device"] = to_json(dev);
    } else if (doc_["device"].value("name", "") != dev.name) {
      fmt::print(stderr, "tlbench: warning: resuming on {} a run begun on {}; rows say which "
                         "segment measured them by timestamp\n",
                 dev.name, doc_["device"].value("name", ""));
    }
    return true;
  } catch (const DeviceError& e) {
    // Context creation failing after the device was seen: nothing measured, files intact.
    save_run_json("device-fault");
    fmt::print(stderr, "tlbench: device failure: {}\nresume with: {}\n", e.what(), resume_command());
    return false;
  }
}

// The points sched_.points[k] for k in `which`, together: each one's first block in turn, then
// each one's second, and so on, so a point's blocks lie a round of the others apart; then
// their rows, each widened by the spread the group's blocks showed, handed back to await
// their stage times. (In one block a row goes to disk, stage times and all, as soon as its
// point is measured, and nothing is handed back.) An auto point chooses from `known`. A run
// interrupted here loses the rows of these points, never a row on disk: --resume measures
// them again.
std::vector<RowAwaitingStages> Runner::measure_in_blocks(Group& g, const MeasureContext& ctx,
                                                         const std::vector<size_t>& which,
                                                         const std::vector<PointRow>& known) {
  const auto blocks = static_cast<size_t>(opt_.blocks);
  std::vector<PendingPoint> pending;
  std::vector<size_t> pending_at;  // each pending point's index in the schedule
  for (size_t k : which) {
    if (interrupt_requested()) throw Interrupted{};
    measuring_ = &sched_.points[k];
    doing(point_name(sched_.points[k]));
    std::optional<PendingPoint> pp = begin_point(ctx, g, sched_.points[k], known);
    if (!pp) throw Interrupted{};
    // In one block a point is done: its row goes to disk before the next point starts.
    if (blocks == 1) {
      doing(point_name(sched_.points[k]) + ", its row");
      RowAwaitingStages held = finish_point(ctx, g, std::move(*pp));
      doing("the stage times of " + point_label(held.row));
      time_stages(ctx, g, held);
      write_row(held.row);
    } else {
      pending.push_back(std::move(*pp));
      pending_at.push_back(k);
    }
  }
  for (size_t b = 1; b < blocks; ++b)
    for (size_t i = 0; i < pending.size(); ++i) {
      if (!pending[i].wants_block(blocks)) continue;
      measuring_ = &sched_.points[pending_at[i]];
      doing(fmt::format("{}, block {}", point_name(*measuring_), b + 1));
      if (interrupt_requested() || !time_next_block(ctx, g, pending[i])) throw Interrupted{};
    }
  measuring_ = nullptr;
  note_block_spreads(g, pending);
  std::vector<RowAwaitingStages> held;
  for (size_t i = 0; i < pending.size(); ++i) {
    doing(point_name(sched_.points[pending_at[i]]) + ", its row");
    held.push_back(finish_point(ctx, g, std::move(pending[i])));
  }
  return held;
}

// The pending points of one (case, dtype) group, sched_.points[begin, end): its fixed
// configurations in blocks, then its auto point, which chooses from their rows (its blocks lie
// only a rebuild of its path apart); then the stage times of the rows that want them, after
// every timed block of the group, and the rows to disk.
void Runner::measure_group(size_t begin, size_t end) {
  const std::vector<SchedPoint>& pts = sched_.points;
  Group g = make_group(cases_, pts[begin], opt_.seed);
  // Rows of an earlier segment still tell the group's typical block spread.
  for (const PointRow& r : rows_)
    if (r.case_id == g.spec.id && r.dtype == to_string(g.dtype) && r.config != "auto" && r.block_spread && r.blocks &&
        *r.blocks >= 2)
      g.block_sds.push_back(*r.block_spread);
  const MeasureContext ctx = context();
  std::vector<size_t> fixed, automatic;
  for (size_t k = begin; k < end; ++k)
    if (!done_.contains(pts[k].key)) (pts[k].automatic ? automatic : fixed).push_back(k);
  std::vector<RowAwaitingStages> held = measure_in_blocks(g, ctx, fixed, rows_);
  if (!automatic.empty()) {
    std::vector<PointRow> known = rows_;
    for (const RowAwaitingStages& h : held) known.push_back(h.row);
    for (size_t k : automatic)
      for (RowAwaitingStages& h : measure_in_blocks(g, ctx, {k}, known)) held.push_back(std::move(h));
  }
  for (RowAwaitingStages& h : held) {
    if (interrupt_requested()) throw Interrupted{};
    doing("the stage times of " + point_label(h.row));
    time_stages(ctx, g, h);
  }
  for (const RowAwaitingStages& h : held) write_row(h.row);
  record_group(doc_, g);
  if (interrupt_requested()) throw Interrupted{};
  save_run_json("running");
}

// Group by group; a group's points are contiguous in the schedule.
// --stage-times: the ceilings of every dtype still to measure, before the first group, so
// that their seconds of full-power GEMMs heat no group's blocks and their memory is not
// wanted beside a group's paths. Kept in the run folder, where the groups read them; one
// that cannot be measured now is tried again by its first group, whose rows then say why.
void Runner::measure_ceilings_first() {
  std::set<DType> dtypes;
  for (const SchedPoint& p : sched_.points)
    if (!done_.contains(p.key)) dtypes.insert(p.dtype);
  const DeviceInfo dev = query_device(0);
  for (DType d : dtypes) {
    doing(fmt::format("the {} ceilings", to_string(d)));
    try {
      std::string source;
      ceilings_for(opt_.out_dir + "/ceilings.json", dev, d, opt_.fp32_math, stream_, source);
    } catch (const DeviceError& e) {
      if (e.sticky()) throw;
      fmt::print(stderr, "tlbench run: {} ceilings not measured yet: {}\n", to_string(d), e.what());
    } catch (const std::exception& e) {
      fmt::print(stderr, "tlbench run: {} ceilings not kept: {}\n", to_string(d), e.what());
    }
  }
}

// A time for the time limit's messages: three digits of seconds under a minute, where a group's
// prediction and a short limit live.
std::string limit_time(double s) { return s < 60 ? fmt::format("{:.3g} s", std::max(s, 0.0)) : human_duration(s); }

std::string Runner::group_name(const SchedPoint& p) const {
  return fmt::format("case {} {}", cases_.cases[p.case_index].id, to_string(p.dtype));
}

std::string Runner::point_name(const SchedPoint& p) const {
  return point_label(cases_.cases[p.case_index].id, to_string(p.dtype),
                     p.automatic ? "auto" : techniques_.bits(p.config));
}

// A group under --time-limit (time_limit.hpp): begun where its modelled time (its pending
// points' share of the plan's group), at the pace this process has measured so far, fits in
// what is left, and always as the process's first group while the limit has not passed.
void Runner::measure_group_in_time(size_t begin, size_t end) {
  if (!time_budget_) return measure_group(begin, end);
  const SchedPoint& first = sched_.points[begin];
  const int case_id = cases_.cases[first.case_index].id;
  size_t pending = 0;
  for (size_t k = begin; k < end; ++k) pending += !done_.contains(sched_.points[k].key);
  double modelled = 0;
  for (const ShardGroup& m : group_model_)
    if (m.case_id == case_id && m.dtype == first.dtype && m.points > 0)
      modelled = m.seconds * std::min(1.0, static_cast<double>(pending) / static_cast<double>(m.points));
  const double now = wall_seconds();
  const double predicted = time_budget_->predicted_s(modelled), left = time_budget_->left_s(now);
  if (!time_budget_->begin(modelled, now))
    throw OutOfTime{fmt::format("time limit: {} ({} points, about {} at this run's pace) does not fit in the {} "
                                "left of {}",
                                group_name(first), pending, limit_time(predicted), limit_time(left),
                                limit_time(time_budget_->limit_s()))};
  if (predicted > left)
    fmt::print(stderr, "tlbench run: time limit: {} is modelled at {}, more than the {} left; begun anyway, as "
                       "this process's first group\n",
               group_name(first), limit_time(predicted), limit_time(left));
  measure_group(begin, end);
  time_budget_->record(modelled, wall_seconds() - now);
}

void Runner::measure_groups() {
  const std::vector<SchedPoint>& pts = sched_.points;
  for (size_t i = 0; i < pts.size();) {
    size_t end = i;
    while (end < pts.size() && pts[end].case_index == pts[i].case_index && pts[end].dtype == pts[i].dtype)
      ++end;
    const bool any_pending =
        std::any_of(pts.begin() + static_cast<long>(i), pts.begin() + static_cast<long>(end),
                    [&](const SchedPoint& p) { return !done_.contains(p.key); });
    if (any_pending) measure_group_in_time(i, end);
    i = end;
  }
}

std::string Runner::device_fault_message(const DeviceError& e) const {
  // The point being measured, else the first not on disk.
  const SchedPoint* at = measuring_;
  for (const SchedPoint& p : sched_.points)
    if (at == nullptr && !done_.contains(p.key)) at = &p;
  const std::string where =
      at ? fmt::format(" at case {} {} {}", cases_.cases[at->case_index].id, to_string(at->dtype),
                       at->automatic ? std::string("auto") : techniques_.bits(at->config))
         : std::string();
  return fmt::format("tlbench: device fault{}: {}\n{} points are on disk; resume with: {}", where, e.what(),
                     rows_.size(), resume_command());
}

void Runner::write_row(const PointRow& row) {
  PointRow r = row;
  r.timestamp = utc_timestamp();
  writer_->append(r);
  done_.add(r);
  rows_.push_back(r);
  ++written_;
  progress_->show(r, written_);
  if (sigint_after_ && static_cast<long>(written_) == *sigint_after_) std::raise(SIGINT);
}

void Runner::save_run_json(const std::string& state) {
  doc_["state"] = state;
  doc_["updated_time"] = utc_timestamp();
  json& seg = doc_["segments"].back();
  seg["points_written"] = written_;
  seg["state"] = state;
  record_point_counts(doc_, rows_, sched_.points.size());
  write_file_atomic(opt_.out_dir + "/run.json", doc_.dump(2) + "\n");
}

int Runner::finish(const std::string& state, const std::string& message) {
  progress_->end();
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
  if (opt_.aa) doc_["aa_noise_floor"] = aa_noise_floor(rows_);
  save_run_json(state);

  const int rc = limit_left_no_progress(state) ? 2 : run_exit_code(state, rows_);
  RunOutcome o;
  o.state = state;
  o.out_dir = opt_.out_dir;
  o.resume_command = resume_command();
  o.scheduled = sched_.points.size();
  o.written_now = written_;
  o.elapsed_s = wall_seconds() - t_start_;
  o.aa = opt_.aa;
  print_outcome(o, rows_, message);
  if (opt_.json) fmt::print("{}\n", summary_json(o, rows_, rc).dump(2));
  return rc;
}

int Runner::run() {
  t_start_ = wall_seconds();
  writer_ = std::make_unique<PointWriter>(opt_.out_dir);
  rows_ = writer_->existing();
  done_ = DoneSet(rows_);
  std::vector<std::string> keys;
  for (const SchedPoint& p : sched_.points) keys.push_back(p.key);
  to_measure_ = pending_points(keys, done_).size();
  progress_.emplace(to_measure_, t_start_);

  json seg = {{"start_time", utc_timestamp()}, {"command_line", opt_.command_line}};
  if (!doc_.contains("segments") || !doc_["segments"].is_array()) doc_["segments"] = json::array();
  doc_["segments"].push_back(seg);
  if (!open_device()) return 3;
  install_interrupt_handlers();
  watchdog_.emplace(kStopGraceS, stderr);
  set_stop_deadline(0);
  if (opt_.time_limit_s > 0) {
    time_budget_.emplace(opt_.time_limit_s, t_start_);
    set_stop_deadline(time_budget_->deadline_s());
    doc_["segments"].back()["time_limit_s"] = opt_.time_limit_s;
  }
  save_run_json("running");
  print_header(sched_, to_measure_, opt_.out_dir);

  std::string stop_state = "complete", stop_message;
  try {
    if (opt_.stage_times) measure_ceilings_first();
    measure_groups();
  } catch (const Interrupted&) {
    if (all_points_done()) {
      // The deadline (or a signal) came after the last row was on disk: nothing is left to stop.
    } else if (interrupt_signal() == 0 && deadline_passed()) {
      stop_state = kTimeLimitState;
      const std::string during =
          measuring_ ? fmt::format(" during {}, whose unfinished points are measured again on resume",
                                   group_name(*measuring_))
                     : std::string();
      stop_message = fmt::format("time limit of {} reached{}; resume with: {}", limit_time(opt_.time_limit_s),
                                 during, resume_command());
    } else {
      stop_state = "interrupted";
      stop_message = fmt::format("interrupted; resume with: {}", resume_command());
    }
  } catch (const OutOfTime& e) {
    stop_state = kTimeLimitState;
    stop_message = fmt::format("{}; resume with: {}", e.message, resume_command());
  } catch (const DeviceError& e) {
    // Sticky faults (and any device error outside a point) poison the context: stop here.
    stop_state = "device-fault";
    stop_message = device_fault_message(e);
  }
  watchdog_.reset();  // measuring is over: what comes after waits on no kernel
  if (limit_left_no_progress(stop_state))
    stop_message = fmt::format("time limit of {}: not one point finished within it, so the same limit cannot "
                               "make progress; continue with a longer one: {} --time-limit ...",
                               limit_time(opt_.time_limit_s), resume_command());
  if (stream_) {
    // After a sticky fault this fails too; there is nothing left to protect.
    cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }
  return finish(stop_state, stop_message);
}

TechniqueSet load_techniques_for(const std::string& techniques_path, const std::string& cases_path) {
  if (!techniques_path.empty()) return load_techniques(techniques_path);
  const fs::path beside = fs::path(cases_path).parent_path() / "techniques.json";
  std::error_code ec;
  if (fs::is_regular_file(beside, ec)) return load_techniques(beside.string());
  return default_techniques();
}


// A resumed shard keeps the groups its run.json records; a new one is cut from the plan.
std::optional<ShardCut> shard_cut_for(const RunOptions& opt, const json& doc, const std::optional<ShardSpec>& shard,
                                      const CaseSet& cases, const TechniqueSet& techniques, const Selection& sel,
                                      const std::optional<DispatchTable>& table) {
  if (opt.resume) {
    if (!doc.contains("shard")) return std::nullopt;
    return shard_cut_from_json(doc["shard"], opt.out_dir + "/run.json");
  }
  if (!shard) return std::nullopt;
  const PathMemoryOptions paths{opt.fp32_math, opt.layer_trace};
  const DispatchTable* dispatch = table ? &*table : nullptr;
  ShardCut cut = cut_shard(*shard, assignment_plan(cases, techniques, sel, opt.seed, paths, opt.quick, dispatch));
  retime_cut(cut, assignment_plan(cases, techniques, sel, opt.seed, paths, run_time_model(opt), dispatch));
  return cut;
}

}  // namespace

RunInputs load_run_inputs(const RunOptions& opt) {
  RunInputs in{load_cases(opt.cases_path), load_techniques_for(opt.techniques_path, opt.cases_path), {}, {}, {}, {}};
  in.sel = parse_selection(opt.cases_sel, opt.configs_sel, opt.dtypes_sel, in.cases, in.techniques);
  if (!opt.stage_times_configs.empty())
    in.stage_time_points = parse_config_patterns(opt.stage_times_configs, in.techniques, "--stage-times-configs");
  apply_policy_option(in.sel, opt.policy);
  if (opt.quick && !opt.aa) narrow_for_quick(in.sel, in.techniques);
  in.grid = build_grid(in.cases, in.techniques, in.sel, opt.seed);
  // The dispatch table is read (and checked) whenever one is named or a point needs it.
  const bool any_auto =
      !opt.aa && std::any_of(in.grid.begin(), in.grid.end(), [](const GridPoint& p) { return p.automatic; });
  if (any_auto || !opt.dispatch_table.empty()) in.table = dispatch_table_for(opt.dispatch_table);
  return in;
}

int run_command(RunOptions opt, const std::optional<ShardSpec>& shard) {
  json doc;
  const std::string command_line = opt.command_line;
  const bool json_summary = opt.json;
  const double time_limit_s = opt.time_limit_s;
  // Test hooks are read first: a malformed one is a usage error, before anything is written.
  FaultInjection fault = fault_injection_from_env();
  std::optional<long> sigint_after = sigint_after_from_env();
  // With --resume, --config and --techniques say where the run's files are now.
  if (opt.resume) opt = options_for_resume(opt.out_dir, doc, ResumeFiles{opt.cases_path, opt.techniques_path});
  opt.command_line = command_line;
  opt.json = json_summary;
  opt.time_limit_s = time_limit_s;
  resolve_defaults(opt);

  // Load and validate everything before the first byte is written.
  RunInputs in = load_run_inputs(opt);
  const CaseSet& cases = in.cases;
  const TechniqueSet& techniques = in.techniques;
  const Selection& sel = in.sel;
  const std::vector<GridPoint>& grid = in.grid;
  const std::optional<DispatchTable>& table = in.table;

  if (!opt.resume) {
    if (opt.out_dir.empty()) opt.out_dir = "runs/" + utc_now("%Y%m%d-%H%M%S");
    std::error_code ec;
    if (fs::exists(opt.out_dir, ec))
      throw ConfigError(fmt::format("--out {}: the folder exists; continue that run with "
                                    "--resume {} or choose another folder",
                                    opt.out_dir, opt.out_dir));
  }
  if (opt.resume) {
    // The rows a resumed run continues from are read in full before the device is touched (a
    // torn last line is the writer's to repair, later).
    std::vector<std::string> torn;
    std::error_code ec;
    const std::string points = opt.out_dir + "/points.jsonl";
    if (fs::exists(fs::symlink_status(points, ec))) read_points_jsonl(points, &torn);
    // The ceilings the run kept for its stage floors are read again: a damaged file is named
    // now, not found out group by group.
    if (opt.stage_times) check_ceilings_file(opt.out_dir + "/ceilings.json");
  }
  std::string why;
  if (!cuda_device_present(&why)) {
    fmt::print(stderr, "{}\n", why);
    // --json promises a document on stdout whatever the exit code.
    if (opt.json) {
      RunOutcome o;
      o.state = "no-device";
      o.out_dir = opt.out_dir;
      o.scheduled = grid.size();
      o.aa = opt.aa;
      if (opt.resume) o.resume_command = resume_command_for(opt.out_dir);
      json s = summary_json(o, {}, 3);
      s["error"] = why;
      fmt::print("{}\n", s.dump(2));
    }
    return 3;
  }

  // An auto point's configuration is chosen here from the dispatch table; where the run also
  // measures its group's fixed configurations it is chosen again, from those rows, when its
  // turn comes (choose_from_rows).
  Schedule sched = build_schedule(opt, cases, techniques, sel, grid, table);
  std::optional<ShardCut> cut = shard_cut_for(opt, doc, shard, cases, techniques, sel, table);
  if (cut) keep_shard_points(sched, cases, *cut);
  if (!opt.resume) {
    std::error_code ec;
    fs::create_directories(opt.out_dir, ec);
    if (ec) throw ConfigError(fmt::format("--out {}: cannot create: {}", opt.out_dir, ec.message()));
    // Paths are recorded as given (relative ones from the folder the run began in), each file
    // with its fingerprint: run.json names no folder of the machine it ran on.
    doc = new_run_document(opt, cases, techniques, sched.info, sched.points.size());
    record_planned_groups(doc, sched, cases);
  }
  doc["resume_command"] = resume_command_for(opt.out_dir);
  if (cut) {
    doc["shard"] = to_json(*cut);
    fmt::print(stderr, "tlbench run: {}\n", shard_summary(*cut));
  }
  if (sched.info.auto_points > 0) record_dispatch_table(doc, *table);

  // --time-limit: each group's modelled time, timed with the run's own options.
  std::vector<ShardGroup> group_model;
  if (opt.time_limit_s > 0)
    group_model = plan_groups(assignment_plan(cases, techniques, sel, opt.seed, {opt.fp32_math, opt.layer_trace},
                                              run_time_model(opt), table ? &*table : nullptr));
  Runner runner(opt, cases, techniques, std::move(sched), std::move(doc), std::move(fault), sigint_after,
                std::move(group_model), in.stage_time_points);
  return runner.run();
}

}  // namespace tlb

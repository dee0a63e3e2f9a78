#include "point_row.hpp"

#include <fmt/core.h>

#include <cmath>
#include <limits>
#include <variant>

#include "config.hpp"  // ConfigError
#include "config_bits.hpp"
#include "text.hpp"

namespace tlb {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const char* key, const std::string& problem) {
  throw ConfigError(fmt::format("\"{}\": {}", key, problem));
}

// One column: its name and the PointRow member it holds. CSV and JSON are both generated from
// this one table, so the two files cannot drift apart.
using Member = std::variant<int PointRow::*, std::string PointRow::*, PointStatus PointRow::*,
                            std::optional<double> PointRow::*, std::optional<int64_t> PointRow::*,
                            std::optional<bool> PointRow::*, std::vector<double> PointRow::*>;
struct Column {
  const char* name;
  Member member;
};

const std::vector<Column>& columns() {
  static const std::vector<Column> c = {
      {"case_id", &PointRow::case_id},
      {"case_name", &PointRow::case_name},
      {"batch", &PointRow::batch},
      {"seq", &PointRow::seq},
      {"d_model", &PointRow::d_model},
      {"heads", &PointRow::heads},
      {"d_ff", &PointRow::d_ff},
      {"layers", &PointRow::layers},
      {"mask", &PointRow::mask},
      {"dtype", &PointRow::dtype},
      {"math", &PointRow::math},
      {"config", &PointRow::config},
      {"config_names", &PointRow::config_names},
      {"auto_choice", &PointRow::auto_choice},
      {"policy", &PointRow::policy},
      {"status", &PointRow::status},
      {"baseline", &PointRow::baseline},
      {"ref_ms", &PointRow::ref_ms},
      {"ref_spread_ms", &PointRow::ref_spread_ms},
      {"cand_ms", &PointRow::cand_ms},
      {"cand_spread_ms", &PointRow::cand_spread_ms},
      {"speedup", &PointRow::speedup},
      {"speedup_ci_low", &PointRow::speedup_ci_low},
      {"speedup_ci_high", &PointRow::speedup_ci_high},
      {"speedup_ci_level", &PointRow::speedup_ci_level},
      {"blocks", &PointRow::blocks},
      {"block_spread", &PointRow::block_spread},
      {"host_bound", &PointRow::host_bound},
      {"ref_graph_ms", &PointRow::ref_graph_ms},
      {"speedup_vs_graph_ref", &PointRow::speedup_vs_graph_ref},
      {"speedup_vs_graph_ref_ci_low", &PointRow::speedup_vs_graph_ref_ci_low},
      {"speedup_vs_graph_ref_ci_high", &PointRow::speedup_vs_graph_ref_ci_high},
      {"reps", &PointRow::reps},
      {"reps_attempted", &PointRow::reps_attempted},
      {"warmup_runs", &PointRow::warmup_runs},
      {"throttled_samples", &PointRow::throttled_samples},
      {"stop_reason", &PointRow::stop_reason},
      {"min_mhz", &PointRow::min_mhz},
      {"max_mhz", &PointRow::max_mhz},
      {"tflops", &PointRow::tflops},
      {"ref_tflops", &PointRow::ref_tflops},
      {"peak_bytes", &PointRow::peak_bytes},
      {"predicted_bytes", &PointRow::predicted_bytes},
      {"max_abs_err", &PointRow::max_abs_err},
      {"max_rel_err", &PointRow::max_rel_err},
      {"strict_violations", &PointRow::strict_violations},
      {"strict_pass", &PointRow::strict_pass},
      {"golden_rel_l2", &PointRow::golden_rel_l2},
      {"golden_rel_l2_ref", &PointRow::golden_rel_l2_ref},
      {"golden_threshold", &PointRow::golden_threshold},
      {"golden_pass", &PointRow::golden_pass},
      {"nan_count", &PointRow::nan_count},
      {"inf_count", &PointRow::inf_count},
      {"layer_rel_l2", &PointRow::layer_rel_l2},
      {"stage_ms", &PointRow::stage_ms},
      {"stage_floor_ms", &PointRow::stage_floor_ms},
      {"dispatch", &PointRow::dispatch},
      {"fallback_reasons", &PointRow::fallback_reasons},
      {"note", &PointRow::note},
      {"timestamp", &PointRow::timestamp},
  };
  return c;
}

// Shortest text that reads back as the same double.
std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

json number_json(double v) {
  if (std::isfinite(v)) return v;
  return number_text(v);
}

double number_from_json(const json& j, const char* key) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "nan" || s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf" || s == "Infinity") return INFINITY;
    if (s == "-inf" || s == "-Infinity") return -INFINITY;
  }
  fail(key, "expected a number, got " + j.dump());
}

double number_from_text(const std::string& s, const char* key) {
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return INFINITY;
  if (s == "-inf") return -INFINITY;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty())
    fail(key, "\"" + s + "\" is not a number");
  return v;
}

int64_t int_from_text(const std::string& s, const char* key) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty())
    fail(key, "\"" + s + "\" is not an integer");
  return v;
}

// 12.0 is accepted as 12: a writer that keeps every number as a double is still read.
int64_t int_from_json(const json& j, const char* key) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (std::isfinite(v) && std::floor(v) == v) return static_cast<int64_t>(v);
  }
  fail(key, "expected an integer, got " + j.dump());
}

template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

// What every row has, whoever wrote it.
void check_row(const json& j, const PointRow& r) {
  for (const char* key : {"case_id", "dtype", "config", "status"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) fail(key, "missing");
  }
  if (r.dtype != "fp16" && r.dtype != "bf16" && r.dtype != "fp32")
    fail("dtype", "\"" + r.dtype + "\" is not fp16, bf16 or fp32");
  if (!r.is_auto() && !is_bit_string(r.config))
    fail("config", "\"" + r.config + "\" is neither a bit string nor \"auto\"");
  // A ratio or a time at or below zero is no measurement; left in, such a row would count as
  // ok without counting as measured.
  for (const auto& [key, v] : {std::pair{"speedup", r.speedup}, std::pair{"ref_ms", r.ref_ms},
                               std::pair{"cand_ms", r.cand_ms}, std::pair{"ref_graph_ms", r.ref_graph_ms},
                               std::pair{"speedup_vs_graph_ref", r.speedup_vs_graph_ref}})
    if (v && !std::isnan(*v) && !(*v > 0)) fail(key, fmt::format("expected a positive number, got {}", *v));
}

}  // namespace

const std::string& PointRow::row_label() const {
  static const std::string kAuto = "auto";
  return is_auto() ? kAuto : config;
}

bool PointRow::measured() const {
  if (!status.ran()) return false;
  return speedup && std::isfinite(*speedup) && *speedup > 0;
}

double PointRow::log_halfwidth() const {
  if (speedup_ci_low && speedup_ci_high && *speedup_ci_low > 0 && *speedup_ci_high > 0 &&
      std::isfinite(*speedup_ci_low) && std::isfinite(*speedup_ci_high))
    return 0.5 * std::abs(std::log(*speedup_ci_high) - std::log(*speedup_ci_low));
  // Relative spreads of a ratio add in quadrature (to first order).
  if (ref_ms && cand_ms && ref_spread_ms && cand_spread_ms && *ref_ms > 0 && *cand_ms > 0) {
    double a = *ref_spread_ms / *ref_ms, b = *cand_spread_ms / *cand_ms;
    if (std::isfinite(a) && std::isfinite(b)) return std::sqrt(a * a + b * b);
  }
  return 0.0;
}

double PointRow::halfwidth() const {
  if (speedup_ci_low && speedup_ci_high && std::isfinite(*speedup_ci_low) &&
      std::isfinite(*speedup_ci_high))
    return 0.5 * std::abs(*speedup_ci_high - *speedup_ci_low);
  return speedup ? *speedup * log_halfwidth() : 0.0;
}

std::string row_math(DType dtype, Fp32Math fp32_math) {
  return dtype == DType::fp32 ? std::string(to_string(fp32_math)) : std::string(kHalfMath);
}

const std::vector<std::string>& point_columns() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Column& c : columns()) n.push_back(c.name);
    return n;
  }();
  return names;
}

json to_json(const PointRow& r) {
  json j = json::object();
  for (const Column& c : columns()) {
    std::visit(Overload{
                   [&](int PointRow::*m) { j[c.name] = r.*m; },
                   [&](std::string PointRow::*m) { j[c.name] = r.*m; },
                   [&](PointStatus PointRow::*m) { j[c.name] = (r.*m).str(); },
                   [&](std::optional<double> PointRow::*m) {
                     j[c.name] = (r.*m) ? number_json(*(r.*m)) : json(nullptr);
                   },
                   [&](std::optional<int64_t> PointRow::*m) {
                     j[c.name] = (r.*m) ? json(*(r.*m)) : json(nullptr);
                   },
                   [&](std::optional<bool> PointRow::*m) {
                     j[c.name] = (r.*m) ? json(*(r.*m)) : json(nullptr);
                   },
                   [&](std::vector<double> PointRow::*m) {
                     json a = json::array();
                     for (double v : r.*m) a.push_back(number_json(v));
                     j[c.name] = a;
                   },
               },
               c.member);
  }
  return j;
}

PointRow point_from_json(const json& j) {
  if (!j.is_object()) throw ConfigError("expected a JSON object");
  PointRow r;
  for (const Column& c : columns()) {
    auto it = j.find(c.name);
    if (it == j.end() || it->is_null()) continue;
    const json& v = *it;
    std::visit(Overload{
                   [&](int PointRow::*m) { r.*m = static_cast<int>(int_from_json(v, c.name)); },
                   [&](std::string PointRow::*m) {
                     if (!v.is_string()) fail(c.name, "expected a string, got " + v.dump());
                     r.*m = v.get<std::string>();
                   },
                   [&](PointStatus PointRow::*m) {
                     if (!v.is_string()) fail(c.name, "expected a string, got " + v.dump());
                     r.*m = PointStatus::from_string(v.get<std::string>());
                   },
                   [&](std::optional<double> PointRow::*m) { r.*m = number_from_json(v, c.name); },
                   [&](std::optional<int64_t> PointRow::*m) { r.*m = int_from_json(v, c.name); },
                   [&](std::optional<bool> PointRow::*m) {
                     if (!v.is_boolean()) fail(c.name, "expected true or false, got " + v.dump());
                     r.*m = v.get<bool>();
                   },
                   [&](std::vector<double> PointRow::*m) {
                     if (!v.is_array()) fail(c.name, "expected an array, got " + v.dump());
                     for (const json& x : v) (r.*m).push_back(number_from_json(x, c.name));
                   },
               },
               c.member);
  }
  check_row(j, r);
  return r;
}

std::string csv_header() {
  std::string h;
  for (const Column& c : columns()) {
    if (!h.empty()) h += ',';
    h += c.name;
  }
  return h;
}

std::string to_csv_line(const PointRow& r) {
  std::string line;
  bool first = true;
  for (const Column& c : columns()) {
    if (!first) line += ',';
    first = false;
    std::visit(Overload{
                   [&](int PointRow::*m) { line += std::to_string(r.*m); },
                   [&](std::string PointRow::*m) { line += csv_cell(r.*m); },
                   [&](PointStatus PointRow::*m) { line += csv_cell((r.*m).str()); },
                   [&](std::optional<double> PointRow::*m) {
                     if (r.*m) line += number_text(*(r.*m));
                   },
                   [&](std::optional<int64_t> PointRow::*m) {
                     if (r.*m) line += std::to_string(*(r.*m));
                   },
                   [&](std::optional<bool> PointRow::*m) {
                     if (r.*m) line += *(r.*m) ? "true" : "false";
                   },
                   [&](std::vector<double> PointRow::*m) {
                     std::string cell;
                     for (double v : r.*m) {
                       if (!cell.empty()) cell += ';';
                       cell += number_text(v);
                     }
                     line += csv_cell(cell);
                   },
               },
               c.member);
  }
  return line;
}

PointRow point_from_csv(const std::vector<std::string>& fields) {
  const auto& cols = columns();
  if (fields.size() != cols.size())
    throw ConfigError(fmt::format("expected {} fields, got {}", cols.size(), fields.size()));
  PointRow r;
  for (size_t i = 0; i < cols.size(); ++i) {
    const std::string& s = fields[i];
    const char* name = cols[i].name;
    std::visit(Overload{
                   [&](int PointRow::*m) { r.*m = static_cast<int>(int_from_text(s, name)); },
                   [&](std::string PointRow::*m) { r.*m = s; },
                   [&](PointStatus PointRow::*m) { r.*m = PointStatus::from_string(s); },
                   [&](std::optional<double> PointRow::*m) {
                     if (!s.empty()) r.*m = number_from_text(s, name);
                   },
                   [&](std::optional<int64_t> PointRow::*m) {
                     if (!s.empty()) r.*m = int_from_text(s, name);
                   },
                   [&](std::optional<bool> PointRow::*m) {
                     if (s == "true") r.*m = true;
                     else if (s == "false") r.*m = false;
                     else if (!s.empty()) fail(name, "\"" + s + "\" is not a bool");
                   },
                   [&](std::vector<double> PointRow::*m) {
                     size_t start = 0;
                     while (start < s.size()) {
                       size_t end = s.find(';', start);
                       if (end == std::string::npos) end = s.size();
                       (r.*m).push_back(number_from_text(s.substr(start, end - start), name));
                       start = end + 1;
                     }
                   },
               },
               cols[i].member);
  }
  return r;
}

}  // namespace tlb

#include "results_reader.hpp"

#include <fmt/core.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "config.hpp"

namespace tlb::results {

namespace {

using nlohmann::json;

[[noreturn]] void fail_at(const std::string& file, int line, std::string_view key,
                          const std::string& what) {
  if (key.empty()) throw ConfigError(fmt::format("{}:{}: {}", file, line, what));
  throw ConfigError(fmt::format("{}:{}: \"{}\": {}", file, line, key, what));
}

std::string get_string(const json& o, const char* key, bool required, const std::string& file,
                       int line) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) {
    if (required) fail_at(file, line, key, "missing");
    return {};
  }
  if (!it->is_string()) fail_at(file, line, key, "expected a string, got " + it->dump());
  return it->get<std::string>();
}

// Writers that cannot put NaN/Inf into JSON may write them as strings; both are accepted.
std::optional<double> get_number(const json& o, const char* key, const std::string& file,
                                 int line) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {
    const auto& s = it->get_ref<const std::string&>();
    if (s == "nan" || s == "NaN") return std::nan("");
    if (s == "inf" || s == "Infinity") return INFINITY;
    if (s == "-inf" || s == "-Infinity") return -INFINITY;
  }
  fail_at(file, line, key, "expected a number, got " + it->dump());
}

std::optional<int64_t> get_int(const json& o, const char* key, const std::string& file,
                               int line) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) {
    double v = it->get<double>();
    if (std::floor(v) == v && std::isfinite(v)) return static_cast<int64_t>(v);
  }
  fail_at(file, line, key, "expected an integer, got " + it->dump());
}

std::optional<bool> get_bool(const json& o, const char* key, const std::string& file, int line) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) fail_at(file, line, key, "expected true or false, got " + it->dump());
  return it->get<bool>();
}

bool is_bit_string(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c != '0' && c != '1') return false;
  return true;
}

Point parse_point(const json& o, const std::string& file, int line) {
  if (!o.is_object()) fail_at(file, line, "", "expected a JSON object");
  Point p;
  p.line = line;
  auto id = get_int(o, "case_id", file, line);
  if (!id) fail_at(file, line, "case_id", "missing");
  p.case_id = static_cast<int>(*id);
  p.case_name = get_string(o, "case_name", false, file, line);
  p.dtype = get_string(o, "dtype", true, file, line);
  if (p.dtype != "fp16" && p.dtype != "bf16" && p.dtype != "fp32")
    fail_at(file, line, "dtype", "\"" + p.dtype + "\" is not fp16, bf16 or fp32");
  p.math = get_string(o, "math", false, file, line);
  p.config = get_string(o, "config", true, file, line);
  p.config_names = get_string(o, "config_names", false, file, line);
  p.policy = get_string(o, "policy", false, file, line);
  p.status = get_string(o, "status", true, file, line);
  p.baseline = get_string(o, "baseline", false, file, line);
  p.ref_ms = get_number(o, "ref_ms", file, line);
  p.cand_ms = get_number(o, "cand_ms", file, line);
  p.ref_spread_ms = get_number(o, "ref_spread_ms", file, line);
  p.cand_spread_ms = get_number(o, "cand_spread_ms", file, line);
  p.speedup = get_number(o, "speedup", file, line);
  p.speedup_ci_low = get_number(o, "speedup_ci_low", file, line);
  p.speedup_ci_high = get_number(o, "speedup_ci_high", file, line);
  p.speedup_ci_level = get_number(o, "speedup_ci_level", file, line);
  p.reps = get_int(o, "reps", file, line);
  p.tflops = get_number(o, "tflops", file, line);
  p.peak_bytes = get_int(o, "peak_bytes", file, line);
  p.strict_pass = get_bool(o, "strict_pass", file, line);
  p.golden_pass = get_bool(o, "golden_pass", file, line);
  p.golden_rel_l2 = get_number(o, "golden_rel_l2", file, line);
  p.golden_rel_l2_ref = get_number(o, "golden_rel_l2_ref", file, line);
  p.golden_threshold = get_number(o, "golden_threshold", file, line);
  p.max_abs_err = get_number(o, "max_abs_err", file, line);
  p.max_rel_err = get_number(o, "max_rel_err", file, line);
  p.nan_count = get_int(o, "nan_count", file, line);
  p.inf_count = get_int(o, "inf_count", file, line);
  p.batch = get_int(o, "batch", file, line);
  p.seq = get_int(o, "seq", file, line);
  p.d_model = get_int(o, "d_model", file, line);
  p.heads = get_int(o, "heads", file, line);
  p.d_ff = get_int(o, "d_ff", file, line);
  p.layers = get_int(o, "layers", file, line);
  p.mask = get_string(o, "mask", false, file, line);
  p.dispatch = get_string(o, "dispatch", false, file, line);
  p.auto_choice = get_string(o, "auto_choice", false, file, line);
  if (!p.is_auto() && !is_bit_string(p.config))
    fail_at(file, line, "config", "\"" + p.config + "\" is neither a bit string nor \"auto\"");
  return p;
}

std::vector<std::string> techniques_from_run(const json& run, const std::string& file) {
  std::vector<std::string> names;
  auto it = run.find("techniques");
  if (it == run.end()) return names;
  if (!it->is_array()) throw ConfigError(file + ": $.techniques: expected an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    if (t.is_string()) {
      names.push_back(t.get<std::string>());
    } else if (t.is_object() && t.contains("name") && t["name"].is_string()) {
      names.push_back(t["name"].get<std::string>());
    } else {
      throw ConfigError(fmt::format("{}: $.techniques[{}]: expected a name or an object with "
                                    "a \"name\"", file, i));
    }
  }
  return names;
}

std::string read_file(const std::string& path, bool& exists) {
  std::ifstream in(path, std::ios::binary);
  exists = static_cast<bool>(in);
  if (!exists) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

const std::string& Point::row_label() const {
  static const std::string kAuto = "auto";
  return is_auto() ? kAuto : config;
}

bool Point::measured() const {
  if (status != "ok" && !is_fallback()) return false;
  return speedup && std::isfinite(*speedup) && *speedup > 0;
}

double Point::log_halfwidth() const {
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

double Point::halfwidth() const {
  if (speedup_ci_low && speedup_ci_high && std::isfinite(*speedup_ci_low) &&
      std::isfinite(*speedup_ci_high))
    return 0.5 * std::abs(*speedup_ci_high - *speedup_ci_low);
  return speedup ? *speedup * log_halfwidth() : 0.0;
}

std::string Results::device_name() const {
  for (const char* key : {"gpu", "device"}) {
    auto it = run.find(key);
    if (it == run.end()) continue;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("name") && (*it)["name"].is_string())
      return (*it)["name"].get<std::string>();
  }
  return {};
}

bool bits_match(std::string_view pattern, std::string_view bits) {
  if (pattern.size() != bits.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char p = pattern[i];
    if (p == 'x' || p == 'X') continue;
    if (p != bits[i]) return false;
  }
  return true;
}

Results parse_results(std::string_view points_jsonl, std::string_view run_json,
                      const std::string& dir) {
  Results r;
  r.dir = dir;
  const std::string points_file = dir + "/points.jsonl";
  const std::string run_file = dir + "/run.json";

  if (!run_json.empty()) {
    try {
      r.run = json::parse(run_json);
    } catch (const json::parse_error& e) {
      throw ConfigError(fmt::format("{}: not valid JSON: {}", run_file, e.what()));
    }
    if (!r.run.is_object()) throw ConfigError(run_file + ": expected a JSON object");
    r.techniques = techniques_from_run(r.run, run_file);
    if (!r.techniques.empty()) r.techniques_source = "run.json";
  }

  // Later lines replace earlier ones for the same point (a resumed run re-measures).
  using Key = std::tuple<int, std::string, std::string, std::string, bool>;
  std::map<Key, size_t> seen;
  int line_no = 0;
  size_t pos = 0;
  while (pos < points_jsonl.size()) {
    size_t end = points_jsonl.find('\n', pos);
    const bool has_newline = end != std::string_view::npos;
    if (!has_newline) end = points_jsonl.size();
    std::string_view text = points_jsonl.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json o;
    try {
      o = json::parse(text);
    } catch (const json::parse_error& e) {
      if (!has_newline) {
        r.warnings.push_back(fmt::format(
            "{}:{}: last line is incomplete (a write cut short); ignored", points_file, line_no));
        break;
      }
      fail_at(points_file, line_no, "", std::string("not valid JSON: ") + e.what());
    }
    Point p = parse_point(o, points_file, line_no);
    Key key{p.case_id, p.dtype, p.dtype == "fp32" ? p.math : std::string(), p.row_label(),
            p.is_aa()};
    auto [it, inserted] = seen.emplace(key, r.points.size());
    if (inserted) {
      r.points.push_back(std::move(p));
    } else {
      r.warnings.push_back(fmt::format("{}:{}: case {} {} {} measured again; line {} replaced",
                                       points_file, line_no, p.case_id, p.dtype, p.row_label(),
                                       r.points[it->second].line));
      r.points[it->second] = std::move(p);
    }
  }

  // The technique order: run.json, else each single-technique row names its technique.
  size_t bits = 0;
  for (const auto& p : r.points)
    if (!p.is_auto()) {
      bits = p.config.size();
      break;
    }
  if (r.techniques.empty() && bits > 0) {
    r.techniques.assign(bits, std::string());
    for (const auto& p : r.points) {
      if (p.is_auto() || p.config.size() != bits || p.config_names.empty()) continue;
      size_t ones = 0, where = 0;
      for (size_t i = 0; i < bits; ++i)
        if (p.config[i] == '1') ++ones, where = i;
      if (ones == 1) r.techniques[where] = p.config_names;
    }
    for (size_t i = 0; i < bits; ++i)
      if (r.techniques[i].empty()) r.techniques[i] = fmt::format("bit{}", i + 1);
    r.techniques_source = "config_names of single-technique rows (no run.json techniques)";
  }
  for (const auto& p : r.points) {
    if (!p.is_auto() && p.config.size() != r.techniques.size())
      fail_at(points_file, p.line, "config",
              fmt::format("\"{}\" has {} bits but the run has {} techniques", p.config,
                          p.config.size(), r.techniques.size()));
  }

  // fp32 is split by math mode only when both modes are present; otherwise the group is
  // simply the dtype (and the math mode is reported beside it).
  std::set<std::string> fp32_math;
  for (const auto& p : r.points)
    if (p.dtype == "fp32") fp32_math.insert(p.math);
  const bool split_fp32 = fp32_math.size() > 1;
  for (auto& p : r.points)
    p.group = (split_fp32 && p.dtype == "fp32")
                  ? "fp32-" + (p.math.empty() ? std::string("unknown") : p.math)
                  : p.dtype;
  return r;
}

AutoVsBest compare_auto(const Point& automatic, const Point& b, const Point* chosen) {
  AutoVsBest r;
  r.by_choice = chosen != nullptr && chosen->measured();
  const Point& a = r.by_choice ? *chosen : automatic;
  if (a.cand_ms && b.cand_ms && *a.cand_ms > 0 && *b.cand_ms > 0) {
    r.by_time = true;
    r.shortfall_pct = (*a.cand_ms / *b.cand_ms - 1.0) * 100.0;
    r.within_noise = *a.cand_ms - a.cand_spread_ms.value_or(0.0) <= *b.cand_ms + b.cand_spread_ms.value_or(0.0);
  } else if (a.speedup && b.speedup && *b.speedup > 0) {
    r.shortfall_pct = (1.0 - *a.speedup / *b.speedup) * 100.0;
    r.within_noise = *a.speedup + a.halfwidth() >= *b.speedup - b.halfwidth();
  }
  r.same_config = !automatic.auto_choice.empty() && automatic.auto_choice == b.config;
  if (r.same_config) r.within_noise = true;
  return r;
}

Point point_from_json(const json& row, const std::string& origin) {
  Point p = parse_point(row, origin, 1);
  p.group = p.dtype;
  return p;
}

Results read_results(const std::string& dir) {
  bool exists = false;
  std::string points = read_file(dir + "/points.jsonl", exists);
  if (!exists)
    throw ConfigError(dir + "/points.jsonl: cannot be read (is this a results folder?)");
  bool run_exists = false;
  std::string run = read_file(dir + "/run.json", run_exists);
  Results r = parse_results(points, run, dir);
  if (!run_exists) r.warnings.push_back(dir + "/run.json: not found; technique names from " +
                                        r.techniques_source);
  return r;
}

}  // namespace tlb::results

#include "results_reader.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "config.hpp"
#include "json_fields.hpp"

namespace tlb::results {

PointKey point_key(const Point& p) {
  return {p.case_id, p.dtype, p.dtype == "fp32" ? p.math : std::string(), p.row_label(), p.is_aa()};
}

namespace {

using nlohmann::json;

[[noreturn]] void fail_at(const std::string& file, int line, std::string_view key,
                          const std::string& what) {
  if (key.empty()) throw ConfigError(fmt::format("{}:{}: {}", file, line, what));
  throw ConfigError(fmt::format("{}:{}: \"{}\": {}", file, line, key, what));
}

Point parse_point(const json& o, const std::string& file, int line) {
  Point p;
  try {
    static_cast<PointRow&>(p) = point_from_json(o);
  } catch (const ConfigError& e) {
    fail_at(file, line, "", e.what());
  }
  p.line = line;
  return p;
}

std::vector<std::string> techniques_from_run(const json& run, const std::string& file) {
  std::vector<std::string> names;
  auto it = run.find("techniques");
  if (it == run.end()) return names;
  if (!it->is_array()) json_fields::fail(file, "$.techniques", "expected an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    if (t.is_string()) {
      names.push_back(t.get<std::string>());
    } else if (t.is_object() && t.contains("name") && t["name"].is_string()) {
      names.push_back(t["name"].get<std::string>());
    } else {
      json_fields::fail(file, json_fields::index_path("$.techniques", i),
                        "expected a name or an object with a \"name\"");
    }
  }
  return names;
}

}  // namespace

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

namespace {

void read_run_json(std::string_view run_json, const std::string& run_file, Results& r) {
  r.run = json_fields::parse_document(run_json, run_file);
  if (!r.run.is_object()) json_fields::fail(run_file, "$", "expected an object, got " + json_fields::describe(r.run));
  r.techniques = techniques_from_run(r.run, run_file);
  if (!r.techniques.empty()) r.techniques_source = "run.json";
}

// Every point of points.jsonl in file order; a later line replaces an earlier one for the same
// point, and the pair is recorded (no run writes a point twice).
void read_points(std::string_view points_jsonl, const std::string& points_file, Results& r) {
  std::map<PointKey, size_t> seen;
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
      o = json_fields::parse_line(text, points_file, line_no);
    } catch (const ConfigError&) {
      if (has_newline) throw;
      r.warnings.push_back(fmt::format(
          "{}:{}: last line is incomplete (a write cut short); ignored", points_file, line_no));
      r.torn_line = line_no;
      break;
    }
    Point p = parse_point(o, points_file, line_no);
    auto [it, inserted] = seen.emplace(point_key(p), r.points.size());
    if (inserted) {
      r.points.push_back(std::move(p));
    } else {
      r.warnings.push_back(fmt::format("{}:{}: case {} {} {} measured again; line {} replaced",
                                       points_file, line_no, p.case_id, p.dtype, p.row_label(),
                                       r.points[it->second].line));
      r.duplicates.push_back({line_no, r.points[it->second].line, it->second});
      r.points[it->second] = std::move(p);
    }
  }
}

// Without run.json's technique order, each single-technique row names its technique.
void recover_techniques(Results& r) {
  size_t bits = 0;
  for (const auto& p : r.points)
    if (!p.is_auto()) {
      bits = p.config.size();
      break;
    }
  if (bits == 0) return;
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

// fp32 is split by math mode only when both modes are present; otherwise the group is simply
// the dtype (and the math mode is reported beside it).
void assign_groups(Results& r) {
  std::set<std::string> fp32_math;
  for (const auto& p : r.points)
    if (p.dtype == "fp32") fp32_math.insert(p.math);
  const bool split_fp32 = fp32_math.size() > 1;
  for (auto& p : r.points)
    p.group = (split_fp32 && p.dtype == "fp32")
                  ? "fp32-" + (p.math.empty() ? std::string("unknown") : p.math)
                  : p.dtype;
}

}  // namespace

Results parse_results(std::string_view points_jsonl, std::string_view run_json,
                      const std::string& dir) {
  Results r;
  r.dir = dir;
  const std::string points_file = dir + "/points.jsonl";
  if (!run_json.empty()) read_run_json(run_json, dir + "/run.json", r);
  read_points(points_jsonl, points_file, r);
  if (r.techniques.empty()) recover_techniques(r);
  for (const auto& p : r.points) {
    if (!p.is_auto() && p.config.size() != r.techniques.size())
      fail_at(points_file, p.line, "config",
              fmt::format("\"{}\" has {} bits but the run has {} techniques", p.config,
                          p.config.size(), r.techniques.size()));
  }
  assign_groups(r);
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

Results read_results(const std::string& dir) {
  const std::string points_file = dir + "/points.jsonl", run_file = dir + "/run.json";
  std::error_code ec;
  if (!std::filesystem::exists(points_file, ec))
    throw ConfigError(points_file + ": cannot be read (is this a results folder?)");
  const std::string points = json_fields::read_input_file(points_file, json_fields::kMaxPointsBytes);
  const bool run_exists = std::filesystem::exists(run_file, ec);
  const std::string run = run_exists ? json_fields::read_input_file(run_file) : std::string();
  // A run.json that is there but empty is a broken file, not a missing one.
  if (run_exists && run.find_first_not_of(" \t\r\n") == std::string::npos)
    json_fields::parse_document(run, run_file);
  Results r = parse_results(points, run, dir);
  if (!run_exists) r.warnings.push_back(dir + "/run.json: not found; technique names from " +
                                        r.techniques_source);
  return r;
}

}  // namespace tlb::results

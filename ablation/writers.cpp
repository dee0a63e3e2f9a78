#include "writers.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <variant>

namespace tlb {

namespace {

using json = nlohmann::json;

// One column: its name and the PointRow member it holds. CSV and JSON are both generated from
// this one table, so the two files cannot drift apart.
using Member = std::variant<int PointRow::*, int64_t PointRow::*, std::string PointRow::*,
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
  throw std::runtime_error(fmt::format("\"{}\": expected a number, got {}", key, j.dump()));
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
    throw std::runtime_error(fmt::format("\"{}\": \"{}\" is not a number", key, s));
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
    throw std::runtime_error(fmt::format("\"{}\": \"{}\" is not an integer", key, s));
  return v;
}

int64_t int_from_json(const json& j, const char* key) {
  if (j.is_number_integer()) return j.get<int64_t>();
  throw std::runtime_error(fmt::format("\"{}\": expected an integer, got {}", key, j.dump()));
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

void sync_file(std::FILE* f, const std::string& what) {
  if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)
    throw std::runtime_error(fmt::format("cannot write {}: {}", what, std::strerror(errno)));
}

// Cuts a last line without its newline (the tail of an interrupted write).
bool truncate_partial_line(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (content.empty() || content.back() == '\n') return false;
  const size_t keep = content.rfind('\n') == std::string::npos ? 0 : content.rfind('\n') + 1;
  if (::truncate(path.c_str(), static_cast<off_t>(keep)) != 0)
    throw std::runtime_error(fmt::format("cannot repair {}: {}", path, std::strerror(errno)));
  return true;
}

}  // namespace

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
                   [&](int64_t PointRow::*m) { j[c.name] = r.*m; },
                   [&](std::string PointRow::*m) { j[c.name] = r.*m; },
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
  if (!j.is_object()) throw std::runtime_error("expected a JSON object");
  PointRow r;
  for (const Column& c : columns()) {
    auto it = j.find(c.name);
    if (it == j.end() || it->is_null()) continue;
    const json& v = *it;
    std::visit(Overload{
                   [&](int PointRow::*m) { r.*m = static_cast<int>(int_from_json(v, c.name)); },
                   [&](int64_t PointRow::*m) { r.*m = int_from_json(v, c.name); },
                   [&](std::string PointRow::*m) {
                     if (!v.is_string())
                       throw std::runtime_error(
                           fmt::format("\"{}\": expected a string, got {}", c.name, v.dump()));
                     r.*m = v.get<std::string>();
                   },
                   [&](std::optional<double> PointRow::*m) { r.*m = number_from_json(v, c.name); },
                   [&](std::optional<int64_t> PointRow::*m) { r.*m = int_from_json(v, c.name); },
                   [&](std::optional<bool> PointRow::*m) {
                     if (!v.is_boolean())
                       throw std::runtime_error(
                           fmt::format("\"{}\": expected true or false, got {}", c.name, v.dump()));
                     r.*m = v.get<bool>();
                   },
                   [&](std::vector<double> PointRow::*m) {
                     if (!v.is_array())
                       throw std::runtime_error(
                           fmt::format("\"{}\": expected an array, got {}", c.name, v.dump()));
                     for (const json& x : v) (r.*m).push_back(number_from_json(x, c.name));
                   },
               },
               c.member);
  }
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
                   [&](int64_t PointRow::*m) { line += std::to_string(r.*m); },
                   [&](std::string PointRow::*m) { line += csv_quote(r.*m); },
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
                     line += csv_quote(cell);
                   },
               },
               c.member);
  }
  return line;
}

std::vector<std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> fields;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      fields.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += ch;
    }
  }
  fields.push_back(std::move(cur));
  return fields;
}

PointRow point_from_csv(const std::vector<std::string>& fields) {
  const auto& cols = columns();
  if (fields.size() != cols.size())
    throw std::runtime_error(
        fmt::format("expected {} fields, got {}", cols.size(), fields.size()));
  PointRow r;
  for (size_t i = 0; i < cols.size(); ++i) {
    const std::string& s = fields[i];
    const char* name = cols[i].name;
    std::visit(Overload{
                   [&](int PointRow::*m) { r.*m = static_cast<int>(int_from_text(s, name)); },
                   [&](int64_t PointRow::*m) { r.*m = int_from_text(s, name); },
                   [&](std::string PointRow::*m) { r.*m = s; },
                   [&](std::optional<double> PointRow::*m) {
                     if (!s.empty()) r.*m = number_from_text(s, name);
                   },
                   [&](std::optional<int64_t> PointRow::*m) {
                     if (!s.empty()) r.*m = int_from_text(s, name);
                   },
                   [&](std::optional<bool> PointRow::*m) {
                     if (s == "true") r.*m = true;
                     else if (s == "false") r.*m = false;
                     else if (!s.empty())
                       throw std::runtime_error(fmt::format("\"{}\": \"{}\" is not a bool", name, s));
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

std::vector<PointRow> read_points_jsonl(const std::string& path,
                                        std::vector<std::string>* warnings) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}", path));
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<PointRow> rows;
  size_t pos = 0;
  int line_no = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    ++line_no;
    if (end == std::string::npos) {
      if (warnings)
        warnings->push_back(fmt::format("{}:{}: last line is incomplete (an interrupted write); "
                                        "ignored", path, line_no));
      break;
    }
    const std::string line = content.substr(pos, end - pos);
    pos = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      rows.push_back(point_from_json(json::parse(line)));
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("{}:{}: {}", path, line_no, e.what()));
    }
  }
  return rows;
}

PointWriter::PointWriter(const std::string& dir) : dir_(dir) {
  const std::string jsonl = dir + "/points.jsonl", csv = dir + "/points.csv";
  std::error_code ec;
  if (std::filesystem::exists(jsonl, ec)) {
    truncate_partial_line(jsonl);
    existing_ = read_points_jsonl(jsonl);
  }
  // points.csv follows points.jsonl: rebuilt whole, so a crash between the two appends of a
  // row never leaves them disagreeing.
  std::string csv_content = csv_header() + "\n";
  for (const PointRow& r : existing_) csv_content += to_csv_line(r) + "\n";
  write_file_atomic(csv, csv_content);
  jsonl_ = std::fopen(jsonl.c_str(), "ab");
  csv_ = std::fopen(csv.c_str(), "ab");
  if (!jsonl_ || !csv_)
    throw std::runtime_error(fmt::format("cannot open the point files in {}: {}", dir,
                                         std::strerror(errno)));
}

PointWriter::~PointWriter() {
  if (jsonl_) std::fclose(jsonl_);
  if (csv_) std::fclose(csv_);
}

void PointWriter::append(const PointRow& r) {
  const std::string j = to_json(r).dump() + "\n";
  const std::string c = to_csv_line(r) + "\n";
  if (std::fwrite(j.data(), 1, j.size(), jsonl_) != j.size())
    throw std::runtime_error(fmt::format("cannot write {}/points.jsonl: {}", dir_, std::strerror(errno)));
  sync_file(jsonl_, dir_ + "/points.jsonl");
  if (std::fwrite(c.data(), 1, c.size(), csv_) != c.size())
    throw std::runtime_error(fmt::format("cannot write {}/points.csv: {}", dir_, std::strerror(errno)));
  sync_file(csv_, dir_ + "/points.csv");
}


std::string utc_now(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

std::string utc_timestamp() { return utc_now("%Y-%m-%dT%H:%M:%SZ"); }

}  // namespace tlb

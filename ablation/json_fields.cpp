// Reading JSON input (configs, thresholds, dispatch tables, run.json, points.jsonl) so that every
// problem is one line naming the file, the JSON path or place and what is wrong.
#include "json_fields.hpp"

#include <fmt/core.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "config.hpp"  // ConfigError

namespace tlb::json_fields {

using json = nlohmann::json;

namespace {

bool is_identifier(const std::string& k) {
  if (k.empty() || !(std::isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_')) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string fmt_range_error(const std::string& what, const std::string& value, int64_t hi) {
  return "expected " + what + " of at most " + std::to_string(hi) + ", got " + value;
}

}  // namespace

[[noreturn]] void fail(const std::string& source, const std::string& path,
                       const std::string& problem) {
  throw ConfigError(source + ": " + path + ": " + problem);
}

std::string json_quoted(const std::string& s) {
  try {
    return json(s).dump();
  } catch (const json::exception&) {
    return "\"<not UTF-8>\"";
  }
}

std::string key_path(const std::string& parent, const std::string& key) {
  return is_identifier(key) ? parent + "." + key : parent + "[" + json_quoted(key) + "]";
}

std::string index_path(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

std::string describe(const json& v) {
  std::string text;
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return std::string("boolean ") + (v.get<bool>() ? "true" : "false");
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: text = "string " + json_quoted(v.get<std::string>()); break;
    case json::value_t::number_float: text = "number " + v.dump(); break;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: text = "integer " + v.dump(); break;
    default: return "a value of unknown type";
  }
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

void check_keys(const json& obj, const std::vector<std::string>& allowed,
                const std::string& source, const std::string& path) {
  for (const auto& [k, v] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
    std::string best;
    size_t best_d = 3;
    for (const auto& a : allowed) {
      const size_t d = edit_distance(k, a);
      if (d < best_d) best_d = d, best = a;
    }
    std::string problem = "unknown key";
    if (!best.empty()) problem += " (did you mean " + json_quoted(best) + "?)";
    problem += "; allowed keys: " + join(allowed, ", ");
    fail(source, key_path(path, k), problem);
  }
}

void require_keys(const json& obj, const std::vector<std::string>& required,
                  const std::string& source, const std::string& path) {
  for (const auto& k : required)
    if (!obj.contains(k)) fail(source, path, "missing required field " + json_quoted(k));
}

int64_t get_integer(const json& v, int64_t lo, int64_t hi, const std::string& what,
                    const std::string& source, const std::string& path) {
  if (v.is_number_float())
    fail(source, path, "expected " + what + ", got " + describe(v) + " (not an integer)");
  if (!v.is_number_integer()) fail(source, path, "expected " + what + ", got " + describe(v));
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) fail(source, path, fmt_range_error(what, v.dump(), hi));
    x = static_cast<int64_t>(u);
  } else {
    x = v.get<int64_t>();
  }
  if (x < lo) fail(source, path, "expected " + what + ", got " + std::to_string(x));
  if (x > hi) fail(source, path, fmt_range_error(what, v.dump(), hi));
  return x;
}

const std::string& get_string(const json& v, const std::string& what, const std::string& source,
                              const std::string& path) {
  if (!v.is_string()) fail(source, path, "expected " + what + ", got " + describe(v));
  return v.get_ref<const std::string&>();
}

namespace {

// Where the first bracket deeper than kMaxDepth opens, or npos. Brackets inside strings do not
// count; anything malformed is left to the parser to report.
size_t too_deep_at(std::string_view text) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

// Whose text is being parsed: a whole document, or line `line` of a JSON-lines file.
struct Origin {
  std::string label;  // "cases.json", or "points.jsonl:12"
  bool one_line = false;
  std::string_view text;

  // "line L, column C" of the byte at `at` ("column C" within one line).
  std::string place(size_t at) const {
    at = std::min(at, text.size());
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < at; ++i)
      if (text[i] == '\n') ++line, line_start = i + 1;
    const std::string column = "column " + std::to_string(at - line_start + 1);
    return one_line ? column : "line " + std::to_string(line) + ", " + column;
  }
  [[noreturn]] void fail_at(size_t at, const std::string& problem) const {
    throw ConfigError(label + ": " + place(at) + ": " + problem);
  }
};

// nlohmann's own DOM builder, with each object's keys checked against each other on the way
// and every parse error turned into one line with its place. Paths are only spelled out for an
// error, so the cost stays linear in the text.
class CheckedBuilder {
 public:
  CheckedBuilder(json& root, const Origin& origin) : dom_(root, true), origin_(origin) {}

  bool null() { return done(dom_.null()); }
  bool boolean(bool b) { return done(dom_.boolean(b)); }
  bool number_integer(json::number_integer_t v) { return done(dom_.number_integer(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return done(dom_.number_unsigned(v)); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return done(dom_.number_float(v, s)); }
  bool string(json::string_t& s) { return done(dom_.string(s)); }
  bool binary(json::binary_t& b) { return done(dom_.binary(b)); }
  bool start_object(size_t n) {
    frames_.emplace_back(false);
    return dom_.start_object(n);
  }
  bool start_array(size_t n) {
    frames_.emplace_back(true);
    return dom_.start_array(n);
  }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second) fail(origin_.label, path(), "duplicate key (each key may appear once)");
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return done(dom_.end_object());
  }
  bool end_array() {
    frames_.pop_back();
    return done(dom_.end_array());
  }
  bool parse_error(size_t position, const std::string& token, const nlohmann::detail::exception& e) {
    // position counts the characters read, so the offending one is at position - 1.
    const size_t at = position == 0 ? 0 : position - 1;
    if (e.id == 406)  // the parser's "number overflow": beyond the range of a double
      origin_.fail_at(at, "number " + token + " is out of range (numbers must be finite)");
    std::string why = e.what();
    const size_t col_pos = why.find("column ");
    const size_t colon = col_pos == std::string::npos ? why.find("] ") : why.find(": ", col_pos);
    if (colon != std::string::npos) why = why.substr(colon + 2);
    if (origin_.text.find_first_not_of(" \t\r\n") == std::string_view::npos)
      why = origin_.one_line ? "the line is empty" : "the file is empty";
    origin_.fail_at(at, "malformed JSON: " + why);
  }

 private:
  struct Frame {
    explicit Frame(bool array) : is_array(array) {}
    bool is_array;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };

  bool done(bool ok) {
    if (!frames_.empty() && frames_.back().is_array) ++frames_.back().index;
    return ok;
  }
  std::string path() const {
    std::string p = "$";
    for (const Frame& f : frames_) p = f.is_array ? index_path(p, f.index) : key_path(p, f.key);
    return p;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const Origin& origin_;
  std::vector<Frame> frames_;
};

json parse_checked(const Origin& origin) {
  if (origin.text.size() > kMaxDocumentBytes)
    throw ConfigError(fmt::format("{}: {} bytes, over the limit of {} MiB for one JSON {}",
                                  origin.label, origin.text.size(), kMaxDocumentBytes >> 20,
                                  origin.one_line ? "line" : "document"));
  if (const size_t at = too_deep_at(origin.text); at != std::string_view::npos)
    origin.fail_at(at, fmt::format("nested deeper than {} levels", kMaxDepth));
  json root;
  CheckedBuilder builder(root, origin);
  json::sax_parse(origin.text.begin(), origin.text.end(), &builder);
  return root;
}

}  // namespace

std::string read_input_file(const std::string& path, size_t max_bytes) {
  auto refuse = [&](const std::string& why) { throw ConfigError(path + ": cannot read: " + why); };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) refuse(std::strerror(errno));
  if (S_ISDIR(st.st_mode)) refuse("is a directory");
  if (!S_ISREG(st.st_mode)) refuse("not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    refuse(fmt::format("{} bytes, over the limit of {} MiB", st.st_size, max_bytes >> 20));
  std::ifstream in(path, std::ios::binary);
  if (!in) refuse(std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) refuse(std::strerror(errno));
  return ss.str();
}

json parse_document(std::string_view text, const std::string& source) {
  return parse_checked(Origin{source, false, text});
}

json parse_line(std::string_view text, const std::string& file, int line) {
  return parse_checked(Origin{file + ":" + std::to_string(line), true, text});
}

}  // namespace tlb::json_fields

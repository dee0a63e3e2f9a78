// Reading JSON documents (configs, thresholds, dispatch tables, run.json) so that every problem
// is one line naming the file, the JSON path and what is wrong.
#include "json_fields.hpp"

#include <algorithm>
#include <cctype>
#include <set>
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

json parse_document(std::string_view text, const std::string& source) {
  struct Frame {
    bool is_array = false;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
    std::string path;
  };
  std::vector<Frame> stack;
  auto child_path = [&]() -> std::string {
    if (stack.empty()) return "$";
    const Frame& f = stack.back();
    return f.is_array ? index_path(f.path, f.index) : key_path(f.path, f.key);
  };
  auto value_done = [&]() {
    if (!stack.empty() && stack.back().is_array) ++stack.back().index;
  };
  json::parser_callback_t on_event = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start: {
        Frame f;
        f.is_array = ev == json::parse_event_t::array_start;
        f.path = child_path();
        stack.push_back(std::move(f));
        break;
      }
      case json::parse_event_t::key: {
        Frame& f = stack.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second)
          fail(source, key_path(f.path, f.key), "duplicate key (each key may appear once)");
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack.pop_back();
        value_done();
        break;
      case json::parse_event_t::value: value_done(); break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), on_event);
  } catch (const json::parse_error& e) {
    // e.byte counts the characters read, so the offending one is at e.byte - 1.
    const size_t at = std::min(e.byte == 0 ? size_t{0} : e.byte - 1, text.size());
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < at; ++i)
      if (text[i] == '\n') ++line, line_start = i + 1;
    const size_t column = at - line_start + 1;
    std::string why = e.what();
    const size_t col_pos = why.find("column ");
    const size_t colon = col_pos == std::string::npos ? why.find("] ") : why.find(": ", col_pos);
    if (colon != std::string::npos) why = why.substr(colon + 2);
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) why = "the file is empty";
    throw ConfigError(source + ": line " + std::to_string(line) + ", column " +
                      std::to_string(column) + ": malformed JSON: " + why);
  }
}

}  // namespace tlb::json_fields

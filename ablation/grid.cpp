// The grid and its selection. The shuffle is our own Fisher-Yates over a splitmix64 stream so a
// seed gives the same order with every compiler and standard library (std::shuffle and the
// std distributions are implementation-defined), and each (case, dtype) group draws from its
// own stream keyed by case id and dtype, so narrowing --cases or --dtypes leaves the order
// of the remaining groups unchanged.
#include "grid.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace tlb {
namespace {

[[noreturn]] void fail(const char* option, const std::string& problem) {
  throw ConfigError(std::string(option) + ": " + problem);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    items.push_back(b == std::string::npos ? std::string() : item.substr(b, e - b + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

bool parse_positive(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  out = std::stoll(s);
  return true;
}

// "1-5,9,12-14" from sorted ids, for messages.
std::string id_ranges(std::vector<int> ids) {
  std::sort(ids.begin(), ids.end());
  std::string s;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(ids[i]);
    if (j > i) {
      s += '-';
      s += std::to_string(ids[j]);
    }
    i = j + 1;
  }
  return s;
}

std::vector<int> parse_case_list(const std::string& text, const CaseSet& case_set) {
  std::vector<int> known;
  for (const auto& c : case_set.cases) known.push_back(c.id);
  const std::string where = " in " + case_set.source + " (ids: " + id_ranges(known) + ")";
  std::set<int> chosen;
  for (const std::string& item : split_list(text)) {
    if (item.empty()) fail("--cases", "empty item in '" + text + "'; expected ids and ranges like 1-5,9");
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      int64_t id = 0;
      if (!parse_positive(item, id))
        fail("--cases", "'" + item + "' is not a case id or a range like 1-5");
      if (std::find(known.begin(), known.end(), id) == known.end())
        fail("--cases", "no case with id " + item + where);
      chosen.insert(static_cast<int>(id));
      continue;
    }
    int64_t lo = 0, hi = 0;
    if (!parse_positive(item.substr(0, dash), lo) || !parse_positive(item.substr(dash + 1), hi) ||
        lo > hi)
      fail("--cases", "'" + item + "' is not a valid range (expected FIRST-LAST with FIRST <= LAST)");
    size_t hits = 0;
    for (int id : known)
      if (id >= lo && id <= hi) chosen.insert(id), ++hits;
    if (hits == 0) fail("--cases", "range '" + item + "' selects no case" + where);
  }
  return {chosen.begin(), chosen.end()};
}

std::vector<std::string> parse_patterns(const std::string& text, const TechniqueSet& techniques,
                                        bool& named_auto, const char* option = "--configs") {
  const size_t n = static_cast<size_t>(techniques.size());
  std::string order;
  for (const auto& t : techniques.items) {
    if (!order.empty()) order += ' ';
    order += t.name;
  }
  std::vector<std::string> patterns;
  for (const std::string& p : split_list(text)) {
    if (p.empty()) fail(option, "empty pattern in '" + text + "'; expected patterns like 11000,1xxxx");
    if (p == "auto") {
      named_auto = true;
      continue;
    }
    if (p.size() != n)
      fail(option, "'" + p + "' has " + std::to_string(p.size()) + " characters; a pattern needs " +
                            std::to_string(n) + ", one per technique (" + order + ")");
    for (char c : p)
      if (c != '0' && c != '1' && c != 'x')
        fail(option, "'" + p + "' may contain only 0, 1 and x (x = either), or be auto; found '" +
                              std::string(1, c) + "'");
    if (std::find(patterns.begin(), patterns.end(), p) == patterns.end()) patterns.push_back(p);
  }
  return patterns;
}

std::vector<DType> parse_dtype_list(const std::string& text) {
  std::vector<DType> dtypes;
  for (const std::string& item : split_list(text)) {
    if (item.empty()) fail("--dtypes", "empty item in '" + text + "'; expected names like fp16,bf16");
    DType d;
    if (!parse_dtype(item, d))
      fail("--dtypes", "unknown dtype '" + item + "' (expected fp16, bf16 or fp32)");
    if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);
  }
  return dtypes;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, n) without modulo bias: reject the top sliver of the 64-bit range.
uint64_t uniform_below(uint64_t& state, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
  while (true) {
    const uint64_t r = splitmix64(state);
    if (r >= threshold) return r % n;
  }
}

}  // namespace

Selection parse_selection(const std::string& cases, const std::string& configs,
                          const std::string& dtypes, const CaseSet& case_set,
                          const TechniqueSet& techniques) {
  Selection sel;
  if (!cases.empty()) sel.case_ids = parse_case_list(cases, case_set);
  if (!configs.empty()) {
    sel.config_patterns = parse_patterns(configs, techniques, sel.auto_points);
    sel.only_auto = sel.config_patterns.empty();
  }
  if (!dtypes.empty()) sel.dtypes = parse_dtype_list(dtypes);
  return sel;
}

void apply_policy_option(Selection& sel, const std::string& policy) {
  if (policy == "auto") sel.auto_points = true;
  else if (!policy.empty() && policy != "case")
    fail("--policy", "unknown policy '" + policy +
                         "' (expected auto, or case for each case's own E/F policy)");
}

void narrow_for_quick(Selection& sel, const TechniqueSet& techniques) {
  if (!sel.config_patterns.empty() || sel.only_auto) return;
  const size_t n = static_cast<size_t>(techniques.size());
  for (size_t i = 0; i < n; ++i) {
    std::string alone(n, '0');
    alone[i] = '1';
    sel.config_patterns.push_back(alone);
  }
  if (n > 1) sel.config_patterns.push_back(std::string(n, '1'));
  sel.narrowed = "quick: " + std::to_string(sel.config_patterns.size()) + " of " +
                 std::to_string(techniques.num_configs()) +
                 " configurations per case; --configs to choose";
}

namespace {

// Whether configuration `config` matches one of `patterns`.
bool matches_any(const std::vector<std::string>& patterns, uint32_t config, int num_techniques) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& p) { return config_matches(p, config, num_techniques); });
}

// Whether the selection keeps fixed configuration `config`: every one without --configs.
bool selects_config(const Selection& sel, uint32_t config, const TechniqueSet& techniques) {
  return (sel.config_patterns.empty() && !sel.only_auto) || matches_any(sel.config_patterns, config, techniques.size());
}

}  // namespace

uint32_t selected_config_count(const Selection& sel, const TechniqueSet& techniques) {
  uint32_t count = 0;
  for (uint32_t c = 0; c < techniques.num_configs(); ++c) count += selects_config(sel, c, techniques);
  return count;
}

bool wants_auto_point(const CaseSpec& c, const Selection& sel) {
  return sel.auto_points || c.policy == "auto";
}

ConfigPatterns parse_config_patterns(const std::string& text, const TechniqueSet& techniques, const char* option) {
  ConfigPatterns p;
  p.patterns = parse_patterns(text, techniques, p.auto_point, option);
  return p;
}

bool ConfigPatterns::matches(uint32_t config, bool automatic, int num_techniques) const {
  return automatic ? auto_point : matches_any(patterns, config, num_techniques);
}

bool config_matches(const std::string& pattern, uint32_t config, int num_techniques) {
  if (static_cast<int>(pattern.size()) != num_techniques) return false;
  for (int i = 0; i < num_techniques; ++i) {
    const bool on = (config >> (num_techniques - 1 - i)) & 1u;
    const char c = pattern[static_cast<size_t>(i)];
    if (c == 'x') continue;
    if ((c == '1') != on) return false;
  }
  return true;
}

void shuffle_configs(std::vector<uint32_t>& configs, uint64_t seed, int case_id, DType dtype) {
  // Key the stream by (seed, case, dtype) through splitmix64 itself so nearby seeds diverge.
  uint64_t state = seed;
  state = splitmix64(state) ^ (static_cast<uint64_t>(case_id) * 0x9e3779b97f4a7c15ull);
  state = splitmix64(state) ^ (static_cast<uint64_t>(dtype) + 1);
  for (size_t i = configs.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(uniform_below(state, i));
    std::swap(configs[i - 1], configs[j]);
  }
}

std::vector<GridPoint> build_grid(const CaseSet& cases, const TechniqueSet& techniques,
                                  const Selection& sel, uint64_t seed) {
  std::vector<uint32_t> selected_configs;
  for (uint32_t c = 0; c < techniques.num_configs(); ++c)
    if (selects_config(sel, c, techniques)) selected_configs.push_back(c);

  std::vector<GridPoint> grid;
  for (size_t ci = 0; ci < cases.cases.size(); ++ci) {
    const CaseSpec& cs = cases.cases[ci];
    if (!sel.case_ids.empty() &&
        std::find(sel.case_ids.begin(), sel.case_ids.end(), cs.id) == sel.case_ids.end())
      continue;
    for (int di = 0; di < kNumDTypes; ++di) {
      const DType d = static_cast<DType>(di);
      if (std::find(cs.dtypes.begin(), cs.dtypes.end(), d) == cs.dtypes.end()) continue;
      if (!sel.dtypes.empty() && std::find(sel.dtypes.begin(), sel.dtypes.end(), d) == sel.dtypes.end())
        continue;
      std::vector<uint32_t> order = selected_configs;
      shuffle_configs(order, seed, cs.id, d);
      for (uint32_t c : order) grid.push_back(GridPoint{ci, cs.id, d, c});
      // The auto point comes last in its group: where the run measures the fixed
      // configurations of the same case too, the dispatcher chooses from those measurements.
      if (wants_auto_point(cs, sel)) grid.push_back(GridPoint{ci, cs.id, d, 0, true});
    }
  }
  return grid;
}

}  // namespace tlb

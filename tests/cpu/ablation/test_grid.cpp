// The grid: selection parsing (--cases, --configs, --dtypes), pattern matching, grouping and
// the seeded, portable, unbiased shuffle.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config.hpp"
#include "grid.hpp"

using tlb::ConfigError;
using tlb::DType;

namespace {

const tlb::CaseSet& official_cases() {
  static const tlb::CaseSet set =
      tlb::load_cases(std::string(TLBENCH_SOURCE_DIR) + "/configs/cases.json");
  return set;
}

std::string selection_error(const std::string& cases, const std::string& configs,
                            const std::string& dtypes) {
  try {
    tlb::parse_selection(cases, configs, dtypes, official_cases(), tlb::default_techniques());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<accepted>";
}

void check_starts(const std::string& msg, const std::string& prefix, const std::string& phrase = "") {
  INFO("message: " << msg);
  CHECK(msg.rfind(prefix, 0) == 0);
  CHECK(msg.find(phrase) != std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);
}

}  // namespace

TEST_CASE("selection: --cases takes ids and ranges and keeps them sorted and unique", "[grid]") {
  const tlb::Selection sel = tlb::parse_selection("9, 1-5,3", "", "", official_cases(),
                                                  tlb::default_techniques());
  CHECK(sel.case_ids == std::vector<int>{1, 2, 3, 4, 5, 9});
  CHECK(sel.config_patterns.empty());
  CHECK(sel.dtypes.empty());
  CHECK(tlb::parse_selection("14-14", "", "", official_cases(), tlb::default_techniques()).case_ids ==
        std::vector<int>{14});
  // A range may reach past the last id; it selects the ids that exist.
  CHECK(tlb::parse_selection("12-99", "", "", official_cases(), tlb::default_techniques()).case_ids ==
        std::vector<int>{12, 13, 14});
}

TEST_CASE("malformed --cases values name the option and the value", "[grid]") {
  check_starts(selection_error("3-1", "", ""), "--cases: '3-1' is not a valid range");
  check_starts(selection_error("1-", "", ""), "--cases: '1-' is not a valid range");
  check_starts(selection_error("-3", "", ""), "--cases: '-3' is not a valid range");
  check_starts(selection_error("1-2-3", "", ""), "--cases: '1-2-3' is not a valid range");
  check_starts(selection_error("abc", "", ""), "--cases: 'abc' is not a case id");
  check_starts(selection_error("1.5", "", ""), "--cases: '1.5' is not a case id");
  check_starts(selection_error("99999999999", "", ""), "--cases: '99999999999' is not a case id");
  check_starts(selection_error("1,,2", "", ""), "--cases: empty item in '1,,2'");
  check_starts(selection_error("15", "", ""), "--cases: no case with id 15 in ", "(ids: 1-14)");
  check_starts(selection_error("20-30", "", ""), "--cases: range '20-30' selects no case");
}

TEST_CASE("selection: --configs takes patterns over 0, 1 and x, one character per technique", "[grid]") {
  const tlb::Selection sel = tlb::parse_selection("", "11000,1xxxx,11000", "", official_cases(),
                                                  tlb::default_techniques());
  CHECK(sel.config_patterns == std::vector<std::string>{"11000", "1xxxx"});
  check_starts(selection_error("", "1100", ""), "--configs: '1100' has 4 characters; a pattern needs 5",
               "(qkv attn ffn norm graph)");
  check_starts(selection_error("", "110000", ""), "--configs: '110000' has 6 characters");
  check_starts(selection_error("", "11a00", ""), "--configs: '11a00' may contain only 0, 1 and x",
               "found 'a'");
  check_starts(selection_error("", "11X00", ""), "--configs: '11X00' may contain only 0, 1 and x");
  check_starts(selection_error("", "11000,", ""), "--configs: empty pattern in '11000,'");
}

TEST_CASE("selection: --dtypes takes known dtype names", "[grid]") {
  const tlb::Selection sel =
      tlb::parse_selection("", "", "bf16,fp16,bf16", official_cases(), tlb::default_techniques());
  CHECK(sel.dtypes == std::vector<DType>{DType::bf16, DType::fp16});
  check_starts(selection_error("", "", "fp8"), "--dtypes: unknown dtype 'fp8'", "fp16, bf16 or fp32");
  check_starts(selection_error("", "", "FP16"), "--dtypes: unknown dtype 'FP16'");
  check_starts(selection_error("", "", "fp16,,"), "--dtypes: empty item");
}

TEST_CASE("config_matches reads bit 1 as the leftmost character", "[grid]") {
  CHECK(tlb::config_matches("11000", 0b11000, 5));
  CHECK_FALSE(tlb::config_matches("11000", 0b00011, 5));
  CHECK(tlb::config_matches("xxxxx", 0, 5));
  CHECK_FALSE(tlb::config_matches("1xxx", 0b1000, 5));  // wrong length never matches
  int with_first = 0, with_attn_off = 0;
  for (uint32_t c = 0; c < 32; ++c) {
    with_first += tlb::config_matches("1xxxx", c, 5);
    with_attn_off += tlb::config_matches("x0xxx", c, 5);
    CHECK(tlb::config_matches("1xxxx", c, 5) == ((c & 0b10000) != 0));
    CHECK(tlb::config_matches("x0xxx", c, 5) == ((c & 0b01000) == 0));
  }
  CHECK(with_first == 16);
  CHECK(with_attn_off == 16);
}

TEST_CASE("the official grid has 448 points per dtype, grouped by case then dtype", "[grid]") {
  const auto grid = tlb::build_grid(official_cases(), tlb::default_techniques(), {}, 1);
  REQUIRE(grid.size() == 14 * 32 * 3);
  std::map<DType, int> per_dtype;
  for (const auto& p : grid) ++per_dtype[p.dtype];
  CHECK(per_dtype[DType::fp16] == 448);
  CHECK(per_dtype[DType::bf16] == 448);
  CHECK(per_dtype[DType::fp32] == 448);
  // Group g covers points [32g, 32g + 32): case in file order, then fp16, bf16, fp32, and each
  // group holds every configuration exactly once.
  for (size_t g = 0; g < grid.size() / 32; ++g) {
    const auto& first = grid[g * 32];
    CHECK(first.case_index == g / 3);
    CHECK(first.case_id == official_cases().cases[g / 3].id);
    CHECK(static_cast<int>(first.dtype) == static_cast<int>(g % 3));
    std::set<uint32_t> configs;
    for (size_t i = g * 32; i < g * 32 + 32; ++i) {
      CHECK(grid[i].case_index == first.case_index);
      CHECK(grid[i].dtype == first.dtype);
      configs.insert(grid[i].config);
    }
    CHECK(configs.size() == 32);
    CHECK(*configs.rbegin() == 31);
  }
}

TEST_CASE("the grid order is seeded: same seed same order, other seed other order", "[grid]") {
  const auto techniques = tlb::default_techniques();
  const auto a = tlb::build_grid(official_cases(), techniques, {}, 7);
  const auto b = tlb::build_grid(official_cases(), techniques, {}, 7);
  const auto c = tlb::build_grid(official_cases(), techniques, {}, 8);
  auto configs = [](const std::vector<tlb::GridPoint>& g) {
    std::vector<uint32_t> v;
    for (const auto& p : g) v.push_back(p.config);
    return v;
  };
  CHECK(configs(a) == configs(b));
  CHECK(configs(a) != configs(c));
  // Not left in index order, and the groups are not all shuffled alike.
  const std::vector<uint32_t> order = configs(a);
  const std::vector<uint32_t> first(order.begin(), order.begin() + 32);
  const std::vector<uint32_t> second(order.begin() + 32, order.begin() + 64);
  CHECK_FALSE(std::is_sorted(first.begin(), first.end()));
  CHECK(first != second);
}

TEST_CASE("narrowing the selection keeps each remaining group's order", "[grid]") {
  const auto techniques = tlb::default_techniques();
  const auto full = tlb::build_grid(official_cases(), techniques, {}, 3);
  tlb::Selection sel = tlb::parse_selection("6", "", "bf16", official_cases(), techniques);
  const auto narrow = tlb::build_grid(official_cases(), techniques, sel, 3);
  REQUIRE(narrow.size() == 32);
  std::vector<uint32_t> from_full;
  for (const auto& p : full)
    if (p.case_id == 6 && p.dtype == DType::bf16) from_full.push_back(p.config);
  std::vector<uint32_t> from_narrow;
  for (const auto& p : narrow) from_narrow.push_back(p.config);
  CHECK(from_full == from_narrow);
}

TEST_CASE("the shuffle is pinned: the same seed gives the same order on every platform", "[grid]") {
  // Regression pin for the portable Fisher-Yates over splitmix64: a change here changes the
  // recorded order of every published run.
  std::vector<uint32_t> v = {0, 1, 2, 3, 4, 5, 6, 7};
  tlb::shuffle_configs(v, 1, 1, DType::fp16);
  std::vector<uint32_t> again = {0, 1, 2, 3, 4, 5, 6, 7};
  tlb::shuffle_configs(again, 1, 1, DType::fp16);
  CHECK(v == again);
  std::vector<uint32_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  // Cross-checked against an independent splitmix64 + Fisher-Yates written from the published
  // algorithm (splitmix64 from state 0 first gives 0xe220a8397b1dcdaf).
  CHECK(v == std::vector<uint32_t>{1, 7, 5, 0, 4, 6, 3, 2});
}

TEST_CASE("the shuffle is unbiased: every permutation of 4 is about equally likely", "[grid]") {
  std::map<std::vector<uint32_t>, int> counts;
  std::vector<int> first_position(4, 0);
  const int trials = 24 * 400;
  for (int s = 0; s < trials; ++s) {
    std::vector<uint32_t> v = {0, 1, 2, 3};
    tlb::shuffle_configs(v, static_cast<uint64_t>(s), 5, DType::bf16);
    ++counts[v];
    ++first_position[std::find(v.begin(), v.end(), 0u) - v.begin()];
  }
  CHECK(counts.size() == 24);
  // 400 expected per permutation; a naive "swap with any index" shuffle is off by ~30%.
  for (const auto& [perm, n] : counts) CHECK(std::abs(n - 400) < 100);
  for (int n : first_position) CHECK(std::abs(n - trials / 4) < 250);
}

TEST_CASE("a case's dtypes intersect the --dtypes selection, and --configs narrows every group", "[grid]") {
  nlohmann::json doc = {{"cases",
                         {{{"id", 1}, {"name", "a"}, {"batch", 1}, {"seq", 8}, {"d_model", 64},
                           {"heads", 2}, {"d_ff", 128}, {"layers", 1}, {"mask", "none"},
                           {"dtypes", {"fp32", "bf16"}}},
                          {{"id", 5}, {"name", "b"}, {"batch", 1}, {"seq", 8}, {"d_model", 64},
                           {"heads", 2}, {"d_ff", 128}, {"layers", 1}, {"mask", "none"}}}}};
  const tlb::CaseSet cases = tlb::parse_cases(doc.dump(), "t.json");
  const auto techniques = tlb::default_techniques();

  const auto all = tlb::build_grid(cases, techniques, {}, 1);
  CHECK(all.size() == 32 * 2 + 32 * 3);
  CHECK(all.front().dtype == DType::bf16);  // canonical order fp16, bf16, fp32 within a case
  CHECK(all[32].dtype == DType::fp32);

  const auto sel = tlb::parse_selection("", "1xxxx,11xxx,00000", "fp16,bf16", cases, techniques);
  const auto grid = tlb::build_grid(cases, techniques, sel, 1);
  // Case 1: bf16 only (fp16 not among its dtypes); case 5: fp16 and bf16; 16 + 1 configs each.
  REQUIRE(grid.size() == 17 * 3);
  for (const auto& p : grid) {
    CHECK((p.config == 0 || (p.config & 0b10000)));
    if (p.case_id == 1) CHECK(p.dtype == DType::bf16);
  }

  const auto none = tlb::build_grid(cases, techniques,
                                    tlb::parse_selection("1", "", "fp16", cases, techniques), 1);
  CHECK(none.empty());
}

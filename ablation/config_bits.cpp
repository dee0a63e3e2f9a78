#include "config_bits.hpp"

namespace tlb {
namespace {

constexpr const char* kNone = "reference";

void add_name(std::string& joined, std::string_view name) {
  if (!joined.empty()) joined += '+';
  joined += name;
}

}  // namespace

std::string config_bits(uint32_t config, int n) {
  std::string s(static_cast<size_t>(n), '0');
  for (int i = 0; i < n; ++i)
    if (config & (1u << (n - 1 - i))) s[static_cast<size_t>(i)] = '1';
  return s;
}

uint32_t config_index(std::string_view bits) {
  uint32_t k = 0;
  for (char c : bits) k = (k << 1) | (c == '1' ? 1u : 0u);
  return k;
}

std::string config_names(uint32_t config, const std::vector<std::string>& techniques) {
  return config_names(config_bits(config, static_cast<int>(techniques.size())), techniques);
}

std::string config_names(std::string_view bits, const std::vector<std::string>& techniques) {
  std::string s;
  for (size_t i = 0; i < bits.size() && i < techniques.size(); ++i)
    if (bits[i] == '1') add_name(s, techniques[i]);
  return s.empty() ? kNone : s;
}

std::string stage_names(const StageSwitch& sw) {
  std::string s;
  for (int i = 0; i < kNumStages; ++i)
    if (sw.on[i]) add_name(s, to_string(static_cast<Stage>(i)));
  return s.empty() ? kNone : s;
}

bool is_bit_string(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c != '0' && c != '1') return false;
  return true;
}

bool bits_match(std::string_view pattern, std::string_view bits) {
  if (pattern.size() != bits.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char p = pattern[i];
    if (p == 'x' || p == 'X') continue;
    if (p != bits[i]) return false;
  }
  return true;
}

}  // namespace tlb

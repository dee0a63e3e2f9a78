// A configuration of the techniques in its three spellings: an index whose most significant of
// n bits is technique 1 (0b11000), the bit string the files carry, technique 1 leftmost
// ("11000"), and the names of the techniques it turns on ("qkv+attn"; "reference" for none).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.hpp"  // StageSwitch

namespace tlb {

// 0b11000 with n = 5 -> "11000".
std::string config_bits(uint32_t config, int n);
// "11000" -> 0b11000; a character other than '1' is off.
uint32_t config_index(std::string_view bits);
// The techniques config turns on, joined by '+'; "reference" for none.
std::string config_names(uint32_t config, const std::vector<std::string>& techniques);
// The same from a bit string; bits past the last technique are ignored.
std::string config_names(std::string_view bits, const std::vector<std::string>& techniques);
// The stages a switch turns on, joined by '+' in stage order; "reference" for none.
std::string stage_names(const StageSwitch& sw);

// Only '0' and '1', at least one.
bool is_bit_string(std::string_view s);
// True when a bit string like "11000" matches a pattern like "x1xxx" ('x' or 'X' matches
// either).
bool bits_match(std::string_view pattern, std::string_view bits);

}  // namespace tlb

// Small text and hashing helpers the host side shares: sizes and durations for people, CSV
// cells, and the FNV-1a 64 fingerprints run.json records for the files and tables a run
// depends on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tlb {

inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// 512 B, 1.5 KiB, 3.2 MiB, 1.25 GiB, 1.1 TiB.
std::string human_bytes(uint64_t bytes);
// 42s, 3m07s, 1h05m; "?" for a negative or non-finite value.
std::string human_duration(double seconds);

// One CSV cell (RFC 4180): as it is, or in double quotes with each quote doubled where it holds
// a comma, a quote or a line break.
std::string csv_cell(std::string_view s);
// One CSV record split into its cells, the quoting undone.
std::vector<std::string> split_csv_line(std::string_view line);

// FNV-1a 64 of bytes, as "fnv1a64:<16 hex digits>".
std::string fnv1a64(std::string_view bytes);
// The same over a file's content; throws ConfigError naming the file where it cannot be read.
std::string file_fingerprint(const std::string& path);

}  // namespace tlb

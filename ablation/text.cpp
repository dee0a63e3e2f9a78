#include "text.hpp"

#include <fmt/core.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "config.hpp"

namespace tlb {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull, kFnvPrime = 1099511628211ull;

uint64_t fnv1a64_step(uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

}  // namespace

std::string human_bytes(uint64_t b) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024.0, kGiB = kBytesPerGiB;
  const double x = static_cast<double>(b);
  if (x >= 1024.0 * kGiB) return fmt::format("{:.1f} TiB", x / (1024.0 * kGiB));
  if (x >= kGiB) return fmt::format("{:.2f} GiB", x / kGiB);
  if (x >= kMiB) return fmt::format("{:.1f} MiB", x / kMiB);
  if (x >= kKiB) return fmt::format("{:.1f} KiB", x / kKiB);
  return fmt::format("{} B", b);
}

std::string human_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string csv_cell(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
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

std::string fnv1a64(std::string_view bytes) {
  return fmt::format("fnv1a64:{:016x}", fnv1a64_step(kFnvOffset, bytes));
}

std::string file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  uint64_t h = kFnvOffset;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    h = fnv1a64_step(h, std::string_view(buf, static_cast<size_t>(in.gcount())));
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

}  // namespace tlb

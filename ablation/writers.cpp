#include "writers.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "config.hpp"  // ConfigError
#include "json_fields.hpp"

namespace tlb {

namespace {

using json = nlohmann::json;

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

std::vector<PointRow> read_points_jsonl(const std::string& path,
                                        std::vector<std::string>* warnings) {
  const std::string content = json_fields::read_input_file(path, json_fields::kMaxPointsBytes);
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
    const json row = json_fields::parse_line(line, path, line_no);
    try {
      rows.push_back(point_from_json(row));
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}:{}: {}", path, line_no, e.what()));
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

// Resume bookkeeping: the done set comes from points.jsonl, keys separate every field of a
// point, and a simulated interrupt-then-resume schedule measures every point exactly once.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <map>

#include "resume.hpp"
#include "writers.hpp"

using namespace tlb;
namespace fs = std::filesystem;

namespace {
PointRow row(int id, const std::string& dtype, const std::string& cfg, const std::string& policy) {
  PointRow r;
  r.case_id = id;
  r.dtype = dtype;
  r.config = cfg;
  r.policy = policy;
  r.status = StatusKind::ok;
  return r;
}
}  // namespace

TEST_CASE("point keys tell apart case, dtype, configuration and policy", "[resume]") {
  const std::string k = point_key(row(3, "fp16", "11000", "FFFF"));
  CHECK(k == point_key(3, "fp16", "11000", "FFFF"));
  CHECK(k != point_key(3, "bf16", "11000", "FFFF"));
  CHECK(k != point_key(3, "fp16", "11001", "FFFF"));
  CHECK(k != point_key(3, "fp16", "11000", "EFFF"));
  CHECK(k != point_key(13, "fp16", "11000", "FFFF"));
  // No two different points may collide through concatenation.
  CHECK(point_key(1, "fp16", "1", "1FF") != point_key(1, "fp16", "11", "FF"));
}

TEST_CASE("interrupt then resume measures every point exactly once", "[resume]") {
  const fs::path dir = fs::temp_directory_path() / ("tlbench_test_resume_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> keys;
  std::vector<PointRow> schedule;
  for (int id : {1, 2})
    for (const char* dt : {"fp16", "fp32"})
      for (const char* cfg : {"00", "01", "10", "11"}) {
        schedule.push_back(row(id, dt, cfg, "FF"));
        keys.push_back(point_key(schedule.back()));
      }

  std::map<std::string, int> measured;
  auto run_segment = [&](size_t stop_after) {
    PointWriter w(dir.string());
    DoneSet done(w.existing());
    size_t n = 0;
    for (size_t i : pending_points(keys, done)) {
      if (n == stop_after) return;  // "Ctrl-C": nothing more is written
      ++measured[keys[i]];
      w.append(schedule[i]);
      ++n;
    }
  };
  run_segment(5);
  run_segment(3);
  run_segment(1000);
  run_segment(1000);  // a complete run resumed again measures nothing

  CHECK(measured.size() == keys.size());
  for (const auto& [k, n] : measured) {
    INFO(k);
    CHECK(n == 1);
  }
  const auto rows = read_points_jsonl((dir / "points.jsonl").string());
  CHECK(rows.size() == keys.size());
  std::map<std::string, int> on_disk;
  for (const PointRow& r : rows) ++on_disk[point_key(r)];
  for (const std::string& k : keys) CHECK(on_disk[k] == 1);
  // Order on disk is the schedule's order.
  for (size_t i = 0; i < rows.size(); ++i) CHECK(point_key(rows[i]) == keys[i]);
  fs::remove_all(dir);
}

// Per-dtype result matrices (docs/design.md §6): configurations x cases, each cell the speedup
// of that configuration on that case, or the point's status where there is no speedup
// (nonviable, oom, error, or empty where the point was not in the run). Built from points.jsonl
// alone, so the runner writes them at the end of a run and a report can rebuild them from any
// folder; the report's analysis writes its matrices (every configuration a row) the same way.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "point_status.hpp"
#include "writers.hpp"

namespace tlb {

struct SpeedupMatrix {
  std::string group;                      // fp16 | bf16 | fp32 (fp32-tf32/fp32-ieee if mixed)
  std::vector<std::string> configs;       // row labels: bit strings ascending, then "auto"
  std::vector<std::string> config_names;  // "qkv+attn", ...
  struct Col {
    int case_id = 0;
    std::string case_name;
    std::string baseline;  // the configuration the case's speedups are against
  };
  std::vector<Col> cases;                     // by case id
  std::vector<std::vector<std::string>> cells;  // [config][case]
};

// A/A rows are not configurations and are left out; auto rows (config "auto") form one row
// after the bit strings. A point written twice (resumed runs) counts once: the later row wins.
std::vector<SpeedupMatrix> build_matrices(const std::vector<PointRow>& rows);
// A cell: the speedup (4 decimals) of a measured point (ok or fallback), else its status.
std::string matrix_cell(const PointStatus& status, const std::optional<double>& speedup);
std::string matrix_csv(const SpeedupMatrix& m);
// (matrix_<group>.csv, its content) per group, as write_matrices writes them.
std::vector<std::pair<std::string, std::string>> matrix_files(const std::vector<PointRow>& rows);
// Writes DIR/matrix_<group>.csv per group; returns the file names written.
std::vector<std::string> write_matrices(const std::vector<PointRow>& rows, const std::string& dir);
// The same from DIR/points.jsonl.
std::vector<std::string> write_matrices_from_points(const std::string& dir);

}  // namespace tlb

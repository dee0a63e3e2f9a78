#include "matrices.hpp"

#include <fmt/core.h>

#include <map>
#include <set>

#include "text.hpp"

namespace tlb {

std::string matrix_cell(const PointStatus& status, const std::optional<double>& speedup) {
  if (speedup && status.ran()) return fmt::format("{:.4f}", *speedup);
  return status.str();
}

std::vector<SpeedupMatrix> build_matrices(const std::vector<PointRow>& rows) {
  // fp32 splits by math mode only when one folder holds both.
  std::set<std::string> fp32_math;
  for (const PointRow& r : rows)
    if (r.dtype == "fp32" && !r.is_aa()) fp32_math.insert(r.math);
  auto group_of = [&](const PointRow& r) {
    if (r.dtype == "fp32" && fp32_math.size() > 1) return "fp32-" + r.math;
    return r.dtype;
  };

  // group -> (config, case) -> row; later rows replace earlier ones.
  struct Acc {
    std::map<std::string, std::string> names;
    std::map<int, SpeedupMatrix::Col> cases;
    std::map<std::pair<std::string, int>, const PointRow*> cell;
  };
  std::map<std::string, Acc> groups;
  for (const PointRow& r : rows) {
    if (r.is_aa()) continue;
    Acc& a = groups[group_of(r)];
    // The auto row's choice differs per case ("auto=attn+norm"): the row is named "auto".
    a.names[r.config] = r.config == "auto" ? std::string("auto") : r.config_names;
    SpeedupMatrix::Col& col = a.cases[r.case_id];
    col.case_id = r.case_id;
    col.case_name = r.case_name;
    if (!r.baseline.empty() && r.config != "auto") col.baseline = r.baseline;
    a.cell[{r.config, r.case_id}] = &r;
  }

  std::vector<SpeedupMatrix> out;
  for (const char* order : {"fp16", "bf16", "fp32", "fp32-tf32", "fp32-ieee"}) {
    auto it = groups.find(order);
    if (it == groups.end()) continue;
    const Acc& a = it->second;
    SpeedupMatrix m;
    m.group = order;
    for (const auto& [cfg, names] : a.names) {
      m.configs.push_back(cfg);
      m.config_names.push_back(names);
    }
    for (const auto& [id, col] : a.cases) m.cases.push_back(col);
    for (const std::string& cfg : m.configs) {
      std::vector<std::string> line;
      for (const SpeedupMatrix::Col& col : m.cases) {
        auto c = a.cell.find({cfg, col.case_id});
        line.push_back(c == a.cell.end() ? std::string() : matrix_cell(c->second->status, c->second->speedup));
      }
      m.cells.push_back(std::move(line));
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::string matrix_csv(const SpeedupMatrix& m) {
  std::string s = "config,config_names";
  for (const SpeedupMatrix::Col& c : m.cases) {
    std::string label = fmt::format("{} {}", c.case_id, c.case_name);
    if (!c.baseline.empty() && c.baseline.find('1') != std::string::npos)
      label += fmt::format(" (vs {})", c.baseline);
    s += ',';
    s += csv_cell(label);
  }
  s += "\n";
  for (size_t i = 0; i < m.configs.size(); ++i) {
    s += m.configs[i];
    s += ',';
    s += csv_cell(m.config_names[i]);
    for (const std::string& cell : m.cells[i]) {
      s += ',';
      s += csv_cell(cell);
    }
    s += "\n";
  }
  return s;
}

std::vector<std::pair<std::string, std::string>> matrix_files(const std::vector<PointRow>& rows) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const SpeedupMatrix& m : build_matrices(rows)) files.emplace_back("matrix_" + m.group + ".csv", matrix_csv(m));
  return files;
}

std::vector<std::string> write_matrices(const std::vector<PointRow>& rows,
                                        const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& [name, text] : matrix_files(rows)) {
    write_file_atomic(dir + "/" + name, text);
    files.push_back(name);
  }
  return files;
}

std::vector<std::string> write_matrices_from_points(const std::string& dir) {
  return write_matrices(read_points_jsonl(dir + "/points.jsonl"), dir);
}

}  // namespace tlb

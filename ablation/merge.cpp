#include "merge.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "config.hpp"
#include "json_fields.hpp"
#include "matrices.hpp"
#include "output_files.hpp"
#include "point_row.hpp"
#include "resume.hpp"
#include "run_document.hpp"
#include "run_report.hpp"
#include "shard.hpp"
#include "writers.hpp"

namespace tlb {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

[[noreturn]] void refuse(const std::string& why) { throw ConfigError("merge: " + why + "; nothing written"); }

struct ShardFolder {
  std::string dir;
  json run;
  ShardCut cut;
  std::vector<std::string> lines;  // points.jsonl, each line without its newline
  std::vector<PointRow> rows;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) refuse(path + ": cannot read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ShardFolder load_shard(const std::string& dir) {
  ShardFolder f;
  f.dir = dir;
  std::error_code ec;
  if (!fs::is_regular_file(dir + "/run.json", ec)) refuse(dir + ": no run.json (not a run folder)");
  f.run = json_fields::parse_document(read_text(dir + "/run.json"), dir + "/run.json");
  if (!f.run.is_object() || !f.run.contains("shard"))
    refuse(dir + ": run.json records no shard (a folder of tlbench run --shard i/n)");
  f.cut = shard_cut_from_json(f.run["shard"], dir + "/run.json");
  const std::string text = fs::exists(dir + "/points.jsonl", ec) ? read_text(dir + "/points.jsonl") : "";
  if (!text.empty() && text.back() != '\n') refuse(dir + "/points.jsonl: the last line is torn (a write cut short)");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    try {
      f.rows.push_back(point_from_json(json::parse(line)));
    } catch (const std::exception& e) {
      refuse(fmt::format("{}/points.jsonl:{}: {}", dir, f.lines.size() + 1, e.what()));
    }
    f.lines.push_back(line);
  }
  return f;
}

std::string shard_name(const ShardFolder& f) {
  return fmt::format("shard {}/{} ({})", f.cut.spec.index, f.cut.spec.count, f.dir);
}

// The fields one plan fixes, by JSON pointer into run.json.
const std::vector<std::pair<const char*, const char*>> kSamePlan = {
    {"tool version", "/tool/version"},
    {"commit", "/tool/git_commit"},
    {"cases file fingerprint", "/cases_file/fingerprint"},
    {"techniques file fingerprint", "/techniques_file/fingerprint"},
    {"techniques", "/techniques"},
    {"cases", "/cases"},
    {"seed", "/seed"},
    {"mode", "/mode"},
    {"configurations", "/grid/configurations"},
    {"shard count", "/shard/count"},
    {"planned points", "/shard/plan_points"},
    {"planned groups", "/shard/plan_groups"},
    {"dispatch table fingerprint", "/dispatch_table/fingerprint"},
};

json value_at(const json& doc, const char* pointer) {
  const json::json_pointer p(pointer);
  return doc.contains(p) ? doc[p] : json(nullptr);
}

std::string shown(const json& v) {
  const std::string s = v.dump();
  return s.size() <= 40 ? s : "(differs)";
}

// Options as recorded, less where the shard wrote its folder.
json plan_options(const json& run) {
  json o = run.value("options", json::object());
  if (o.is_object()) o.erase("out_dir");
  return o;
}

void check_same_plan(const ShardFolder& a, const ShardFolder& b) {
  for (const auto& [what, pointer] : kSamePlan) {
    const json va = value_at(a.run, pointer), vb = value_at(b.run, pointer);
    if (va != vb)
      refuse(fmt::format("{} is not from the same plan as {}: {} {} vs {}", shard_name(b), shard_name(a), what,
                         shown(vb), shown(va)));
  }
  const json oa = plan_options(a.run), ob = plan_options(b.run);
  if (oa == ob) return;
  std::string key = "options";
  if (oa.is_object() && ob.is_object())
    for (const auto& [k, v] : oa.items())
      if (!ob.contains(k) || ob[k] != v) {
        key = "option " + k + " " + (ob.contains(k) ? shown(ob[k]) : "(absent)") + " vs " + shown(v);
        break;
      }
  refuse(fmt::format("{} is not from the same plan as {}: {}", shard_name(b), shard_name(a), key));
}

// Each shard once, all of 1..n, each complete; returns the folders ordered by index.
std::vector<const ShardFolder*> check_shard_set(const std::vector<ShardFolder>& shards) {
  const int n = shards.front().cut.spec.count;
  std::vector<const ShardFolder*> by_index(static_cast<size_t>(n), nullptr);
  for (const ShardFolder& f : shards) {
    const ShardFolder*& slot = by_index[static_cast<size_t>(f.cut.spec.index - 1)];
    if (slot) refuse(fmt::format("shard {}/{} given twice ({} and {})", f.cut.spec.index, n, slot->dir, f.dir));
    slot = &f;
  }
  std::string missing;
  for (int i = 0; i < n; ++i)
    if (!by_index[static_cast<size_t>(i)]) missing += fmt::format("{}{}/{}", missing.empty() ? "" : ", ", i + 1, n);
  if (!missing.empty()) refuse(fmt::format("shard {} missing", missing));
  for (const ShardFolder* f : by_index) {
    const std::string state = f->run.value("state", std::string("(none)"));
    if (state != "complete")
      refuse(fmt::format("{} is not complete (state {}); finish it with tlbench run --resume {}", shard_name(*f),
                         state, f->dir));
  }
  return by_index;
}

std::string device_of(const ShardFolder& f) {
  const json d = value_at(f.run, "/device/name");
  return d.is_string() ? d.get<std::string>() : std::string("(no device recorded)");
}

bool check_gpus(const std::vector<const ShardFolder*>& shards, bool allow_mixed) {
  for (const ShardFolder* f : shards)
    if (device_of(*f) != device_of(*shards.front())) {
      if (allow_mixed) return true;
      refuse(fmt::format("{} ran on {}, {} on {}; --allow-mixed-gpus merges them anyway", shard_name(*shards.front()),
                         device_of(*shards.front()), shard_name(*f), device_of(*f)));
    }
  return false;
}

std::string group_name(int case_id, const std::string& dtype) { return fmt::format("case {} {}", case_id, dtype); }

// Groups disjoint, each row in its shard's groups, no point twice, each shard's planned count
// on disk and the shards' counts adding up to the plan's.
void check_points(const std::vector<const ShardFolder*>& shards) {
  std::map<std::pair<int, DType>, const ShardFolder*> owner;
  std::map<std::string, std::string> seen;  // point key -> where
  size_t planned = 0;
  for (const ShardFolder* f : shards) {
    for (const ShardGroup& g : f->cut.groups) {
      auto [it, fresh] = owner.emplace(std::make_pair(g.case_id, g.dtype), f);
      if (!fresh)
        refuse(fmt::format("{} is in {} and {}", group_name(g.case_id, std::string(to_string(g.dtype))),
                           shard_name(*it->second), shard_name(*f)));
    }
    for (size_t i = 0; i < f->rows.size(); ++i) {
      const PointRow& r = f->rows[i];
      const std::string where = fmt::format("{}/points.jsonl:{}", f->dir, i + 1);
      const std::string point = fmt::format("{} {}", group_name(r.case_id, r.dtype), r.config);
      DType dt{};
      if (!parse_dtype(r.dtype, dt) || !f->cut.owns(r.case_id, dt))
        refuse(fmt::format("{}: point {} is outside {}'s groups", where, point, shard_name(*f)));
      auto [it, fresh] = seen.emplace(point_key(r), where);
      if (!fresh) refuse(fmt::format("point {} appears twice ({} and {})", point, it->second, where));
    }
    const json points = value_at(f->run, "/grid/points");
    const size_t want = points.is_number_unsigned() ? points.get<size_t>() : 0;
    if (f->rows.size() != want)
      refuse(fmt::format("{} holds {} of its {} planned points", shard_name(*f), f->rows.size(), want));
    planned += want;
  }
  const size_t plan = shards.front()->cut.plan_points;
  if (planned != plan) refuse(fmt::format("the shards hold {} points, their plan {}", planned, plan));
}

// Where a group comes in the plan: its case's place in the cases file, then its dtype.
std::pair<size_t, int> plan_position(const json& cases, int case_id, const std::string& dtype) {
  size_t at = cases.is_array() ? cases.size() : 0;
  for (size_t i = 0; cases.is_array() && i < cases.size(); ++i)
    if (cases[i].value("id", -1) == case_id) at = i;
  DType dt{};
  parse_dtype(dtype, dt);
  return {at, static_cast<int>(dt)};
}

struct MergedRows {
  std::vector<PointRow> rows;
  std::string jsonl;
  json groups = json::array();
};

MergedRows merge_rows(const std::vector<const ShardFolder*>& shards) {
  const json& cases = shards.front()->run["cases"];
  struct Item {
    std::pair<size_t, int> at;
    const ShardFolder* f;
    size_t i;
  };
  std::vector<Item> items;
  std::vector<std::pair<std::pair<size_t, int>, json>> groups;
  for (const ShardFolder* f : shards) {
    for (size_t i = 0; i < f->rows.size(); ++i)
      items.push_back({plan_position(cases, f->rows[i].case_id, f->rows[i].dtype), f, i});
    for (const json& g : f->run.value("groups", json::array()))
      groups.emplace_back(plan_position(cases, g.value("case_id", -1), g.value("dtype", "")), g);
  }
  // Stable: a group's rows keep their shard's file order.
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.at < b.at; });
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  MergedRows m;
  for (const Item& it : items) {
    m.rows.push_back(it.f->rows[it.i]);
    m.jsonl += it.f->lines[it.i] + "\n";
  }
  for (auto& [at, g] : groups) m.groups.push_back(std::move(g));
  return m;
}

json shard_record(const ShardFolder& f) {
  double max_mhz = 0;
  for (const json& seg : f.run.value("segments", json::array()))
    max_mhz = std::max(max_mhz, seg.value("sm_clock_max_observed_mhz", 0.0));
  return {{"index", f.cut.spec.index},
          {"count", f.cut.spec.count},
          {"source", f.cut.spec.source},
          {"out_dir", value_at(f.run, "/options/out_dir")},
          {"groups", f.run["shard"]["groups"]},
          {"points", f.rows.size()},
          {"predicted_seconds", f.cut.seconds},
          {"device", value_at(f.run, "/device")},
          {"memory_budget", value_at(f.run, "/memory_budget")},
          {"sm_clock_max_observed_mhz", max_mhz > 0 ? json(max_mhz) : json(nullptr)},
          {"start_time", value_at(f.run, "/start_time")},
          {"end_time", value_at(f.run, "/end_time")},
          {"command_line", value_at(f.run, "/command_line")}};
}

// The shards' planned groups ($.grid.groups) as one plan's, in the merged rows' order: what the
// gate checks the merged folder against, group by group. Empty when the shards recorded none.
json planned_groups(const std::vector<const ShardFolder*>& shards, const std::vector<PointRow>& rows) {
  std::map<std::pair<int64_t, std::string>, json> planned;
  for (const ShardFolder* f : shards)
    for (const json& g : value_at(f->run, "/grid/groups").is_array() ? value_at(f->run, "/grid/groups") : json::array())
      if (g.is_object() && g.contains("case_id") && g.contains("dtype") && g["case_id"].is_number_integer() &&
          g["dtype"].is_string())
        planned.emplace(std::make_pair(g["case_id"].get<int64_t>(), g["dtype"].get<std::string>()), g);
  json out = json::array();
  for (const PointRow& r : rows) {
    const auto it = planned.find({r.case_id, r.dtype});
    if (it == planned.end()) continue;
    out.push_back(it->second);
    planned.erase(it);
  }
  for (auto& [key, g] : planned) out.push_back(g);  // planned but without rows: the gate names them
  return out;
}

json merged_document(const std::vector<const ShardFolder*>& shards, const MergedRows& m,
                     const std::vector<std::string>& matrices, const MergeOptions& opt, bool mixed) {
  json doc = shards.front()->run;
  doc.erase("shard");
  doc["state"] = "complete";
  const size_t plan = shards.front()->cut.plan_points;
  size_t auto_points = 0;
  json records = json::array(), segments = json::array();
  std::string start, end;
  for (const ShardFolder* f : shards) {
    auto_points += value_at(f->run, "/grid/auto_points").is_number() ? value_at(f->run, "/grid/auto_points").get<size_t>() : 0;
    records.push_back(shard_record(*f));
    for (json seg : f->run.value("segments", json::array())) {
      seg["shard"] = f->cut.spec.index;
      segments.push_back(seg);
    }
    const std::string s = f->run.value("start_time", ""), e = f->run.value("end_time", "");
    if (start.empty() || (!s.empty() && s < start)) start = s;
    if (e > end) end = e;
  }
  doc["grid"]["points"] = plan;
  doc["grid"]["auto_points"] = auto_points;
  if (json groups = planned_groups(shards, m.rows); !groups.empty()) doc["grid"]["groups"] = groups;
  doc["groups"] = m.groups;
  doc["segments"] = segments;
  doc["shards"] = records;
  doc["start_time"] = start;
  doc["end_time"] = end;
  doc["updated_time"] = utc_timestamp();
  doc["matrices"] = matrices;
  doc["options"]["out_dir"] = opt.out_dir;
  doc["resume_command"] = resume_command_for(opt.out_dir);
  if (doc.value("mode", "") == "aa") doc["aa_noise_floor"] = aa_noise_floor(m.rows);
  doc["merge"] = {{"command_line", opt.command_line}, {"time", utc_timestamp()},
                  {"allow_mixed_gpus", opt.allow_mixed_gpus}, {"mixed_gpus", mixed}};
  record_point_counts(doc, m.rows, plan);
  return doc;
}

// Every file staged before any is moved into place; a failure removes the folder again.
void write_folder(const std::string& out, const MergedRows& m, const std::vector<std::pair<std::string, std::string>>& matrices,
                  const json& doc) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) refuse(fmt::format("--out {}: cannot create: {}", out, ec.message()));
  try {
    StagedFiles staged;
    std::string csv = csv_header() + "\n";
    for (const PointRow& r : m.rows) csv += to_csv_line(r) + "\n";
    staged.put(out + "/points.jsonl", m.jsonl);
    staged.put(out + "/points.csv", csv);
    for (const auto& [name, text] : matrices) staged.put(out + "/" + name, text);
    staged.put(out + "/run.json", doc.dump(2) + "\n");
    staged.commit();
  } catch (...) {
    fs::remove_all(out, ec);
    throw;
  }
}

}  // namespace

MergeOutcome merge_shards(const MergeOptions& opt) {
  if (opt.shard_dirs.empty()) refuse("no shard folder given");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(opt.out_dir, ec)))
    refuse(fmt::format("--out {}: the folder exists; choose another folder", opt.out_dir));
  std::vector<ShardFolder> shards;
  for (const std::string& dir : opt.shard_dirs) shards.push_back(load_shard(dir));
  for (const ShardFolder& f : shards) check_same_plan(shards.front(), f);
  const std::vector<const ShardFolder*> ordered = check_shard_set(shards);
  const bool mixed = check_gpus(ordered, opt.allow_mixed_gpus);
  check_points(ordered);

  const MergedRows m = merge_rows(ordered);
  const std::vector<std::pair<std::string, std::string>> matrices = matrix_files(m.rows);
  std::vector<std::string> names;
  for (const auto& [name, text] : matrices) names.push_back(name);
  write_folder(opt.out_dir, m, matrices, merged_document(ordered, m, names, opt, mixed));
  return MergeOutcome{ordered.size(), m.rows.size(), m.groups.size(), mixed};
}

}  // namespace tlb

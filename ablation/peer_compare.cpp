// PyTorch's peer file beside the auto rows of a results folder (peer_compare.hpp).
#include "peer_compare.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "config.hpp"
#include "json_fields.hpp"
#include "text.hpp"

namespace tlb::peer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A field of one peer row: a string, or an integer that is not a boolean.
std::string need_string(const json& o, const char* key, const std::string& where) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_string()) throw ConfigError(fmt::format("{}: \"{}\" missing or not a string", where, key));
  return it->get<std::string>();
}

std::string opt_string(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

PeerRow parse_row(const json& o, const std::string& where) {
  if (!o.is_object()) throw ConfigError(where + ": expected a JSON object");
  PeerRow r;
  const auto id = o.find("case_id");
  if (id == o.end() || !id->is_number_integer() || id->get<int64_t>() < 1 || id->get<int64_t>() > (1 << 30))
    throw ConfigError(where + ": \"case_id\" missing or not a positive integer");
  r.case_id = static_cast<int>(id->get<int64_t>());
  r.case_name = opt_string(o, "case_name");
  r.dtype = need_string(o, "dtype", where);
  r.math = need_string(o, "math", where);
  r.mode = need_string(o, "mode", where);
  r.status = need_string(o, "status", where);
  if (r.status == "ok") {
    const auto ms = o.find("median_ms");
    if (ms == o.end() || !ms->is_number() || !(ms->get<double>() > 0) || !std::isfinite(ms->get<double>()))
      throw ConfigError(where + ": an ok row needs a positive \"median_ms\"");
    r.median_ms = ms->get<double>();
  }
  if (const auto s = o.find("settled"); s != o.end()) {
    if (!s->is_boolean()) throw ConfigError(where + ": \"settled\" must be true or false");
    r.settled = s->get<bool>();
  }
  if (const auto g = o.find("ffn_gelu"); g != o.end()) {
    if (!g->is_string() || (*g != "tanh" && *g != "exact"))
      throw ConfigError(where + ": \"ffn_gelu\" must be \"tanh\" or \"exact\"");
    r.ffn_gelu = g->get<std::string>();
  }
  r.torch = opt_string(o, "torch");
  r.cudnn = opt_string(o, "cudnn");
  r.gpu = opt_string(o, "gpu");
  if (r.gpu.empty()) r.gpu = opt_string(o, "device");
  return r;
}

// The peer file's words for the math a point ran: native for fp16/bf16, tf32 or ieee for fp32.
std::string peer_math(const results::Point& p) { return p.dtype == "fp32" ? p.math : std::string("native"); }

int dtype_rank(const std::string& d) { return d == "fp16" ? 0 : d == "bf16" ? 1 : 2; }

std::string ms_cell(const std::optional<double>& v) { return v ? fmt::format("{:.6g}", *v) : std::string(); }

}  // namespace

bool PeerFile::timed_in_bursts() const {
  bool any_ok = false;
  for (const PeerRow& r : rows) {
    if (r.settled.has_value()) return false;
    any_ok = any_ok || r.status == "ok";
  }
  return any_ok;
}

std::string PeerFile::versions() const {
  std::vector<std::string> seen;
  for (const PeerRow& r : rows) {
    const std::string v = fmt::format("torch {}, cuDNN {}, on {}", r.torch.empty() ? "?" : r.torch,
                                      r.cudnn.empty() ? "-" : r.cudnn, r.gpu.empty() ? "?" : r.gpu);
    if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
  }
  return fmt::format("{}", fmt::join(seen, "; "));
}

std::optional<PeerFile> read_peer_file(const std::string& results_dir) {
  const fs::path path = fs::path(results_dir) / kPeerFile;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  PeerFile f;
  f.path = path.string();
  if (fs::is_symlink(fs::symlink_status(path, ec)) || !fs::is_regular_file(fs::status(path, ec)))
    throw ConfigError(f.path + ": not a regular file");
  const std::string text = json_fields::read_input_file(f.path);
  int line = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line;
    const std::string_view s(text.data() + pos, end - pos);
    pos = end + 1;
    if (s.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    f.rows.push_back(parse_row(json_fields::parse_line(s, f.path, line), fmt::format("{}:{}", f.path, line)));
    f.rows.back().line = line;
  }
  return f;
}

std::vector<Comparison> compare_auto(const results::Results& r, const PeerFile& f) {
  std::map<std::tuple<int, std::string, std::string>, std::vector<const PeerRow*>> peer;
  for (const PeerRow& row : f.rows) peer[{row.case_id, row.dtype, row.math}].push_back(&row);
  std::map<std::tuple<int, int, bool>, Comparison> out;
  for (const results::Point& p : r.points) {
    if (!p.is_auto() || p.is_aa()) continue;
    Comparison c;
    c.case_id = p.case_id;
    c.case_name = p.case_name;
    c.dtype = p.dtype;
    c.math = peer_math(p);
    c.auto_choice = p.auto_choice;
    if (p.measured()) c.auto_ms = p.cand_ms;
    if (const auto it = peer.find({c.case_id, c.dtype, c.math}); it != peer.end()) {
      for (const PeerRow* row : it->second) {
        if (!row->case_name.empty() && !p.case_name.empty() && row->case_name != p.case_name)
          throw ConfigError(fmt::format("{}:{}: case {} is \"{}\" here but \"{}\" in {}: a peer file of other cases",
                                        f.path, row->line, c.case_id, row->case_name, p.case_name, r.dir));
        if (row->status == "oom") c.peer_oom = true;
        if (row->median_ms && (!c.peer_ms || *row->median_ms < *c.peer_ms)) {
          c.peer_ms = row->median_ms;
          c.peer_mode = row->mode;
          c.peer_ffn_gelu = row->ffn_gelu;
        }
      }
    }
    if (c.peer_ms) c.peer_oom = false;
    if (c.auto_ms && c.peer_ms) c.ratio = *c.auto_ms / *c.peer_ms;
    out[{c.case_id, dtype_rank(c.dtype), c.math == "ieee"}] = std::move(c);
  }
  std::vector<Comparison> v;
  for (auto& [key, c] : out) v.push_back(std::move(c));
  return v;
}

std::string comparison_csv(const std::vector<Comparison>& rows) {
  std::string s =
      "case_id,case_name,dtype,math,auto_choice,auto_ms,pytorch_mode,pytorch_ms,auto_over_pytorch,pytorch_ffn_gelu\n";
  for (const Comparison& c : rows)
    s += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", c.case_id, csv_cell(c.case_name), c.dtype, c.math,
                     csv_cell(c.auto_choice), ms_cell(c.auto_ms), c.peer_oom ? "oom" : csv_cell(c.peer_mode),
                     ms_cell(c.peer_ms), c.ratio ? fmt::format("{:.4f}", *c.ratio) : std::string(),
                     c.peer_ffn_gelu);
  return s;
}

std::string comparison_json(const std::vector<Comparison>& rows, const PeerFile& f) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json doc = {{"file", f.path}, {"versions", f.versions()}, {"timed_in_bursts", f.timed_in_bursts()},
              {"rows", json::array()}};
  for (const Comparison& c : rows)
    doc["rows"].push_back({{"case_id", c.case_id}, {"case_name", c.case_name}, {"dtype", c.dtype}, {"math", c.math},
                           {"auto_choice", c.auto_choice}, {"auto_ms", opt(c.auto_ms)},
                           {"pytorch_mode", c.peer_mode.empty() ? json(nullptr) : json(c.peer_mode)},
                           {"pytorch_ms", opt(c.peer_ms)}, {"pytorch_oom", c.peer_oom},
                           {"auto_over_pytorch", opt(c.ratio)},
                           {"pytorch_ffn_gelu", c.peer_ffn_gelu.empty() ? json(nullptr) : json(c.peer_ffn_gelu)}});
  return doc.dump();
}

void print_comparison(const std::vector<Comparison>& rows, const PeerFile& f, std::FILE* out) {
  fmt::print(out, "\nauto against PyTorch's fastest mode ({}: {}); auto / PyTorch, below 1 auto is faster\n",
             f.path, f.versions());
  if (f.timed_in_bursts())
    fmt::print(out, "  note: PyTorch was timed in bursts (each mode after 25 ms of warm-up, by a pytorch_peer.py "
                    "older than --settle-s), at a higher clock than the sweep's points hold under the card's power "
                    "cap: the ratios favour PyTorch on the long forwards\n");
  if (std::any_of(rows.begin(), rows.end(), [](const Comparison& c) { return c.peer_ffn_gelu == "tanh"; }))
    fmt::print(out, "  note: PyTorch's native fast path computes the FFN's GELU as the tanh approximation (fused in "
                    "cuBLASLt's epilogue) where the case asks for the exact erf GELU that tlbench computes; "
                    "pytorch_ffn_gelu says where its fastest mode did\n");
  std::map<std::pair<int, std::string>, std::vector<const Comparison*>> groups;
  for (const Comparison& c : rows) groups[{dtype_rank(c.dtype) * 2 + (c.math == "ieee"), c.dtype + " " + c.math}].push_back(&c);
  for (const auto& [key, g] : groups) {
    double log_sum = 0;
    int n = 0, oom = 0, none = 0;
    const Comparison* worst = nullptr;
    std::vector<int> behind;
    for (const Comparison* c : g) {
      if (!c->ratio) {
        ++(c->peer_oom ? oom : none);
        continue;
      }
      log_sum += std::log(*c->ratio);
      ++n;
      if (!worst || *c->ratio > *worst->ratio) worst = c;
      if (*c->ratio > 1.0) behind.push_back(c->case_id);
    }
    std::string line = fmt::format("  {:<14}", key.second);
    if (n == 0) {
      line += " no case with both times";
    } else {
      line += fmt::format(" geomean {:.3f} over {} cases, worst {:.3f} (case {})", std::exp(log_sum / n), n,
                          *worst->ratio, worst->case_id);
      line += behind.empty() ? std::string(", PyTorch faster on none")
                             : fmt::format(", PyTorch faster on {} ({})", behind.size(), fmt::join(behind, ", "));
    }
    if (oom) line += fmt::format("; PyTorch out of memory on {}", oom);
    if (none) line += fmt::format("; {} without a time on one side", none);
    fmt::print(out, "{}\n", line);
  }
}

}  // namespace tlb::peer

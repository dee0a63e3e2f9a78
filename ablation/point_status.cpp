#include "point_status.hpp"

#include <ostream>

namespace tlb {
namespace {

constexpr std::string_view kFallback = "fallback";

const char* name_of(StatusKind k) {
  switch (k) {
    case StatusKind::ok: return "ok";
    case StatusKind::nonviable: return "nonviable";
    case StatusKind::oom: return "oom";
    case StatusKind::fallback: return "fallback:";
    case StatusKind::error: return "error";
    case StatusKind::aa: return "aa";
    case StatusKind::other: break;
  }
  return "";
}

}  // namespace

PointStatus::PointStatus(StatusKind kind) : kind_(kind), text_(name_of(kind)) {}

PointStatus PointStatus::fallback(const std::vector<std::string>& stages) {
  PointStatus s(StatusKind::fallback);
  for (size_t i = 0; i < stages.size(); ++i) s.text_ += (i ? "," : "") + stages[i];
  return s;
}

PointStatus PointStatus::from_string(std::string text) {
  PointStatus s;
  for (StatusKind k : {StatusKind::ok, StatusKind::nonviable, StatusKind::oom, StatusKind::error,
                       StatusKind::aa})
    if (text == name_of(k)) s.kind_ = k;
  if (std::string_view(text).substr(0, kFallback.size()) == kFallback) s.kind_ = StatusKind::fallback;
  s.text_ = std::move(text);
  return s;
}

std::vector<std::string> PointStatus::fallback_stages() const {
  std::vector<std::string> stages;
  const size_t colon = text_.find(':');
  if (!is_fallback() || colon == std::string::npos) return stages;
  size_t start = colon + 1;
  while (start < text_.size()) {
    size_t end = text_.find(',', start);
    if (end == std::string::npos) end = text_.size();
    stages.push_back(text_.substr(start, end - start));
    start = end + 1;
  }
  return stages;
}

std::string PointStatus::counted_as() const { return is_fallback() ? std::string(kFallback) : text_; }

std::ostream& operator<<(std::ostream& os, const PointStatus& s) { return os << s.str(); }

}  // namespace tlb

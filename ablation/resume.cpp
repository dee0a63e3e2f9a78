#include "resume.hpp"

#include <fmt/core.h>

namespace tlb {

std::string point_key(int case_id, std::string_view dtype, std::string_view config,
                      std::string_view policy) {
  return fmt::format("{}|{}|{}|{}", case_id, dtype, config, policy);
}

std::string point_key(const PointRow& r) {
  return point_key(r.case_id, r.dtype, r.config, r.policy);
}

DoneSet::DoneSet(const std::vector<PointRow>& rows) {
  for (const PointRow& r : rows) add(r);
}

std::vector<size_t> pending_points(const std::vector<std::string>& keys, const DoneSet& done) {
  std::vector<size_t> out;
  for (size_t i = 0; i < keys.size(); ++i)
    if (!done.contains(keys[i])) out.push_back(i);
  return out;
}

}  // namespace tlb

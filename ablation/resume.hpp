// Resume bookkeeping: a point is identified by (case id, dtype, configuration bits, policy);
// the dispatcher's point by "auto" in place of the bits, whatever configuration it chose.
// Every row in points.jsonl marks its point done, whatever its status, so a resumed run
// never measures a point twice; a point that was being measured when the run stopped has no
// row and is measured on resume.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "writers.hpp"

namespace tlb {

std::string point_key(int case_id, std::string_view dtype, std::string_view config,
                      std::string_view policy);
std::string point_key(const PointRow& r);

class DoneSet {
 public:
  DoneSet() = default;
  explicit DoneSet(const std::vector<PointRow>& rows);
  void add(const PointRow& r) { keys_.insert(point_key(r)); }
  bool contains(const std::string& key) const { return keys_.count(key) != 0; }
  size_t size() const { return keys_.size(); }

 private:
  std::set<std::string> keys_;
};

// Indices of `keys` (the schedule's point keys, in order) that are not done, in order.
std::vector<size_t> pending_points(const std::vector<std::string>& keys, const DoneSet& done);

}  // namespace tlb

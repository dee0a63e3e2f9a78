// Result files of a run (docs/design.md §6): points.jsonl and points.csv get one row per point
// the moment it is measured, flushed and fsync'ed, so a crash or a kernel fault loses nothing;
// run.json is replaced atomically (temporary file + rename), so it is always whole. The row and
// its codec are point_row.hpp.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "output_files.hpp"  // write_file_atomic
#include "point_row.hpp"

namespace tlb {

// Reads points.jsonl. A last line without its newline (cut off mid-write) is ignored and
// reported in `warnings`; any other malformed line throws ConfigError with its number.
std::vector<PointRow> read_points_jsonl(const std::string& path,
                                        std::vector<std::string>* warnings = nullptr);

// Appends rows to DIR/points.jsonl and DIR/points.csv. Opening an existing folder (resume)
// first cuts a partial last line off points.jsonl and rewrites points.csv from it, so the two
// files always hold the same rows.
class PointWriter {
 public:
  explicit PointWriter(const std::string& dir);
  ~PointWriter();
  PointWriter(const PointWriter&) = delete;
  PointWriter& operator=(const PointWriter&) = delete;
  // Rows already on disk when the writer opened.
  const std::vector<PointRow>& existing() const { return existing_; }
  // Writes both lines, then fflush + fsync: the row survives a crash from here on.
  void append(const PointRow& r);

 private:
  std::string dir_;
  std::FILE* jsonl_ = nullptr;
  std::FILE* csv_ = nullptr;
  std::vector<PointRow> existing_;
};


// UTC now as 2026-11-29T12:19:27Z.
std::string utc_timestamp();
// The current UTC time through strftime's `format`.
std::string utc_now(const char* format);

}  // namespace tlb

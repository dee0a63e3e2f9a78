// Every file the tool writes goes through here: a target must be a regular file or nothing yet,
// in a folder that exists (a symlink, FIFO, device or folder in its place is refused, exit 2,
// nothing written); content goes to a temporary beside the target, created exclusively and
// fsynced, then renamed over it, so readers see the old file or the new one, never half of
// one; and a command that writes several files stages them all before moving any into place.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tlb {

// Why `path` cannot take an output ("" where it can): empty, a folder, not a regular file, or
// in a folder that does not exist.
std::string output_target_problem(const std::string& path);
// Throws ConfigError "PATH: <problem>; nothing written" where output_target_problem says so.
void check_output_target(const std::string& path);

// Files written all or none. put() checks the target and writes a temporary beside it;
// commit() renames every temporary into place and syncs their folders. Whatever has not been
// committed when the object goes away (a put that threw, an exception before commit) is removed.
class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  ~StagedFiles();

  void put(const std::string& path, const std::string& content);
  void commit();

 private:
  std::vector<std::pair<std::string, std::string>> staged_;  // temporary, target
};

// One file, all or nothing (StagedFiles of one).
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace tlb

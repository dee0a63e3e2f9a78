#include "output_files.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "config.hpp"

namespace tlb {
namespace {

namespace fs = std::filesystem;

std::string folder_of(const std::string& path) {
  const std::string dir = fs::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

void sync_folder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// A name beside the target that no other writer (this process or another) uses.
std::string temporary_for(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return fmt::format("{}.tmp-{}-{}", path, ::getpid(), counter++);
}

}  // namespace

std::string output_target_problem(const std::string& path) {
  if (path.empty()) return "an empty path";
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (fs::is_directory(st)) return "is a folder";
  if (fs::exists(st) && !fs::is_regular_file(st))
    return fs::is_symlink(st) ? "is a symbolic link; not replaced"
                              : "exists and is not a regular file; not replaced";
  const std::string dir = folder_of(path);
  if (!fs::is_directory(dir, ec)) return "the folder " + dir + " does not exist";
  return "";
}

void check_output_target(const std::string& path) {
  const std::string why = output_target_problem(path);
  if (!why.empty())
    throw ConfigError(fmt::format("{}: {}; nothing written", path.empty() ? "\"\"" : path, why));
}

StagedFiles::~StagedFiles() {
  for (const auto& [tmp, target] : staged_) ::unlink(tmp.c_str());
}

void StagedFiles::put(const std::string& path, const std::string& content) {
  check_output_target(path);
  const std::string tmp = temporary_for(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  staged_.emplace_back(tmp, path);  // removed again unless committed
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error(fmt::format("{}: cannot write: {}", path, std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!synced) throw std::runtime_error(fmt::format("{}: cannot write: {}", path, std::strerror(err)));
}

void StagedFiles::commit() {
  // A target may have become something else since put(): checked again right before the move.
  for (const auto& [tmp, target] : staged_) check_output_target(target);
  std::vector<std::string> folders;
  while (!staged_.empty()) {
    const auto [tmp, target] = staged_.front();
    if (std::rename(tmp.c_str(), target.c_str()) != 0)
      throw std::runtime_error(fmt::format("{}: cannot move into place: {}", target, std::strerror(errno)));
    staged_.erase(staged_.begin());
    folders.push_back(folder_of(target));
  }
  // The renames are durable only once their folders are synced.
  for (const std::string& dir : folders) sync_folder(dir);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  StagedFiles f;
  f.put(path, content);
  f.commit();
}

}  // namespace tlb

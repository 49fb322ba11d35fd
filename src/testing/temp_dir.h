// TempDir: a fresh directory for one test or benchmark run, made with mkdtemp
// under $TMPDIR (or /tmp, or a parent the caller names), mode 0711 (other users, such as the ros2 user an engine started as
// root runs as, may pass through but not list it), and removed with everything in it when the object dies. The one
// temporary-directory helper of the tests and ros2-bench (docs/testing.md). In
// a test, a directory that cannot be made aborts the binary with the reason
// (no test can go on without it); Create reports it instead. One thread;
// movable, not copyable.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace ros2::testing {

class TempDir {
 public:
  // `prefix` starts the directory's name ("<prefix>-XXXXXX"); keep it short
  // where Unix socket paths (at most 107 bytes) go under the directory.
  explicit TempDir(std::string_view prefix = "ros2-test");
  // "<parent>/<prefix>XXXXXX" (mkdtemp), or the error.
  static Result<TempDir> Create(const std::string& parent, std::string_view prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  TempDir& operator=(TempDir&&) = delete;

  const std::string& path() const { return path_; }

 private:
  struct Made {};
  TempDir(Made, std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace ros2::testing

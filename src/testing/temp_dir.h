// TempDir: a fresh directory for one test, made with mkdtemp under $TMPDIR (or
// /tmp), mode 0711 (other users, such as the ros2 user an engine started as
// root runs as, may pass through but not list it), and removed with everything in it when the object dies. The one
// temporary-directory helper of the tests (docs/testing.md). A directory that
// cannot be made aborts the test binary with the reason: no test can go on
// without it. Test thread only; not copyable.
#pragma once

#include <string>
#include <string_view>

namespace ros2::testing {

class TempDir {
 public:
  // `prefix` starts the directory's name ("<prefix>-XXXXXX"); keep it short
  // where Unix socket paths (at most 107 bytes) go under the directory.
  explicit TempDir(std::string_view prefix = "ros2-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ros2::testing

// TestDir: a fresh temporary directory under $TMPDIR (or /tmp) for one test,
// removed with everything in it when the object dies. Test-only.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace ros2::control {

class TestDir {
 public:
  TestDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/ros2-control-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TestDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ros2::control

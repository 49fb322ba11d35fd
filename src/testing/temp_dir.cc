#include "testing/temp_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace ros2::testing {

TempDir::TempDir(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/";
  tmpl.append(prefix);
  tmpl += "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "TempDir: mkdtemp %s: %s\n", tmpl.c_str(), std::strerror(errno));
    std::abort();
  }
  // Searchable, not listable, by other users: an engine or agent started as
  // root switches to the ros2 user (docs/security.md, "Privileges"), which
  // must reach the data directories tests make in here.
  ::chmod(tmpl.c_str(), 0711);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace ros2::testing

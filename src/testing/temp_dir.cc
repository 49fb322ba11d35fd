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
  auto made = Create(base != nullptr && *base != '\0' ? base : "/tmp", std::string(prefix) + "-");
  if (!made.ok()) {
    std::fprintf(stderr, "TempDir: %s\n", made.status().ToString().c_str());
    std::abort();
  }
  path_ = std::exchange(made->path_, {});
}

Result<TempDir> TempDir::Create(const std::string& parent, std::string_view prefix) {
  std::string tmpl = parent + "/";
  tmpl.append(prefix);
  tmpl += "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno(errno, "mkdtemp " + tmpl);
  // Searchable, not listable, by other users: an engine or agent started as
  // root switches to the ros2 user (docs/security.md, "Privileges"), which
  // must reach the data directories made in here.
  ::chmod(tmpl.c_str(), 0711);
  return TempDir(Made{}, tmpl);
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace ros2::testing

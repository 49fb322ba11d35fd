// `ros2ctl fs put` and `get`: copies between the local file system and a DFS
// namespace, a file or (with recursive) a whole tree, with cp's rules for the
// destination: an existing directory receives the source under its own name,
// anything else is the new name. Regular files move through a FileStreamer
// (large pipelined blocks), symlinks are recreated as symlinks (their target
// text unchanged), permission bits are preserved (directories get theirs last,
// so a read-only directory can still be filled), and other file types (FIFOs,
// sockets, devices) are skipped with a warning on stderr. The whole tree is
// walked first, so the progress line knows the total. Called from the
// command's thread.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fs_progress.h"
#include "fs_session.h"

namespace ros2::ctl {

struct TransferOptions {
  bool recursive = false;
  ProgressMode progress = ProgressMode::kAuto;
};

struct TransferSummary {
  std::string source;
  std::string destination;  // the resolved destination path
  uint64_t files = 0;
  uint64_t directories = 0;
  uint64_t symlinks = 0;
  uint64_t skipped = 0;  // entries of other types
  uint64_t bytes = 0;
  double seconds = 0;

  std::string ToText(std::string_view verb) const;
  nlohmann::json ToJson() const;
};

// LOCAL (file, symlink or, recursive, directory) -> REMOTE.
Result<TransferSummary> PutPath(FsSession& session, const std::string& local, const std::string& remote,
                                const TransferOptions& options);
// REMOTE -> LOCAL, the same way round.
Result<TransferSummary> GetPath(FsSession& session, const std::string& remote, const std::string& local,
                                const TransferOptions& options);

}  // namespace ros2::ctl

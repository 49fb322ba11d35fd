// Filesystem::Readdir: a page of names from the directory object's shards
// (a paged dkey listing that resumes from the caller's anchor), then every
// entry's record fetched at once through one event queue, for its type, mode
// and object id.
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "dfs/filesystem_core.h"
#include "dfs/direct_filesystem.h"

namespace ros2::dfs {
namespace {

constexpr size_t kRecordGuess = kEntryRecordFixedSize + 180;  // most symlink targets fit

// One page of dkeys, their records fetched at once; appends the entries.
Status ReadPage(FilesystemCore& core, client::Object& obj, const Entry& dir, DirAnchor& anchor, size_t max,
                std::vector<DirEntry>& out) {
  // The caller's anchor moves only when the whole page was read. (Copied
  // field by field: a plain copy here made GCC 12 report a false -Wrestrict
  // in the inlined string copies below.)
  DirAnchor next;
  next.shard = anchor.shard;
  next.position.assign(anchor.position.data(), anchor.position.size());
  ROS2_ASSIGN_OR_RETURN(auto names, obj.ListDkeysPage(next, max));

  // Fetch every record at once.
  ROS2_ASSIGN_OR_RETURN(auto eq, core.container().CreateEventQueue());
  std::vector<std::vector<std::byte>> values(names.size(), std::vector<std::byte>(kRecordGuess));
  std::vector<client::IoResult> results(names.size());
  Status submit_error;
  for (size_t i = 0; i < names.size() && submit_error.ok(); ++i) {
    if (names[i] == kDirTimesDkey) continue;  // the directory's own times, not an entry
    client::FetchArgs f;
    f.dkey = names[i];
    f.akey = kEntryAkey;
    f.buffer = values[i];
    submit_error = obj.SubmitFetch(*eq, f, [&results, i](const client::IoResult& r) { results[i] = r; });
  }
  while (eq->in_flight() > 0) {
    std::array<client::Event, 1> ignored;
    (void)eq->Wait(ignored, eq->in_flight(), std::chrono::seconds(5));
  }
  ROS2_RETURN_IF_ERROR(submit_error);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == kDirTimesDkey) continue;
    ROS2_RETURN_IF_ERROR(results[i].status);
    if (results[i].size == 0) continue;  // removed since the listing
    std::vector<std::byte>& value = values[i];
    if (results[i].size > value.size()) {  // a long symlink target: fetch it whole
      ROS2_ASSIGN_OR_RETURN(value, obj.Get(names[i], kEntryAkey, results[i].size));
      if (value.empty()) continue;
    } else {
      value.resize(results[i].size);
    }
    ROS2_ASSIGN_OR_RETURN(EntryRecord rec, DecodeEntry(value, DescribeEntry(dir.oid, names[i])));
    DirEntry d;
    d.name = std::move(names[i]);
    d.mode = rec.mode;
    d.oid = rec.oid;
    d.ino = InodeNumber(rec.oid, core.superblock().root);
    out.push_back(std::move(d));
  }
  anchor.shard = next.shard;
  anchor.position = std::move(next.position);
  anchor.eof = next.eof;
  return Status::Ok();
}

}  // namespace

Result<std::vector<DirEntry>> DirectFilesystem::Readdir(const Entry& dir, DirAnchor& anchor, size_t max) {
  if (!dir.is_dir()) return Status::NotDirectory(fmt::format("dfs readdir: '{}' is not a directory", dir.name));
  if (max == 0) return Status::InvalidArgument("dfs readdir: page size 0");
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(dir, R_OK, fmt::format("readdir of '{}'", dir.name)));
  std::vector<DirEntry> out;
  ROS2_ASSIGN_OR_RETURN(client::Object obj, core_->OpenObject(dir.oid));
  // A page of keys can hold only the directory's times value or entries
  // removed since the listing; a caller gets entries or the end, never an
  // empty page before it.
  while (out.empty() && !anchor.eof) {
    ROS2_RETURN_IF_ERROR(ReadPage(*core_, obj, dir, anchor, max, out));
  }
  return out;
}

}  // namespace ros2::dfs

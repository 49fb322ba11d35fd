#include "fs_listing.h"

#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <vector>

#include <fmt/format.h>

namespace ros2::ctl {

namespace {

std::string OctalMode(mode_t mode) {
  return fmt::format("{:04o}", mode & 07777);
}

std::string ShortTime(const timespec& t) {
  std::tm tm{};
  ::gmtime_r(&t.tv_sec, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm);
  return buf;
}

struct Listed {
  std::string name;
  mode_t mode = 0;
  uint64_t ino = 0;
  bool has_attr = false;
  dfs::Attr attr;
  std::string target;  // symlinks, long format
};

nlohmann::json ListedToJson(const Listed& l) {
  nlohmann::json j = {{"name", l.name}, {"type", TypeName(l.mode)}, {"mode", OctalMode(l.mode)}, {"ino", l.ino}};
  if (l.has_attr) {
    j["size"] = l.attr.size;
    j["uid"] = l.attr.uid;
    j["gid"] = l.attr.gid;
    j["mtime"] = IsoTime(l.attr.mtime);
    if (S_ISLNK(l.mode)) j["target"] = l.target;
  }
  return j;
}

Status FillLong(dfs::Filesystem& fs, const dfs::Entry& entry, const dfs::Attr& attr, const std::string& path,
                Listed& l) {
  l.has_attr = true;
  l.attr = attr;
  l.mode = attr.mode;
  l.ino = attr.ino;
  if (S_ISLNK(attr.mode)) {
    auto t = fs.Readlink(entry);
    if (!t.ok()) return FsError(t.status(), "readlink", path);
    l.target = *t;
  }
  return Status::Ok();
}

}  // namespace

std::string ModeString(mode_t mode) {
  std::string s(10, '-');
  if (S_ISDIR(mode)) s[0] = 'd';
  if (S_ISLNK(mode)) s[0] = 'l';
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) {
    if (mode & (0400 >> i)) s[static_cast<size_t>(i) + 1] = rwx[i];
  }
  if (mode & S_ISUID) s[3] = (mode & S_IXUSR) ? 's' : 'S';
  if (mode & S_ISGID) s[6] = (mode & S_IXGRP) ? 's' : 'S';
  if (mode & S_ISVTX) s[9] = (mode & S_IXOTH) ? 't' : 'T';
  return s;
}

std::string TypeName(mode_t mode) {
  if (S_ISREG(mode)) return "file";
  if (S_ISDIR(mode)) return "dir";
  if (S_ISLNK(mode)) return "symlink";
  return "other";
}

std::string IsoTime(const timespec& t) {
  std::tm tm{};
  ::gmtime_r(&t.tv_sec, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:09}Z", buf, t.tv_nsec);
}

Result<CommandOutput> ListPath(FsSession& session, const std::string& path, bool long_format) {
  dfs::Filesystem& fs = session.fs();
  ROS2_ASSIGN_OR_RETURN(auto top, session.LookupWithAttr(path, "ls"));
  std::vector<Listed> listed;
  if (!top.first.is_dir()) {
    Listed l{SplitRemotePath(path).second, top.second.mode, top.second.ino};
    if (long_format) ROS2_RETURN_IF_ERROR(FillLong(fs, top.first, top.second, path, l));
    listed.push_back(std::move(l));
  } else {
    ROS2_ASSIGN_OR_RETURN(auto entries, ReadWholeDirectory(fs, top.first, path));
    for (const auto& e : entries) {
      Listed l{e.name, e.mode, e.ino};
      if (long_format) {
        const std::string child = JoinRemotePath(path, e.name);
        auto ea = fs.LookupWithAttr(top.first, e.name);
        if (!ea.ok()) return FsError(ea.status(), "ls", child);
        ROS2_RETURN_IF_ERROR(FillLong(fs, ea->first, ea->second, child, l));
      }
      listed.push_back(std::move(l));
    }
  }
  std::string human;
  nlohmann::json entries = nlohmann::json::array();
  size_t size_width = 1, uid_width = 1, gid_width = 1;
  for (const auto& l : listed) {
    size_width = std::max(size_width, std::to_string(l.attr.size).size());
    uid_width = std::max(uid_width, std::to_string(l.attr.uid).size());
    gid_width = std::max(gid_width, std::to_string(l.attr.gid).size());
  }
  for (const auto& l : listed) {
    entries.push_back(ListedToJson(l));
    if (!long_format) {
      human += l.name + "\n";
      continue;
    }
    human += fmt::format("{} {:>{}} {:>{}} {:>{}} {} {}", ModeString(l.mode), l.attr.uid, uid_width, l.attr.gid,
                         gid_width, l.attr.size, size_width, ShortTime(l.attr.mtime), l.name);
    if (S_ISLNK(l.mode)) human += " -> " + l.target;
    human += "\n";
  }
  return CommandOutput{human, {{"path", path}, {"entries", entries}}};
}

Result<CommandOutput> StatPath(FsSession& session, const std::string& path) {
  ROS2_ASSIGN_OR_RETURN(auto ea, session.LookupWithAttr(path, "stat"));
  const dfs::Attr& a = ea.second;
  std::string target;
  if (S_ISLNK(a.mode)) {
    auto t = session.fs().Readlink(ea.first);
    if (!t.ok()) return FsError(t.status(), "readlink", path);
    target = *t;
  }
  const std::string type_text = S_ISREG(a.mode)   ? "regular file"
                                : S_ISDIR(a.mode) ? "directory"
                                : S_ISLNK(a.mode) ? "symbolic link"
                                                  : "other";
  std::string human = fmt::format("  File: {}{}\n", path, target.empty() ? "" : " -> " + target);
  human +=
      fmt::format("  Type: {}\n  Size: {:<12} Blocks: {:<8} IO Block: {}\n", type_text, a.size, a.blocks, a.blksize);
  human += fmt::format(" Inode: {:<12} Links: {}\nAccess: ({}/{})  Uid: {}  Gid: {}\n", a.ino, a.nlink,
                       OctalMode(a.mode), ModeString(a.mode), a.uid, a.gid);
  human += fmt::format("Access: {}\nModify: {}\nChange: {}\nObject: {}\n", IsoTime(a.atime), IsoTime(a.mtime),
                       IsoTime(a.ctime), a.oid.ToString());
  nlohmann::json j = {{"path", path},
                      {"type", TypeName(a.mode)},
                      {"mode", OctalMode(a.mode)},
                      {"size", a.size},
                      {"blocks", a.blocks},
                      {"blksize", a.blksize},
                      {"ino", a.ino},
                      {"nlink", a.nlink},
                      {"uid", a.uid},
                      {"gid", a.gid},
                      {"atime", IsoTime(a.atime)},
                      {"mtime", IsoTime(a.mtime)},
                      {"ctime", IsoTime(a.ctime)},
                      {"oid", a.oid.ToString()}};
  if (S_ISLNK(a.mode)) j["target"] = target;
  return CommandOutput{human, j};
}

}  // namespace ros2::ctl

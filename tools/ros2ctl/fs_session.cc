#include "fs_session.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace ros2::ctl {

Result<std::string> NormalizeRemotePath(std::string_view path) {
  if (path.empty()) return Status::InvalidArgument("empty path (use / for the container's root)");
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(pos, end - pos);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    pos = end + 1;
  }
  std::string out;
  for (std::string_view p : parts) {
    out += '/';
    out += p;
  }
  if (out.empty()) out = "/";
  if (out.size() > dfs::kMaxPathLength) {
    return Status::NameTooLong(fmt::format("path '{}': {}", path, std::strerror(ENAMETOOLONG)));
  }
  return out;
}

std::pair<std::string, std::string> SplitRemotePath(const std::string& path) {
  if (path == "/") return {"/", ""};
  size_t slash = path.rfind('/');
  std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  return {dir, path.substr(slash + 1)};
}

std::string JoinRemotePath(const std::string& dir, std::string_view name) {
  if (dir.empty() || dir.back() == '/') return dir + std::string(name);
  return dir + "/" + std::string(name);
}

Status FsError(const Status& status, std::string_view op, std::string_view path) {
  if (status.ok()) return status;
  const int err = status.ToErrno();
  std::string msg = fmt::format("{} '{}': {}", op, path, std::strerror(err));
  switch (status.code()) {
    case Status::Code::kNotFound:
    case Status::Code::kAlreadyExists:
    case Status::Code::kNotDirectory:
    case Status::Code::kIsDirectory:
    case Status::Code::kNotEmpty:
    case Status::Code::kNameTooLong:
    case Status::Code::kLoop:
    case Status::Code::kPermissionDenied:
    case Status::Code::kNoSpace: break;
    default: msg += fmt::format(" ({})", status.message());
  }
  return Status::FromCode(static_cast<uint8_t>(status.code()), std::move(msg));
}

Status LocalError(int err, std::string_view op, std::string_view path) {
  Status st = Status::FromErrno(err, "");
  return Status::FromCode(static_cast<uint8_t>(st.code()), fmt::format("{} '{}': {}", op, path, std::strerror(err)));
}

Result<std::vector<dfs::DirEntry>> ReadWholeDirectory(dfs::Filesystem& fs, const dfs::Entry& dir,
                                                      const std::string& path) {
  constexpr size_t kBatch = 1024;
  std::vector<dfs::DirEntry> all;
  dfs::DirAnchor anchor;
  while (!anchor.eof) {
    auto batch = fs.Readdir(dir, anchor, kBatch);
    if (!batch.ok()) return FsError(batch.status(), "ls", path);
    for (auto& e : *batch) all.push_back(std::move(e));
  }
  std::sort(all.begin(), all.end(), [](const dfs::DirEntry& a, const dfs::DirEntry& b) { return a.name < b.name; });
  return all;
}

FsSession::~FsSession() = default;

Result<std::unique_ptr<FsSession>> FsSession::Open(CtlContext& ctx, const FsTarget& target) {
  client::ClientOptions co;
  if (const char* agent = std::getenv("ROS2_AGENT_SOCKET"); agent != nullptr && *agent != '\0') {
    // Offload mode: the agent holds the tenant's credentials and knows the
    // cluster; its socket is all this process needs (no --data-dir, no secret).
    co.agent_socket = agent;
  } else {
    ROS2_ASSIGN_OR_RETURN(co.control, ctx.ControlAddress());
    ROS2_ASSIGN_OR_RETURN(auto creds, ctx.TenantCredentials());
    co.tenant = creds.tenant;
    co.secret = creds.secret;
  }
  co.transport = target.transport;
  co.control_timeout = std::chrono::seconds(ctx.options().timeout_s);
  auto s = std::unique_ptr<FsSession>(new FsSession());
  ROS2_ASSIGN_OR_RETURN(s->client_, client::Client::Connect(co));
  auto pool = s->client_->ConnectPool(target.pool);
  if (!pool.ok()) return pool.status().WithContext(fmt::format("fs: pool '{}'", target.pool));
  s->pool_ = std::move(*pool);
  auto cont = s->pool_->OpenContainer(target.container);
  if (!cont.ok()) {
    return cont.status().WithContext(fmt::format("fs: container '{}' of pool '{}'", target.container, target.pool));
  }
  s->container_ = std::move(*cont);
  dfs::MountOptions mo;
  mo.uid = ::getuid();
  mo.gid = ::getgid();
  mo.encryption_key_file = target.key_file;
  auto fs = dfs::Filesystem::Mount(*s->container_, mo);
  if (!fs.ok()) {
    return fs.status().WithContext(
        fmt::format("fs: mounting the namespace of container '{}' (pool '{}')", target.container, target.pool));
  }
  s->fs_ = std::move(*fs);
  return s;
}

Result<dfs::Entry> FsSession::Lookup(const std::string& path, std::string_view op) {
  auto e = fs_->LookupPath(path);
  if (!e.ok()) return FsError(e.status(), op, path);
  return std::move(*e);
}

Result<std::pair<dfs::Entry, dfs::Attr>> FsSession::LookupWithAttr(const std::string& path, std::string_view op) {
  ROS2_ASSIGN_OR_RETURN(dfs::Entry e, Lookup(path, op));
  auto attr = fs_->Stat(e);
  if (!attr.ok()) return FsError(attr.status(), op, path);
  return std::make_pair(std::move(e), *attr);
}

Result<dfs::Entry> FsSession::LookupParent(const std::string& path, std::string_view op) {
  if (path == "/") return Status::InvalidArgument(fmt::format("{} '/': the root has no parent directory", op));
  ROS2_ASSIGN_OR_RETURN(dfs::Entry dir, Lookup(SplitRemotePath(path).first, op));
  if (!dir.is_dir()) return FsError(Status::NotDirectory("parent"), op, path);
  return dir;
}

}  // namespace ros2::ctl

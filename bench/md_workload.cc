#include "bench/md_workload.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <chrono>
#include <filesystem>

#include "client/local_cluster.h"
#include "ros2/client.h"
#include "ros2/dfs.h"

namespace ros2::bench {

namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string FileName(int job, uint64_t i) {
  return fmt::format("f{}.{}", job, i);
}

// ---------------------------------------------------------------------------
// POSIX

class PosixNamespace final : public MdNamespace {
 public:
  explicit PosixNamespace(std::string dir) : dir_(std::move(dir)) {}

  Status Create(const std::string& name) override {
    const std::string p = Path(name);
    int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno(errno, "create " + p);
    if (::close(fd) != 0) return Status::FromErrno(errno, "close " + p);
    return Status::Ok();
  }
  Status Stat(const std::string& name) override {
    struct stat st {};
    const std::string p = Path(name);
    if (::stat(p.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + p);
    return Status::Ok();
  }
  Result<uint64_t> ListDirectory() override {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return Status::FromErrno(errno, "opendir " + dir_);
    uint64_t n = 0;
    errno = 0;
    while (struct dirent* de = ::readdir(d)) {
      std::string_view name = de->d_name;
      if (name != "." && name != "..") ++n;
    }
    const int err = errno;
    ::closedir(d);
    if (err != 0) return Status::FromErrno(err, "readdir " + dir_);
    return n;
  }
  Status Unlink(const std::string& name) override {
    const std::string p = Path(name);
    if (::unlink(p.c_str()) != 0) return Status::FromErrno(errno, "unlink " + p);
    return Status::Ok();
  }
  Status RemoveDirectory() override {
    if (::rmdir(dir_.c_str()) != 0 && errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT) {
      return Status::FromErrno(errno, "rmdir " + dir_);
    }
    return Status::Ok();
  }

 private:
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

// ---------------------------------------------------------------------------
// DFS

class DfsNamespace final : public MdNamespace {
 public:
  static Result<std::unique_ptr<MdNamespace>> Open(const MdDfsTarget& t) {
    auto ns = std::unique_ptr<DfsNamespace>(new DfsNamespace());
    client::ClientOptions o;
    o.transport = t.transport;
    ROS2_RETURN_IF_ERROR(local_cluster::CompleteClientOptions(o, t.data_dir));
    ROS2_ASSIGN_OR_RETURN(ns->client_, client::Client::Connect(o));
    ROS2_ASSIGN_OR_RETURN(ns->pool_, ns->client_->ConnectPool(t.pool));
    ROS2_ASSIGN_OR_RETURN(ns->cont_, ns->pool_->OpenContainer(t.container));
    ROS2_ASSIGN_OR_RETURN(ns->fs_, dfs::Filesystem::Mount(*ns->cont_));
    // mkdir -p (MkdirAll tolerates the other jobs making the same parents).
    const std::filesystem::path dir(t.dir);
    auto parent = ns->fs_->MkdirAll(dir.parent_path().string());
    if (!parent.ok()) return parent.status().WithContext("md: dfs directory " + t.dir);
    auto made = ns->fs_->MkdirAll(t.dir);
    if (!made.ok()) return made.status().WithContext("md: dfs directory " + t.dir);
    ns->parent_ = std::move(*parent);
    ns->dir_ = std::move(*made);
    ns->name_ = dir.filename().string();
    return std::unique_ptr<MdNamespace>(std::move(ns));
  }

  Status Create(const std::string& name) override {
    return fs_->Open(dir_, name, O_CREAT | O_EXCL | O_WRONLY, 0644).status();
  }
  Status Stat(const std::string& name) override { return fs_->LookupWithAttr(dir_, name).status(); }
  Result<uint64_t> ListDirectory() override {
    dfs::DirAnchor anchor;
    uint64_t n = 0;
    while (!anchor.eof) {
      ROS2_ASSIGN_OR_RETURN(auto batch, fs_->Readdir(dir_, anchor, 1024));
      n += batch.size();
    }
    return n;
  }
  Status Unlink(const std::string& name) override { return fs_->Unlink(dir_, name); }
  Status RemoveDirectory() override {
    if (name_.empty()) return Status::Ok();
    Status st = fs_->Rmdir(parent_, name_);
    if (st.ok() || st.code() == Status::Code::kNotEmpty || st.IsNotFound()) return Status::Ok();
    return st;
  }

 private:
  DfsNamespace() = default;
  // Destroyed in reverse: the namespace before the container, pool and client.
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::Pool> pool_;
  std::unique_ptr<client::Container> cont_;
  std::unique_ptr<dfs::Filesystem> fs_;
  dfs::Entry dir_, parent_;
  std::string name_;
};

// Times `op(i)` for i in [0, files): start, end and each op's latency.
template <typename Op>
Status TimeEach(MdPhaseResult& r, uint64_t files, Op op) {
  r.lat_us.reserve(files);
  r.start_ns = NowNs();
  int64_t prev = r.start_ns;
  for (uint64_t i = 0; i < files; ++i) {
    ROS2_RETURN_IF_ERROR(op(i));
    const int64_t now = NowNs();
    r.lat_us.push_back(static_cast<double>(now - prev) / 1000.0);
    prev = now;
  }
  r.end_ns = prev;
  r.ops = files;
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<MdNamespace>> OpenPosixNamespace(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("md: mkdir -p {}: {}", dir, ec.message()));
  return std::unique_ptr<MdNamespace>(new PosixNamespace(dir));
}

Result<std::unique_ptr<MdNamespace>> OpenDfsNamespace(const MdDfsTarget& target) {
  return DfsNamespace::Open(target);
}

Result<std::vector<MdPhaseResult>> RunMdJob(MdNamespace& ns, const MdJobSpec& spec, ProcessBarrier& barrier) {
  std::vector<MdPhaseResult> out(kMdPhases.size());
  for (size_t p = 0; p < kMdPhases.size(); ++p) out[p].name = kMdPhases[p];
  const int job = spec.job;
  ROS2_RETURN_IF_ERROR(barrier.Wait());
  ROS2_RETURN_IF_ERROR(TimeEach(out[0], spec.files, [&](uint64_t i) { return ns.Create(FileName(job, i)); }));
  ROS2_RETURN_IF_ERROR(barrier.Wait());
  ROS2_RETURN_IF_ERROR(TimeEach(out[1], spec.files, [&](uint64_t i) { return ns.Stat(FileName(job, i)); }));
  ROS2_RETURN_IF_ERROR(barrier.Wait());
  out[2].start_ns = NowNs();
  ROS2_ASSIGN_OR_RETURN(out[2].ops, ns.ListDirectory());
  out[2].end_ns = NowNs();
  ROS2_RETURN_IF_ERROR(barrier.Wait());
  ROS2_RETURN_IF_ERROR(TimeEach(out[3], spec.files, [&](uint64_t i) { return ns.Unlink(FileName(job, i)); }));
  ROS2_RETURN_IF_ERROR(barrier.Wait());
  return out;
}

nlohmann::json MdPhasesToJson(const std::vector<MdPhaseResult>& phases) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& p : phases) {
    arr.push_back(
        {{"name", p.name}, {"start_ns", p.start_ns}, {"end_ns", p.end_ns}, {"ops", p.ops}, {"lat_us", p.lat_us}});
  }
  return arr;
}

Result<std::vector<MdPhaseResult>> MdPhasesFromJson(const nlohmann::json& j) {
  if (!j.is_array()) return Status::Protocol("md: a job's result is not a JSON array");
  std::vector<MdPhaseResult> out;
  try {
    for (const auto& p : j) {
      MdPhaseResult r;
      r.name = p.at("name").get<std::string>();
      r.start_ns = p.at("start_ns").get<int64_t>();
      r.end_ns = p.at("end_ns").get<int64_t>();
      r.ops = p.at("ops").get<uint64_t>();
      r.lat_us = p.at("lat_us").get<std::vector<double>>();
      out.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Protocol(fmt::format("md: a job's phase record is malformed: {}", e.what()));
  }
  return out;
}

}  // namespace ros2::bench

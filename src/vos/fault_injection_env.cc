#include "vos/fault_injection_env.h"

#include <cerrno>
#include <utility>

#include <fmt/format.h>

namespace ros2::vos {
namespace {

constexpr size_t kBlock = 4096;

// A File whose writes and syncs pass through the owning FaultInjectionEnv.
class FaultInjectionFile final : public File {
 public:
  FaultInjectionFile(FaultInjectionEnv* env, std::unique_ptr<File> base) : env_(env), base_(std::move(base)) {}

  Status Read(uint64_t offset, std::span<std::byte> buf) override { return base_->Read(offset, buf); }

  Result<size_t> Write(uint64_t offset, std::span<const std::byte> data) override {
    int decided = env_->ApplyWriteFaults(data.size(), static_cast<int>(data.size()));
    if (decided < 0) return Status::FromErrno(-decided, fmt::format("vos: injected write fault at {}", offset));
    return base_->Write(offset, data.first(static_cast<size_t>(decided)));
  }

  Status Sync() override {
    if (env_->ShouldFailSync()) return Status::IOError("vos: injected fdatasync failure");
    return base_->Sync();
  }

  Status Allocate(uint64_t offset, uint64_t len) override {
    if (env_->fail_allocate())
      return Status::FromErrno(ENOSPC, fmt::format("vos: injected fallocate failure at {}", offset));
    return base_->Allocate(offset, len);
  }

  Result<uint64_t> Size() override { return base_->Size(); }
  int fd() const override { return base_->fd(); }
  bool direct() const override { return base_->direct(); }

  int FilterAsyncResult(IoKind kind, uint64_t offset, size_t len, int result) override {
    result = base_->FilterAsyncResult(kind, offset, len, result);
    if (kind != IoKind::kWrite || result < 0) return result;
    // The real write already happened; a short result only makes the VOS
    // rewrite the tail, which is what it must do after a genuine short write.
    return env_->ApplyWriteFaults(len, result);
  }

 private:
  FaultInjectionEnv* env_;
  std::unique_ptr<File> base_;
};

}  // namespace

void FaultInjectionEnv::Reset() {
  writes_ = 0;
  syncs_ = 0;
  last_sync_thread_ = std::thread::id();
  fail_write_n_ = 0;
  fail_write_errno_ = 0;
  short_writes_ = false;
  budget_ = -1;
  fail_sync_ = false;
  fail_allocate_ = false;
}

int FaultInjectionEnv::ApplyWriteFaults(size_t len, int result) {
  uint64_t n = ++writes_;
  if (fail_write_n_.load() != 0 && n == fail_write_n_.load()) return -fail_write_errno_.load();
  int64_t budget = budget_.load();
  if (budget >= 0) {
    if (static_cast<int64_t>(len) > budget) return -ENOSPC;
    budget_ -= static_cast<int64_t>(len);
  }
  if (short_writes_.load() && len > kBlock) {
    size_t shortened = std::max(kBlock, (len / 2) / kBlock * kBlock);
    return static_cast<int>(std::min<size_t>(shortened, static_cast<size_t>(result)));
  }
  return result;
}

bool FaultInjectionEnv::ShouldFailSync() {
  ++syncs_;
  last_sync_thread_ = std::this_thread::get_id();
  return fail_sync_.load();
}

Result<std::unique_ptr<File>> FaultInjectionEnv::OpenFile(const std::string& path, const FileOptions& options) {
  FileOptions opts = options;
  // A file system without O_DIRECT: the open falls back to buffered I/O, as
  // PosixEnv does when open(O_DIRECT) fails with EINVAL.
  if (refuse_direct_) opts.direct = false;
  auto base = base_->OpenFile(path, opts);
  if (!base.ok()) return base.status();
  return std::unique_ptr<File>(std::make_unique<FaultInjectionFile>(this, std::move(*base)));
}

}  // namespace ros2::vos

// FaultInjectionEnv: an Env for tests that makes the VOS data file misbehave.
//
// It wraps another Env (the real one by default) and, on the files it opens,
// can fail the Nth write (counting synchronous and asynchronous writes from 1)
// with an errno, cut every write short, refuse writes with ENOSPC once a byte
// budget is used up, fail fdatasync, refuse to allocate (grow) with ENOSPC,
// and open files as a file system without O_DIRECT would. Faults apply to
// both File::Write and
// the io_uring completions seen through File::FilterAsyncResult. Owned by the
// test; must outlive every store opened with it. Thread-safe (atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "vos/env.h"

namespace ros2::vos {

class FaultInjectionEnv : public Env {
 public:
  explicit FaultInjectionEnv(Env* base = Env::Default()) : base_(base) {}

  // Fails the write whose 1-based number (since the last Reset) is `n` with -err.
  void FailNthWrite(uint64_t n, int err) {
    fail_write_errno_ = err;
    fail_write_n_ = n;
  }
  // Every write transfers at most half its length (rounded down to 4 KiB, at least 4 KiB).
  void SetShortWrites(bool on) { short_writes_ = on; }
  // Writes fail with ENOSPC once `bytes` more bytes have been written.
  void SetWriteBudget(uint64_t bytes) { budget_ = static_cast<int64_t>(bytes); }
  void SetFailSync(bool on) { fail_sync_ = on; }
  // Files opened from now on behave as on a file system that refuses O_DIRECT
  // (tmpfs): opened buffered, File::direct() false. Not cleared by Reset.
  void SetRefuseDirect(bool on) { refuse_direct_ = on; }
  // File::Allocate (growing the data file) fails with ENOSPC.
  void SetFailAllocate(bool on) { fail_allocate_ = on; }
  bool fail_allocate() const { return fail_allocate_.load(); }
  // Clears every fault and the write counter.
  void Reset();

  uint64_t writes() const { return writes_.load(); }
  uint64_t syncs() const { return syncs_.load(); }
  // The thread that ran the last fdatasync (a default id before any).
  std::thread::id last_sync_thread() const { return last_sync_thread_.load(); }

  // Returns the result a write of `len` bytes should have instead of `result`.
  int ApplyWriteFaults(size_t len, int result);
  bool ShouldFailSync();

  Result<std::unique_ptr<File>> OpenFile(const std::string& path, const FileOptions& options) override;
  bool FileExists(const std::string& path) override { return base_->FileExists(path); }
  Status CreateDirs(const std::string& path) override { return base_->CreateDirs(path); }
  Status RemoveFile(const std::string& path) override { return base_->RemoveFile(path); }
  Status RemoveAll(const std::string& path) override { return base_->RemoveAll(path); }
  Status Rename(const std::string& from, const std::string& to) override { return base_->Rename(from, to); }
  Status SyncDir(const std::string& path) override { return base_->SyncDir(path); }

 private:
  Env* base_;
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> syncs_{0};
  std::atomic<std::thread::id> last_sync_thread_{};
  std::atomic<uint64_t> fail_write_n_{0};
  std::atomic<int> fail_write_errno_{0};
  std::atomic<bool> short_writes_{false};
  std::atomic<int64_t> budget_{-1};  // -1: unlimited
  std::atomic<bool> fail_sync_{false};
  std::atomic<bool> refuse_direct_{false};
  std::atomic<bool> fail_allocate_{false};
};

}  // namespace ros2::vos

#include "vos/commit_thread.h"

#include <pthread.h>
#include <unistd.h>

#include <fmt/format.h>

namespace ros2::vos {

Status FromRocks(const rocksdb::Status& s, std::string_view context) {
  if (s.ok()) return Status::Ok();
  std::string msg = fmt::format("{}: rocksdb: {}", context, s.ToString());
  if (s.IsNotFound()) return Status::NotFound(std::move(msg));
  if (s.IsCorruption()) return Status::Corruption(std::move(msg));
  if (s.IsNoSpace()) return Status::NoSpace(std::move(msg));
  if (s.IsInvalidArgument()) return Status::InvalidArgument(std::move(msg));
  if (s.IsBusy() || s.IsTryAgain()) return Status::Busy(std::move(msg));
  return Status::IOError(std::move(msg));
}

void CommitGroupNow(rocksdb::DB* db, ExtentStore* extents, bool sync, CommitGroup* group) {
  if (sync && group->sync_data) {
    group->status = extents->Sync();
    if (!group->status.ok()) return;
  }
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  group->metadata_attempted = true;
  group->status = FromRocks(db->Write(wo, &group->batch), "vos: commit");
}

CommitThread::CommitThread(rocksdb::DB* db, ExtentStore* extents, int event_fd)
    : db_(db), extents_(extents), event_fd_(event_fd), thread_([this] { Run(); }) {}

CommitThread::~CommitThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CommitThread::Start(std::unique_ptr<CommitGroup> group) {
  busy_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = std::move(group);
  }
  cv_.notify_one();
}

std::unique_ptr<CommitGroup> CommitThread::TakeFinished() {
  if (!busy_) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (!finished_) return nullptr;
  busy_ = false;
  return std::move(finished_);
}

void CommitThread::Run() {
  ::pthread_setname_np(::pthread_self(), "vos-commit");  // in top/perf/ps -L
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || pending_ != nullptr; });
    if (!pending_) return;  // stop requested and nothing left
    std::unique_ptr<CommitGroup> group = std::move(pending_);
    lock.unlock();
    CommitGroupNow(db_, extents_, /*sync=*/true, group.get());
    lock.lock();
    finished_ = std::move(group);
    uint64_t one = 1;
    ssize_t rc = ::write(event_fd_, &one, sizeof(one));
    (void)rc;  // an eventfd write only fails when the counter would overflow
  }
}

}  // namespace ros2::vos

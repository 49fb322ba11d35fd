// CommitThread: the VOS's private thread that makes update groups durable.
//
// The target thread hands over one CommitGroup at a time (a RocksDB write batch
// holding every update whose data writes have completed); the commit thread
// runs fdatasync on the extent store when the group's extents need it (see
// ExtentSync in vos.h), then writes the batch with a synced WAL, and signals
// the VOS event fd. Updates that become ready meanwhile form the next group,
// so one WAL sync (and, where needed, one fdatasync) is shared by all of them
// (group commit) and the target thread keeps submitting I/O while a commit is
// syncing. Created and owned by the VOS;
// Start/TakeFinished/busy only from the target thread.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "common/status.h"
#include "vos/extent_store.h"

namespace ros2::vos {

struct CommitGroup {
  rocksdb::WriteBatch batch;
  bool sync_data = false;           // the group wrote extents: fdatasync the extent store first
  Status status;                    // the outcome, set by Commit
  bool metadata_attempted = false;  // the RocksDB write was tried (its outcome may be unknown on error)
  std::vector<void*> updates;       // the VOS's update states, opaque here
  std::vector<void*> punches;       // the VOS's punch states, opaque here
  uint64_t check_group = 0;         // != 0: the batch writes this check record (extents the WAL sync covers)
  size_t retired_checks = 0;        // the batch deletes this many of the VOS's oldest check records
  uint64_t written_prefix = 0;      // != 0: the batch records this written prefix of the data file
};

// Runs the commit of one group synchronously on the calling thread.
void CommitGroupNow(rocksdb::DB* db, ExtentStore* extents, bool sync, CommitGroup* group);

class CommitThread {
 public:
  CommitThread(rocksdb::DB* db, ExtentStore* extents, int event_fd);
  ~CommitThread();  // finishes the group in progress, then joins
  CommitThread(const CommitThread&) = delete;
  CommitThread& operator=(const CommitThread&) = delete;

  // REQUIRES: !busy().
  void Start(std::unique_ptr<CommitGroup> group);
  // The finished group, or nullptr while it is still committing (or none was started).
  std::unique_ptr<CommitGroup> TakeFinished();
  bool busy() const { return busy_; }

 private:
  void Run();

  rocksdb::DB* db_;
  ExtentStore* extents_;
  int event_fd_;
  bool busy_ = false;  // target thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<CommitGroup> pending_;   // guarded by mu_
  std::unique_ptr<CommitGroup> finished_;  // guarded by mu_
  bool stop_ = false;                      // guarded by mu_
  std::thread thread_;
};

// Maps a RocksDB status to a ROS2 status with `context` prefixed.
Status FromRocks(const rocksdb::Status& s, std::string_view context);

}  // namespace ros2::vos

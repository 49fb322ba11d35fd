#include "control/state_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <mutex>

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

namespace ros2::control {
namespace {

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  std::string msg = fmt::format("state store: {}: {}", what, s.ToString());
  if (s.IsNotFound()) return Status::NotFound(std::move(msg));
  if (s.IsCorruption()) return Status::Corruption(std::move(msg));
  if (s.IsNoSpace()) return Status::NoSpace(std::move(msg));
  if (s.IsBusy() || s.IsTryAgain()) return Status::Busy(std::move(msg));
  return Status::IOError(std::move(msg));
}

// The embedded store: one RocksDB database; a mutex makes a batch's compares
// and its write one step.
class EmbeddedStore final : public StateStore {
 public:
  EmbeddedStore(std::string dir, std::unique_ptr<rocksdb::DB> db) : dir_(std::move(dir)), db_(std::move(db)) {}

  Result<std::string> Get(std::string_view key) const override;
  Status Write(const StoreBatch& batch) override;
  Result<std::vector<std::pair<std::string, std::string>>> Scan(std::string_view prefix) const override;
  std::string Describe() const override { return "rocksdb " + dir_; }

 private:
  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::mutex write_mu_;
};

}  // namespace

Result<std::unique_ptr<StateStore>> StateStore::Open(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, fmt::format("state store: mkdir {}", dir));
  }
  rocksdb::Options options;
  options.create_if_missing = true;
  options.max_open_files = 64;
  options.keep_log_file_num = 2;
  options.max_log_file_size = 1 << 20;
  options.write_buffer_size = 4 << 20;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &raw);
  std::unique_ptr<rocksdb::DB> db(raw);
  ROS2_RETURN_IF_ERROR(FromRocks(s, fmt::format("open {}", dir)));
  return std::unique_ptr<StateStore>(new EmbeddedStore(dir, std::move(db)));
}

Result<std::string> EmbeddedStore::Get(std::string_view key) const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()), &value);
  if (s.IsNotFound()) return Status::NotFound(fmt::format("state store: no key '{}'", key));
  ROS2_RETURN_IF_ERROR(FromRocks(s, fmt::format("get '{}'", key)));
  return value;
}

Status EmbeddedStore::Write(const StoreBatch& batch) {
  std::lock_guard lock(write_mu_);
  for (const auto& c : batch.compares) {
    auto have = Get(c.key);
    if (!have.ok() && !have.status().IsNotFound()) return have.status();
    const bool holds = c.value ? (have.ok() && *have == *c.value) : !have.ok();
    if (!holds) return Status::Busy(fmt::format("state store: '{}' changed concurrently", c.key));
  }
  rocksdb::WriteBatch wb;
  for (const auto& key : batch.deletes) {
    ROS2_RETURN_IF_ERROR(FromRocks(wb.Delete(key), fmt::format("delete '{}'", key)));
  }
  for (const auto& [key, value] : batch.puts) {
    ROS2_RETURN_IF_ERROR(FromRocks(wb.Put(key, value), fmt::format("put '{}'", key)));
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, &wb), "write batch");
}

Result<std::vector<std::pair<std::string, std::string>>> EmbeddedStore::Scan(std::string_view prefix) const {
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  rocksdb::Slice p(prefix.data(), prefix.size());
  for (it->Seek(p); it->Valid() && it->key().starts_with(p); it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  ROS2_RETURN_IF_ERROR(FromRocks(it->status(), fmt::format("scan '{}'", prefix)));
  return out;
}

}  // namespace ros2::control

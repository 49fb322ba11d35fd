#include "control/state_store.h"

#include <sys/stat.h>

#include <cerrno>

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

}  // namespace

StateStore::StateStore(std::string dir, std::unique_ptr<rocksdb::DB> db) : dir_(std::move(dir)), db_(std::move(db)) {}
StateStore::~StateStore() = default;

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
  return std::unique_ptr<StateStore>(new StateStore(dir, std::move(db)));
}

Result<std::string> StateStore::Get(std::string_view key) const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()), &value);
  if (s.IsNotFound()) return Status::NotFound(fmt::format("state store: no key '{}'", key));
  ROS2_RETURN_IF_ERROR(FromRocks(s, fmt::format("get '{}'", key)));
  return value;
}

Status StateStore::Write(const StoreBatch& batch) {
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

Status StateStore::Put(std::string key, std::string value) {
  StoreBatch b;
  b.Put(std::move(key), std::move(value));
  return Write(b);
}

Result<std::vector<std::pair<std::string, std::string>>> StateStore::Scan(std::string_view prefix) const {
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

// StateStore: the control plane's embedded, durable key-value store (RocksDB).
//
// Holds every piece of management state of one engine: tenants, pools,
// containers, the system map, the capability key and revoked sessions, under
// the key schema of docs/control-plane.md ("State store schema"). Writes are
// atomic batches synced to the WAL before they return. The store knows nothing
// of the records' meaning; Catalog, TenantRegistry and SystemMap do.
//
// Owned by ControlPlane; every method may be called from any thread (RocksDB
// is thread-safe); callers serialise their read-modify-write sequences.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace rocksdb {
class DB;
}

namespace ros2::control {

// One atomic set of puts and deletes.
struct StoreBatch {
  std::vector<std::pair<std::string, std::string>> puts;
  std::vector<std::string> deletes;

  void Put(std::string key, std::string value) { puts.emplace_back(std::move(key), std::move(value)); }
  void Delete(std::string key) { deletes.push_back(std::move(key)); }
};

class StateStore {
 public:
  // Opens (creating if missing) the RocksDB database in `dir`; the directory
  // is created with mode 0700.
  static Result<std::unique_ptr<StateStore>> Open(const std::string& dir);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // NotFound naming the key when it is absent.
  Result<std::string> Get(std::string_view key) const;
  // Applies every put and delete atomically (deletes first), synced.
  Status Write(const StoreBatch& batch);
  Status Put(std::string key, std::string value);
  // Every (key, value) whose key starts with `prefix`, in key order.
  Result<std::vector<std::pair<std::string, std::string>>> Scan(std::string_view prefix) const;

  const std::string& dir() const { return dir_; }

 private:
  StateStore(std::string dir, std::unique_ptr<rocksdb::DB> db);
  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace ros2::control

// StateStore: the control plane's durable key-value store, one interface with
// two implementations chosen by configuration (`control.store`):
//
//   embedded  RocksDB under <data_dir>/control-db (this file's Open): the
//             single-engine default, no other process needed.
//   etcd      an etcd v3 cluster shared by every engine of a cluster
//             (etcd_store.h), for clusters of more than one engine.
//
// Holds every piece of management state: tenants, pools, containers, the system
// map, the capability key and revoked sessions, under the key schema of
// docs/control-plane.md ("State store schema"). A Write is one atomic batch
// (RocksDB: a synced WriteBatch; etcd: one Txn), applied only when every
// compare of the batch holds. The store knows nothing of the records' meaning;
// Catalog, TenantRegistry and SystemMap do.
//
// Owned by ControlPlane; every method may be called from any thread; callers
// serialise their read-modify-write sequences within one process, and a
// shared() store's callers guard them across processes with compares.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ros2::control {

// A condition of a batch: `key` holds exactly `value`, or (nullopt) is absent.
struct StoreCompare {
  std::string key;
  std::optional<std::string> value;
};

// One atomic set of compares, puts and deletes.
struct StoreBatch {
  std::vector<StoreCompare> compares;
  std::vector<std::pair<std::string, std::string>> puts;
  std::vector<std::string> deletes;

  void Put(std::string key, std::string value) { puts.emplace_back(std::move(key), std::move(value)); }
  void Delete(std::string key) { deletes.push_back(std::move(key)); }
  // The batch applies only if `key` still holds `value` (nullopt: is absent).
  void Require(std::string key, std::optional<std::string> value) {
    compares.push_back({std::move(key), std::move(value)});
  }
};

class StateStore {
 public:
  // Opens (creating if missing) the embedded RocksDB store in `dir`; the
  // directory is created with mode 0700.
  static Result<std::unique_ptr<StateStore>> Open(const std::string& dir);
  virtual ~StateStore() = default;

  // NotFound naming the key when it is absent.
  virtual Result<std::string> Get(std::string_view key) const = 0;
  // Applies every put and delete atomically (deletes first), durably, when
  // every compare holds; Busy naming the first failed compare otherwise.
  virtual Status Write(const StoreBatch& batch) = 0;
  Status Put(std::string key, std::string value) {
    StoreBatch b;
    b.Put(std::move(key), std::move(value));
    return Write(b);
  }
  // Every (key, value) whose key starts with `prefix`, in key order.
  virtual Result<std::vector<std::pair<std::string, std::string>>> Scan(std::string_view prefix) const = 0;

  // Where the store is, for logs and errors ("rocksdb /d/control-db", "etcd a:1,b:2").
  virtual std::string Describe() const = 0;
  // True when other engines write the same store (etcd): in-memory copies of
  // records must be re-read, and read-modify-write sequences compare.
  virtual bool shared() const { return false; }

 protected:
  StateStore() = default;
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;
};

}  // namespace ros2::control

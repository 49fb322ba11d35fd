// DkeyGate: serialises the conditional operations (update if absent / if
// present, punch if present) of one target per (pool, container, object,
// dkey), so that each one's existence check and its write are atomic against
// the others. VOS updates are asynchronous (their metadata becomes visible at
// commit), so a second conditional update of the same dkey must not check
// before the first one committed: it waits in the gate until the holder
// releases the key.
//
// Owned by a Target and used only from its thread: no locking.
// Unconditional operations do not pass the gate.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/object_id.h"
#include "common/uuid.h"

namespace ros2::engine {

class DkeyGate {
 public:
  static std::string Key(const Uuid& pool, const Uuid& container, const ObjectId& oid, std::string_view dkey);
  // The object's part of Key: its first kObjectKeySize bytes. A dkey is never
  // empty (obj_rpc refuses it), so no dkey's key equals an object's.
  static constexpr size_t kObjectKeySize = 48;
  static std::string ObjectKey(const Uuid& pool, const Uuid& container, const ObjectId& oid) {
    return Key(pool, container, oid, {});
  }
  static std::string_view ObjectOf(std::string_view key) { return key.substr(0, kObjectKeySize); }

  // Runs `critical` now when no operation holds `key`, else after every earlier
  // holder released it. `critical` owns the key until it calls Release(key)
  // (exactly once, possibly later from a VOS callback).
  void Acquire(const std::string& key, std::function<void()> critical);
  void Release(const std::string& key);

  size_t held() const { return waiters_.size(); }

 private:
  // Held keys and the operations waiting for each, in arrival order.
  std::unordered_map<std::string, std::deque<std::function<void()>>> waiters_;
  std::deque<std::function<void()>> runnable_;  // handed the key, run by Drain()
  bool draining_ = false;
  void Drain();
};

inline std::string DkeyGate::Key(const Uuid& pool, const Uuid& container, const ObjectId& oid, std::string_view dkey) {
  std::string k;
  k.reserve(kObjectKeySize + dkey.size());
  k.append(reinterpret_cast<const char*>(pool.bytes().data()), pool.bytes().size());
  k.append(reinterpret_cast<const char*>(container.bytes().data()), container.bytes().size());
  for (uint64_t v : {oid.hi, oid.lo}) {
    for (int i = 0; i < 8; ++i) k.push_back(static_cast<char>(v >> (8 * i)));
  }
  k.append(dkey);
  return k;
}

inline void DkeyGate::Acquire(const std::string& key, std::function<void()> critical) {
  auto [it, inserted] = waiters_.try_emplace(key);
  if (!inserted) {
    it->second.push_back(std::move(critical));
    return;
  }
  runnable_.push_back(std::move(critical));
  Drain();
}

inline void DkeyGate::Release(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  if (it->second.empty()) {
    waiters_.erase(it);
    return;
  }
  runnable_.push_back(std::move(it->second.front()));  // the key passes to the next waiter
  it->second.pop_front();
  Drain();
}

// Runs handed-over operations iteratively: an operation that completes at once
// (a punch) releases from inside its own run, which must not recurse.
inline void DkeyGate::Drain() {
  if (draining_) return;
  draining_ = true;
  while (!runnable_.empty()) {
    auto fn = std::move(runnable_.front());
    runnable_.pop_front();
    fn();
  }
  draining_ = false;
}

}  // namespace ros2::engine

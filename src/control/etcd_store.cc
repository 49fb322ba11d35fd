#include "control/etcd_store.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace ros2::control {

EtcdStore::EtcdStore(std::shared_ptr<EtcdClient> client, std::string ns)
    : client_(std::move(client)), ns_(std::move(ns)) {}

Result<std::string> EtcdStore::Get(std::string_view key) const {
  etcdserverpb::RangeRequest req;
  req.set_key(EtcdKey(key));
  ROS2_ASSIGN_OR_RETURN(auto resp, client_->Range(req));
  if (resp.kvs_size() == 0) return Status::NotFound(fmt::format("state store: no key '{}'", key));
  return resp.kvs(0).value();
}

void EtcdStore::BuildTxn(const StoreBatch& batch, etcdserverpb::TxnRequest* txn) const {
  for (const auto& c : batch.compares) {
    etcdserverpb::Compare* cmp = txn->add_compare();
    cmp->set_key(EtcdKey(c.key));
    cmp->set_result(etcdserverpb::Compare::EQUAL);
    if (c.value) {
      cmp->set_target(etcdserverpb::Compare::VALUE);
      cmp->set_value(*c.value);
    } else {
      cmp->set_target(etcdserverpb::Compare::CREATE);
      cmp->set_create_revision(0);
    }
  }
  // etcd refuses a Txn naming one key twice: a key both deleted and put is
  // only put (the batch's deletes come first, so the put wins either way).
  std::set<std::string_view> put_keys;
  for (const auto& [key, value] : batch.puts) put_keys.insert(key);
  for (const auto& key : batch.deletes) {
    if (put_keys.count(key) != 0) continue;
    txn->add_success()->mutable_request_delete_range()->set_key(EtcdKey(key));
  }
  for (const auto& [key, value] : batch.puts) {
    auto* put = txn->add_success()->mutable_request_put();
    put->set_key(EtcdKey(key));
    put->set_value(value);
  }
}

void EtcdStore::SetLeaderGuard(std::string key, std::optional<std::string> value) {
  std::lock_guard lock(guard_mu_);
  guard_key_ = std::move(key);
  guard_value_ = std::move(value);
}

Status EtcdStore::Write(const StoreBatch& batch) {
  std::optional<StoreCompare> guard;
  {
    std::lock_guard lock(guard_mu_);
    auto is_pool = [](std::string_view key) { return key.starts_with("pool/"); };
    bool touches_pool = std::any_of(batch.deletes.begin(), batch.deletes.end(), is_pool);
    for (const auto& [key, value] : batch.puts) touches_pool |= is_pool(key);
    if (guard_value_ && touches_pool) guard = StoreCompare{guard_key_, guard_value_};
  }
  etcdserverpb::TxnRequest txn;
  if (guard) {
    StoreBatch guarded = batch;
    guarded.Require(guard->key, guard->value);
    BuildTxn(guarded, &txn);
  } else {
    BuildTxn(batch, &txn);
  }
  ROS2_ASSIGN_OR_RETURN(auto resp, client_->Txn(txn));
  if (!resp.succeeded() && guard) {
    auto holder = Get(guard->key);
    if (!holder.ok() || *holder != *guard->value) {
      return Status::Disconnected(
          fmt::format("state store: {}: this engine is no longer the leader; try again", client_->name()));
    }
  }
  if (!resp.succeeded()) {
    return Status::Busy(fmt::format("state store: {}: '{}' changed concurrently", client_->name(),
                                    batch.compares.empty() ? std::string() : batch.compares.front().key));
  }
  return Status::Ok();
}

Result<std::vector<std::pair<std::string, std::string>>> EtcdStore::Scan(std::string_view prefix) const {
  etcdserverpb::RangeRequest req;
  req.set_key(EtcdKey(prefix));
  req.set_range_end(PrefixEnd(EtcdKey(prefix)));
  req.set_sort_order(etcdserverpb::RangeRequest::ASCEND);
  req.set_sort_target(etcdserverpb::RangeRequest::KEY);
  ROS2_ASSIGN_OR_RETURN(auto resp, client_->Range(req));
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(resp.kvs_size());
  for (const auto& kv : resp.kvs()) out.emplace_back(kv.key().substr(ns_.size()), kv.value());
  return out;
}

}  // namespace ros2::control

#include "control/system_map_watch.h"

#include <fmt/format.h>

#include "common/log.h"

namespace ros2::control {
namespace {
constexpr std::string_view kSysmapKey = "sysmap";  // system_map.cc's record
}  // namespace

Result<std::unique_ptr<SystemMapWatch>> SystemMapWatch::Start(EtcdStore* store, SystemMap* map) {
  const std::string key = store->EtcdKey(kSysmapKey);
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  ROS2_ASSIGN_OR_RETURN(auto resp, store->client().Range(req));
  if (resp.kvs_size() > 0) {
    rpc::PoolMap read;
    if (read.ParseFromString(resp.kvs(0).value())) map->Observe(read);
  }
  std::unique_ptr<SystemMapWatch> w(new SystemMapWatch());
  w->watch_ = std::make_unique<EtcdWatch>(
      &store->client(), key, resp.header().revision() + 1, [map, key](const mvccpb::Event& ev, int64_t revision) {
        if (ev.type() != mvccpb::Event::PUT) return;
        rpc::PoolMap read;
        if (!read.ParseFromString(ev.kv().value())) {
          ROS2_LOG_WARN("control: the system map at etcd revision {} does not parse; ignored", revision);
          return;
        }
        if (ev.kv().key() != key) return;  // another key under the same prefix
        map->Observe(read);
      });
  return w;
}

SystemMapWatch::~SystemMapWatch() {
  if (watch_) watch_->Stop();
}

}  // namespace ros2::control

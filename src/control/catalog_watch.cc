#include "control/catalog_watch.h"

#include <string>
#include <string_view>

#include "common/log.h"
#include "common/uuid.h"

namespace ros2::control {
namespace {
constexpr std::string_view kPoolPrefix = "pool/";  // catalog.cc's records
constexpr std::string_view kContPrefix = "cont/";
}  // namespace

Result<std::unique_ptr<CatalogWatch>> CatalogWatch::Start(EtcdStore* store, Catalog* catalog) {
  const std::string pools = store->EtcdKey(kPoolPrefix);
  const std::string containers = store->EtcdKey(kContPrefix);
  etcdserverpb::RangeRequest req;  // only for the store's current revision
  req.set_key(pools);
  req.set_limit(1);
  req.set_keys_only(true);
  ROS2_ASSIGN_OR_RETURN(auto resp, store->client().Range(req));
  const int64_t from = resp.header().revision() + 1;
  std::unique_ptr<CatalogWatch> w(new CatalogWatch());
  w->pools_ = std::make_unique<EtcdWatch>(
      &store->client(), pools, from, [catalog, pools](const mvccpb::Event& ev, int64_t /*revision*/) {
        if (ev.type() != mvccpb::Event::DELETE) return;
        auto pool = Uuid::Parse(std::string_view(ev.kv().key()).substr(pools.size()));
        if (!pool.ok()) return;  // not a pool record
        ROS2_LOG_INFO("control: pool {} was destroyed through another engine; dropping it", pool->ToString());
        catalog->ObserveDestroyed(*pool, Uuid());
      });
  w->containers_ = std::make_unique<EtcdWatch>(
      &store->client(), containers, from, [catalog, containers](const mvccpb::Event& ev, int64_t /*revision*/) {
        if (ev.type() != mvccpb::Event::DELETE) return;
        std::string_view rest = std::string_view(ev.kv().key()).substr(containers.size());
        auto slash = rest.find('/');
        if (slash == std::string_view::npos) return;
        auto pool = Uuid::Parse(rest.substr(0, slash));
        auto container = Uuid::Parse(rest.substr(slash + 1));
        if (!pool.ok() || !container.ok()) return;
        catalog->ObserveDestroyed(*pool, *container);
      });
  return w;
}

CatalogWatch::~CatalogWatch() {
  if (pools_) pools_->Stop();
  if (containers_) containers_->Stop();
}

}  // namespace ros2::control

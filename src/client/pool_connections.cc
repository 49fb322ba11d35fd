// Pool::Connections: what the calling thread's endpoints to a pool's targets run over.
#include "client/client_internal.h"
#include "client/handle_backends.h"

namespace ros2::client {

Result<std::vector<TargetConnection>> Pool::Connections() const {
  return impl_->Connections();
}

Result<std::vector<TargetConnection>> DirectPool::Connections() const {
  ROS2_ASSIGN_OR_RETURN(auto snap, core_->Map());
  ROS2_ASSIGN_OR_RETURN(auto io, core_->client().ThisThreadIo());
  std::vector<TargetConnection> out;
  out.reserve(snap->map.targets.size());
  for (size_t i = 0; i < snap->map.targets.size(); ++i) {
    TargetConnection c;
    c.target = static_cast<uint32_t>(i);
    const uint32_t rank = snap->map.targets[i].engine_rank;
    if (rank < snap->engine_uuids.size()) {
      c.engine_uuid = snap->engine_uuids[rank];
      c.engine_address = snap->engine_addresses[rank];
    }
    if (const transport::EndpointInfo* info = io->ConnectedInfo(snap->addresses[i])) {
      c.connected = true;
      c.transport = info->am_transport;
      c.lanes = info->lanes;
      c.same_host = info->same_host;
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace ros2::client

// OffloadMount: a DFS mount that ros2-agent holds for this process (offload
// mode, docs/agent.md). Filesystem's methods hand their arguments to the
// agent session with this mount's index; the agent runs the DFS client.
#pragma once

#include <cstdint>
#include <memory>

#include "agent/host_session.h"
#include "ros2/dfs.h"

namespace ros2::dfs {

struct OffloadMount {
  std::shared_ptr<agent::HostSession> session;
  uint32_t index = 0;
  Entry root;
  uint64_t chunk_size = 0;

  OffloadMount() = default;
  OffloadMount(const OffloadMount&) = delete;
  OffloadMount& operator=(const OffloadMount&) = delete;
  ~OffloadMount() {
    if (session) (void)session->Unmount(index);  // best effort: the agent drops it with the session anyway
  }
};

}  // namespace ros2::dfs

// Replicated updates and punches: how the client writes an object of an RP
// class (docs/replication.md).
//
// An update of a replicated object goes to every copy of its dkey's group
// that is not DOWN (placement.h WriteTargets, fallbacks included), all at
// once, each copy's engine pulling the data from the client's buffer as for
// any update. It completes OK only when every copy answered OK, each having
// made it durable; a copy's failure fails the attempt, and the failure policy
// (failure_policy.h) decides: a dead engine makes the client recover its map
// and send the whole update again to the copies of the new map. Every attempt
// carries the same epoch, stamped once by the client (ReplicaEpoch): that
// epoch is the update's transaction id, so a copy that already stored it
// stores the same value at the same epoch again, and the copies order
// concurrent updates identically. A conditional update (create-if-absent) is
// not resent after it reached a copy: its answer could differ between the
// copies that had it and those that did not (left for the leader protocol).
//
// Thread safety: an update runs on the thread that submitted it (its
// ThreadIo), as IoOp does.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "client/client_internal.h"
#include "common/hlc.h"

namespace ros2::client {

// A new epoch for a replicated update or punch: from one hybrid logical clock
// per process, strictly increasing.
Epoch ReplicaEpoch();

// Fetches of replicated objects whose data failed its checksum on one copy
// and were served from another, since the process started (the client's
// read-repair counter; each is also logged as a warning).
uint64_t ReplicaChecksumFailovers();
void CountReplicaChecksumFailover();

// An update of a replicated object through `io`'s thread, completing through
// `eq` (or `callback`). The arguments were validated by the caller; `data`
// must stay valid until the completion. Returns an error only when nothing
// was queued.
Status SubmitReplicatedUpdate(const std::shared_ptr<ContainerCore>& cont, const ObjectId& oid, ThreadIo& io,
                              EventQueue::Impl* eq, const UpdateArgs& args, uint8_t flags, uint64_t user_data,
                              IoCallback callback);

}  // namespace ros2::client

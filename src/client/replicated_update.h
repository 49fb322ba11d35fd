// Replicated updates and punches: how the client writes an object of an RP
// class (docs/replication.md, "Update protocol").
//
// An update of a replicated object, or a punch of one of its dkeys or akeys,
// goes to the leader of its dkey's group: the first copy of placement.h
// WriteTargets (live replicas first, then fallbacks). The request names the
// other copies (their targets and worker addresses, LeaderPeers); the leader
// decides it (a condition is checked there only), stores it and forwards it to
// every other copy, and answers OK only when every copy has it durable. Any
// failure fails the attempt, and the failure policy (failure_policy.h)
// decides: a copy that died makes the leader answer Disconnected, and the
// client recovers its map and sends the whole operation again to the leader
// of the new map. Every attempt carries the same epoch, stamped once by the
// client (ReplicaEpoch): that epoch is the transaction id, so a copy that
// already stored it stores the same value at the same epoch again, and the
// copies order concurrent updates identically. Conditional operations are
// resent too: the copies remember the transaction ids they decided, so a
// resend gets the first attempt's answer whichever copy leads it.
//
// An object punch still goes to every shard itself, with one client epoch.
//
// Thread safety: an update runs on the thread that submitted it (its
// ThreadIo), as IoOp does.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "client/client_internal.h"
#include "common/hlc.h"
#include "object/replica_rpc.h"

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

// The copies after the leader (routes[0]), as a leader request names them.
std::vector<obj::ReplicaPeer> LeaderPeers(const std::vector<Route>& routes);

// One attempt of a punch of a dkey or an akey of a replicated object through
// its group's leader, blocking, at `epoch` with the condition `flags`
// (obj::kPunchFlags). `phase` says how far it got.
Status ReplicatedPunchOnce(ContainerCore& cont, const ObjectId& oid, PunchScope scope, std::string_view dkey,
                           std::string_view akey, uint8_t flags, Epoch epoch, CallPhase& phase);

}  // namespace ros2::client

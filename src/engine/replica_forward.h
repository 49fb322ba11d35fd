// Replicated objects on the engine (docs/replication.md, "Update protocol"):
// the state a target keeps to lead updates and punches of a replica group
// and to store the forwards of other leaders.
//
// The forward key. Engines prove to each other that they are engines with the
// key of a reserved session, kForwardSession: its key is derived from the
// capability key like any session's (CapabilityVerifier::SessionKeyFor), which
// every engine of the cluster holds and no client does; the control plane
// only issues random (version 4) session ids, and kForwardSession is not one,
// so no client is ever given its key. A leader authenticates its connection
// to a copy for that session (the transport's challenge proof), and signs
// every forward with an HMAC-SHA256 under the same key over the decided
// request and the client's capability (obj::ForwardMacInput): a copy refuses
// a forward on a connection that did not prove the session, or whose MAC does
// not verify (docs/security.md, "Replica forwards").
//
// Target thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/uuid.h"
#include "control/capability.h"
#include "control/crypto.h"
#include "engine/buffer_pool.h"
#include "object/obj_rpc.h"
#include "object/replica_rpc.h"
#include "transport/transport.h"
#include "vos/vos.h"

namespace ros2::engine {

// "ros2-replica-fwd": byte 6 ('e') is not a version-4 uuid's.
inline constexpr std::array<uint8_t, 16> kForwardSession = {'r', 'o', 's', '2', '-', 'r', 'e', 'p',
                                                            'l', 'i', 'c', 'a', '-', 'f', 'w', 'd'};

class Target;
struct LeaderOp;

// A forwarded update or punch this copy stored, kept while its leader has
// not said that every copy answered it: until the leader's watermark passes
// its position (`seq`), at most 3 x the forward timeout (the leader settles
// an operation within one forward timeout; a dead leader is marked DOWN
// within two lease TTLs, the forward timeout being one). Reads of its dkey
// wait meanwhile ("unsettled"). When the map marks the leader DOWN, the copy
// forwards it to the group's other live copies itself ("resolves" it) and
// holds reads of its dkey until they answered (docs/replication.md,
// "In-doubt updates" and "Read rule").
struct InDoubtOp {
  std::chrono::steady_clock::time_point stored;
  obj::Opcode op = obj::Opcode::kUpdate;
  obj::UpdateRequest update;  // kUpdate: as forwarded (the data is in this copy's store)
  obj::PunchRequest punch;    // kPunch
  bool decided = false;       // forwarded with kForwardDecided
  std::shared_ptr<const std::vector<obj::ReplicaPeer>> group;  // the leader first
  std::shared_ptr<const std::vector<uint8_t>> capability;      // the client's
  uint64_t seq = 0;                                            // the leader's position of it
  std::string gate;                                            // DkeyGate::Key of its dkey
  bool counted = false;                                        // counted in ReplicaState::unsettled
  bool resolving = false;
  bool done = false;  // resolved: every live copy answered OK
};

// Per target: see the file comment.
struct ReplicaState {
  // HMAC-SHA256 under kForwardSession's key (made once the verifier exists).
  std::optional<control::HmacSha256> mac;
  transport::SessionCredential credential;
  // Endpoints to other targets, by worker address. A client names the
  // addresses (from its pool map), so the table is bounded: past
  // kMaxPeers the idle ones are dropped.
  std::map<std::string, std::shared_ptr<transport::Endpoint>> peers;
  static constexpr size_t kMaxPeers = 256;
  // The worker addresses of targets the pool map marks DOWN or DOWNOUT
  // (Target::SetMapPeers): no forward goes there.
  std::set<std::string> down;
  // Every target of the map as (index inside its engine, worker address):
  // a leader request naming a copy outside it is refused. Empty until the
  // engine reads a map (only clustered engines do; docs/replication.md).
  std::set<std::pair<uint32_t, std::string>> members;
  // In-doubt operations (InDoubtOp), oldest first; at most kMaxInDoubt (the
  // oldest go first, logged).
  std::deque<std::shared_ptr<InDoubtOp>> in_doubt;
  static constexpr size_t kMaxInDoubt = 8192;
  // Successive forwards mostly share the group and the capability: kept once.
  std::shared_ptr<const std::vector<obj::ReplicaPeer>> last_group;
  std::shared_ptr<const std::vector<uint8_t>> last_capability;
  // Operations this target leads that failed on a copy the map still has
  // after others (or this target) stored them, or may have: answered, and
  // kept open (their position and their dkey's reads) while they are taken
  // back (aborted) on every copy (replica_abort.cc), oldest first; at most
  // kMaxAborts (the oldest give up first, logged).
  std::deque<std::shared_ptr<LeaderOp>> aborts;
  static constexpr size_t kMaxAborts = 1024;
  std::chrono::steady_clock::time_point next_abort;
  // Leader: the operations it leads, from their decision to the release of
  // their position, by epoch (their transaction id): a later attempt of
  // the same transaction waits for the one open (LeaderOp::waiting), so an
  // abort never takes back a resend; the lowest epoch of a shard bounds its
  // aggregation (Target::AggregationBound).
  std::multimap<Epoch, LeaderOp*> leading;
  // Copy: forwarded updates between their arrival and their store's answer,
  // by transaction (TransactionKey), and the aborts of those transactions
  // that arrived meanwhile, run once the store answered (an abort applies
  // after the forward it takes back).
  std::map<std::string, int, std::less<>> storing;
  std::multimap<std::string, std::function<void()>> after_store;
  // Dkeys (DkeyGate::Key) with an in-doubt operation being resolved, and the
  // reads held until it is.
  std::map<std::string, int, std::less<>> resolving;
  // The committed watermark (docs/replication.md, "Read rule").
  // Leader: positions are numbered from next_seq (set at first use to the
  // wall clock in ns, so above any earlier incarnation's); `open` holds those
  // not yet answered by every copy and the leader's own store. Every
  // position below Watermark() (the lowest open one, else next_seq) is.
  uint64_t next_seq = 0;
  std::set<uint64_t> open;
  // The copies forwarded to, by worker address: their target index, the
  // watermark they last received and when. When it falls behind, a
  // watermark alone goes to a copy that received nothing for
  // kWatermarkDelay, checked at `watermark_at` (kWatermarkDelay after an
  // operation settled); under load the next forward carries it.
  struct Told {
    uint32_t target = 0;
    uint64_t watermark = 0;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, Told> told;
  bool watermark_due = false;
  std::chrono::steady_clock::time_point watermark_at;
  static constexpr std::chrono::microseconds kWatermarkDelay{1000};
  // Copy: the highest watermark each leader (its worker address) sent.
  std::map<std::string, uint64_t> watermarks;
  // Both: the dkeys (DkeyGate::Key) with an update or punch not yet known to
  // be on every copy (led here and not settled, or forwarded here and above
  // its leader's watermark), and how many; their reads are held. Ordered:
  // the keys of one object's dkeys are contiguous (listings of the object
  // are held while any is here, Target::ObjectOpen).
  std::map<std::string, int, std::less<>> unsettled;
  std::chrono::steady_clock::time_point next_prune;
  std::vector<std::tuple<std::string, transport::IncomingRequest, void (Target::*)(transport::IncomingRequest)>> held;
};

// One update or punch this target leads, from its admission to its reply.
struct LeaderOp {
  uint64_t ticket = 0;
  obj::Opcode op = obj::Opcode::kUpdate;
  obj::UpdateRequest update;  // kUpdate: the client's request (its flags checked here)
  obj::PunchRequest punch;    // kPunch
  std::vector<obj::ReplicaPeer> peers;
  std::vector<uint8_t> capability;  // the client's, carried to every copy
  PooledBuffer buffer;              // kUpdate: the data, pulled from the client once
  vos::UpdateOp store;              // kUpdate: the local copy, stored beside the forwards
  uint8_t condition = 0;            // the client's condition flags
  std::string gate_key;             // held while a conditional one runs (DkeyGate)
  size_t remaining = 0;             // copies not yet answered, the leader's own store included
  Status failure;                   // the first copy's failure
  Epoch epoch = 0;                  // the transaction id
  // Every copy, the leader first (ForwardRequest::group): made by Replicate
  // from this target and `peers` unless set.
  std::vector<obj::ReplicaPeer> group;
  uint64_t seq = 0;       // its position (ReplicaState::open); 0 for a resolution
  std::string read_gate;  // DkeyGate::Key of its dkey, counted in ReplicaState::unsettled while open
  // The resolution of an in-doubt operation (InDoubtOp): forwarded with
  // kForwardDecided when `decided`; `resolved` runs once every copy answered
  // (nothing is stored here, and nothing is answered to a client).
  bool decided = false;
  std::function<void(const Status&)> resolved;
  // A failed operation's abort (docs/replication.md, "Failed updates"): the
  // copies whose store failed (`lacking`, `own_lacking` for the leader's
  // own) and those that refused it (stored nothing), whether any copy stored
  // it or may have (a forward that timed out or lost its connection). Once
  // it is answered and kept open (ReplicaState::aborts), `lacking` holds
  // the copies (`own_lacking` the leader) whose discard has not answered OK,
  // and `retry_at` when the abort goes to them again.
  std::vector<obj::ReplicaPeer> lacking;
  std::vector<obj::ReplicaPeer> refused;
  bool own_lacking = false;
  bool maybe_stored = false;
  bool aborting = false;      // answered; in ReplicaState::aborts
  bool abort_queued = false;  // its first abort waits in the target's deferred work (SettleFailed)
  bool closed = false;        // its position released: nothing more to do
  bool leading = false;       // in ReplicaState::leading
  std::chrono::steady_clock::time_point retry_at;
  std::chrono::milliseconds pause{0};
  // Later attempts of its transaction, decided once its position is released.
  std::vector<std::shared_ptr<LeaderOp>> waiting;
};

// Whether two attempts are of one transaction: same kind, key and epoch.
bool SameTransaction(const LeaderOp& a, const LeaderOp& b);

// The engine-local key of one transaction's forwarded store: its dkey's
// DkeyGate::Key and its epoch (ReplicaState::storing).
std::string TransactionKey(const obj::RequestHeader& h, const ObjectId& oid, const std::string& dkey);
// The same from the dkey's DkeyGate::Key, already made.
std::string TransactionKey(std::string gate_key, Epoch epoch);

// The worker addresses of the map's targets (empty: the engine reads no map).
std::set<std::string> MapAddresses(const ReplicaState& rs);
// Whether the map says the copy at `address` is gone: its target is DOWN or
// DOWNOUT, or no target has that worker address any more (its engine
// restarted, and registered new ones). `live`: MapAddresses(rs).
bool MapExcludes(const ReplicaState& rs, const std::set<std::string>& live, const std::string& address);

// The forward key in `rs` (mac, credential), made once the capability
// verifier exists (Busy before). Target thread only.
Status EnsureForwardKey(ReplicaState& rs, control::CapabilityVerifier* verifier, uint32_t target);
// The endpoint to the target at worker `address`, connected and
// authenticated for kForwardSession (kept in rs.peers): the leader's forwards
// and the rebuild's data-plane reads (target_rebuild_plane.cc) share it.
// Disconnected for a target the map marks DOWN. Target thread only.
Result<std::shared_ptr<transport::Endpoint>> PeerEndpoint(ReplicaState& rs, transport::Worker& worker,
                                                          const std::string& address);

}  // namespace ros2::engine

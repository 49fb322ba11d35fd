// RebuildSource: the survivor's side of a rebuild pull (docs/replication.md,
// "Rebuild"). Given the requester's pool map and the requester's targets, it
// walks this engine's shards of the pool (target by target, container by
// container, object by object, dkey by dkey, resuming from a cursor) and
// returns every visible version of each dkey for which
//   - one of the dkey's copies is a fallback on a requester target, and
//   - this engine's target is the dkey's first readable copy (the one source
//     every puller picks, so no dkey is copied twice);
// array extents with their epochs, single values with epoch 0 (the puller
// stores them below every newer write), each with the checksums VOS read.
// With count_only it counts objects and bytes and sends no data (an answer
// ends once it counted max_bytes, so a count can stop between answers). With a
// stride it answers for one part of the dkeys (RebuildPartOf), so several
// pulls can walk the same shards side by side. With data_plane the records
// carry no data: the puller reads it from the source target over the
// transport (Target::ReadForRebuild, target_rebuild_plane.cc).
//
// Reads run on the target threads (Target::WithShard); Scan blocks the
// calling thread (a gRPC thread or the local puller). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <vector>

#include "common/status.h"
#include "common/uuid.h"
#include "control/crypto.h"
#include "engine/target.h"
#include "placement/pool_map_proto.h"
#include "ros2/rebuild.pb.h"

namespace ros2::engine {

struct RebuildScan {
  Uuid pool;
  ConvertedPoolMap map;
  std::set<uint32_t> requester_targets;  // global indexes of the puller's targets
  rpc::RebuildCursor cursor;
  uint64_t max_bytes = 4 << 20;
  bool count_only = false;
  uint32_t stride = 1;  // > 1: only the dkeys whose hash % stride is `part`
  uint32_t part = 0;
  // Array extents go as remote records (no data, no checksums: the puller
  // reads them over the data plane, Target::ReadForRebuild).
  bool data_plane = false;
};

// The global target indexes of `engine`'s targets in `map`, by its target
// index (absent: not in the pool or out).
std::vector<std::pair<uint32_t, uint32_t>> LocalTargets(const ConvertedPoolMap& map, const std::string& engine);

// The client requests `targets` have started so far (a running count; the
// rebuild's own reads and writes are not requests).
uint64_t ClientRequests(const std::vector<Target*>& targets);

// The most one rebuild read (obj::Opcode::kRebuildRead) moves.
inline constexpr uint64_t kMaxRebuildReadBytes = uint64_t{64} << 20;

// The bytes of each extent a rebuild read names, checked: a 16-byte oid, a
// dkey and an akey, a record size and count not 0, at most
// kMaxRebuildReadBytes in all; else InvalidArgument naming the first bad
// extent (target_rebuild_plane.cc; `target` only names the reader).
Result<std::vector<uint64_t>> RebuildReadLengths(const rpc::RebuildReadRequest& m, uint32_t target);

// The source's reply to a rebuild read (target_rebuild_plane.cc): the label,
// the request's `nonce` and `body` (each extent's size and checksums) sealed
// with AES-256-GCM under a key derived from the engines' `forward` key, with
// every byte of `data` (what the source pushes) as authenticated data. The
// serialized rpc::RebuildReadReply.
Result<std::string> SealRebuildReadReply(const control::HmacSha256& forward, std::string_view nonce,
                                         const rpc::RebuildReadBody& body, std::span<const std::byte> data);

// The puller's check of the reply `payload` to its read with `nonce`, the
// pushed bytes in `data`: the body only if the reply opens under the read key
// with exactly these bytes and this nonce (so neither the data, the
// checksums, nor a reply to another read passes) and names `extents`
// extents; else Unauthenticated (Protocol for a reply that does not parse or
// lacks extents). Nothing of a refused reply reaches a store.
Result<rpc::RebuildReadBody> OpenRebuildReadReply(const control::HmacSha256& forward, std::string_view nonce,
                                                  std::span<const uint8_t> payload, std::span<const std::byte> data,
                                                  size_t extents, uint32_t target);

class RebuildSource {
 public:
  // `targets`: the engine's targets by index; they outlive the source.
  RebuildSource(Uuid engine, std::vector<Target*> targets) : engine_(engine), targets_(std::move(targets)) {}

  Result<rpc::RebuildPullBodyOut> Scan(const RebuildScan& scan);

 private:
  // One batch on one target's shard: advances `cursor` inside the container
  // and appends to `out`. Sets `*container_done` at its end.
  Status ScanBatch(const RebuildScan& scan, uint32_t engine_index, uint32_t global, const Uuid& container,
                   rpc::RebuildCursor* cursor, rpc::RebuildPullBodyOut* out, bool* container_done);

  Uuid engine_;
  std::vector<Target*> targets_;
};

}  // namespace ros2::engine

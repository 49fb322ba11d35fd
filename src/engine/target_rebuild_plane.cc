// The rebuild's data plane (docs/replication.md, "Rebuild"): a fallback
// target reads the array extents it rebuilds straight from the source target,
// engine to engine over the transport, instead of inside the gRPC pull's
// answers. The pull (ClusterRebuild.Pull, MAC'd under the rebuild key) names
// the extents; the puller's target sends obj::Opcode::kRebuildRead on its
// endpoint to the source target, the one its replica forwards use
// (PeerEndpoint: authenticated for kForwardSession, whose key only engines
// hold); the source reads the extents from VOS into a buffer of its pool and
// pushes them into the puller's buffer (the transport's server-driven bulk,
// as for a client's fetch), and replies with their checksums. The reply is
// sealed (AES-256-GCM under a key derived from the forward key) over the
// request's fresh nonce and the checksums, with every pushed byte as
// authenticated data (GMAC: about as fast as a copy, where an HMAC-SHA256 of
// the bulk would cost more than the rest of the path). So a stranger can
// neither ask for extents (its connection never proved the session) nor
// answer or alter data in the source's place; the puller's VOS verifies the
// data against the checksums before storing it, as for any rebuilt record.
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "common/log.h"
#include "engine/rebuild_source.h"
#include "engine/replica_forward.h"
#include "engine/target.h"

namespace ros2::engine {

using transport::IncomingRequest;

namespace {

constexpr std::string_view kReadLabel = "ros2 rebuild read";
constexpr size_t kNonceSize = 16;
constexpr auto kReadTimeout = std::chrono::seconds(30);

std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The key that seals replies: HMAC(forward key, label), an AES-256 key.
Result<control::Aes256Key> ReadKey(const control::HmacSha256& forward) {
  return forward.Compute(AsBytes("ros2 rebuild read key"));
}

std::string_view AsView(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// One source-side read: the fetches of its extents, then the push and reply.
struct SourceRead {
  IncomingRequest req;
  rpc::RebuildReadRequest m;
  std::vector<uint64_t> lengths;
  PooledBuffer buffer;
  rpc::RebuildReadBody body;
  int pending = 1;
  Status status;
};

}  // namespace

// (a pull's batch is about 4 MiB; one dkey larger than 32 MiB fails the pull
// before it gets here).
Result<std::vector<uint64_t>> RebuildReadLengths(const rpc::RebuildReadRequest& m, uint32_t target) {
  std::vector<uint64_t> out;
  uint64_t total = 0;
  for (const auto& e : m.extents()) {
    if (e.oid().size() != 16 || e.dkey().empty() || e.akey().empty() || e.record_size() == 0 || e.count() == 0 ||
        e.count() > kMaxRebuildReadBytes / e.record_size()) {
      return Status::InvalidArgument(
          fmt::format("engine target {}: rebuild read: extent {} is malformed (oid of {} bytes, {} records of {} "
                      "bytes)",
                      target, out.size(), e.oid().size(), e.count(), e.record_size()));
    }
    out.push_back(e.count() * e.record_size());
    total += out.back();
    if (total > kMaxRebuildReadBytes) {
      return Status::InvalidArgument(
          fmt::format("engine target {}: rebuild read of more than {} bytes", target, kMaxRebuildReadBytes));
    }
  }
  return out;
}

Result<std::string> SealRebuildReadReply(const control::HmacSha256& forward, std::string_view nonce,
                                         const rpc::RebuildReadBody& body, std::span<const std::byte> data) {
  ROS2_ASSIGN_OR_RETURN(control::Aes256Key key, ReadKey(forward));
  std::string plain(kReadLabel);
  plain.append(nonce).append(body.SerializeAsString());
  ROS2_ASSIGN_OR_RETURN(std::string sealed, control::SealAes256Gcm(key, plain, AsView(data)));
  rpc::RebuildReadReply reply;
  reply.set_sealed(std::move(sealed));
  return reply.SerializeAsString();
}

Result<rpc::RebuildReadBody> OpenRebuildReadReply(const control::HmacSha256& forward, std::string_view nonce,
                                                  std::span<const uint8_t> payload, std::span<const std::byte> data,
                                                  size_t extents, uint32_t target) {
  rpc::RebuildReadReply m;
  if (!m.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return Status::Protocol("rebuild read: the source's reply does not parse");
  }
  ROS2_ASSIGN_OR_RETURN(control::Aes256Key key, ReadKey(forward));
  auto plain = control::OpenAes256Gcm(key, m.sealed(), AsView(data));
  const std::string prefix = std::string(kReadLabel).append(nonce);
  if (!plain.ok() || !plain->starts_with(prefix)) {
    return Status::Unauthenticated(
        fmt::format("engine target {}: rebuild read: the reply or its data fails authentication (not from an "
                    "engine of the cluster, altered, or a replay)",
                    target));
  }
  rpc::RebuildReadBody body;
  if (!body.ParseFromArray(plain->data() + prefix.size(), static_cast<int>(plain->size() - prefix.size())) ||
      static_cast<size_t>(body.extents_size()) != extents) {
    return Status::Protocol("rebuild read: the source's reply lacks extents");
  }
  return body;
}

void Target::HandleRebuildRead(IncomingRequest req) {
  if (Status st = RequireEngineSession(req, "rebuild read", "only a rebuilding engine reads extents this way");
      !st.ok()) {
    return req.Reply(st);
  }
  auto r = std::make_shared<SourceRead>();
  const auto payload = req.payload();
  if (!r->m.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return req.Reply(Status::Protocol(fmt::format("engine target {}: rebuild read: the request does not parse", index_)));
  }
  if (r->m.target() != index_ || r->m.nonce().size() != kNonceSize) {
    return req.Reply(Status::InvalidArgument(fmt::format(
        "engine target {}: rebuild read for target {} with a nonce of {} bytes (expected this target and {} bytes)",
        index_, r->m.target(), r->m.nonce().size(), kNonceSize)));
  }
  auto lengths = RebuildReadLengths(r->m, index_);
  if (!lengths.ok()) return req.Reply(lengths.status());
  r->lengths = std::move(*lengths);
  uint64_t total = 0;
  for (uint64_t n : r->lengths) total += n;
  if (total != req.bulk_in_capacity()) {
    return req.Reply(Status::InvalidArgument(fmt::format(
        "engine target {}: rebuild read of {} bytes into a buffer of {}", index_, total, req.bulk_in_capacity())));
  }
  auto pool = Uuid::Parse(r->m.pool_uuid());
  auto container = Uuid::Parse(r->m.container());
  if (!pool.ok() || !container.ok()) {
    return req.Reply(Status::InvalidArgument(fmt::format("engine target {}: rebuild read: bad pool or container", index_)));
  }
  auto shard = ShardFor(*pool, *container, /*open=*/false);
  if (!shard.ok()) return req.Reply(shard.status().WithContext("rebuild read"));
  if (*shard == nullptr) {
    return req.Reply(Status::Busy(fmt::format("engine target {}: rebuild read: the shard is being opened", index_)));
  }
  auto buffer = buffers_.Get(total);
  if (!buffer.ok()) return req.Reply(buffer.status());
  r->buffer = std::move(*buffer);
  r->req = std::move(req);
  auto finish = [this, r] {
    if (--r->pending != 0) return;
    if (!r->status.ok()) return r->req.Reply(r->status);
    // label || nonce || checksums, sealed with the pushed bytes as
    // authenticated data (AES-256-GCM: GMAC over the bulk).
    auto sealed = SealRebuildReadReply(*replica().mac, r->m.nonce(), r->body, r->buffer.span());
    if (!sealed.ok()) return r->req.Reply(sealed.status());
    auto out = std::make_shared<std::string>(std::move(*sealed));
    r->req.Push(r->buffer.span(), [r, out](const Status& pushed) {
      if (!pushed.ok()) return r->req.Reply(pushed.WithContext("rebuild read: pushing the extents"));
      r->req.Reply(Status::Ok(), AsBytes(*out));
    });
  };
  vos::Vos* v = (*shard)->vos.get();
  uint64_t at = 0;
  for (int i = 0; i < r->m.extents_size(); ++i) {
    const rpc::RebuildReadExtent& e = r->m.extents(i);
    r->body.add_extents();
    vos::FetchOp op;
    std::memcpy(&op.oid.hi, e.oid().data(), 8);
    std::memcpy(&op.oid.lo, e.oid().data() + 8, 8);
    op.dkey = e.dkey();
    op.akey = e.akey();
    op.type = e.single() ? ValueType::kSingle : ValueType::kArray;
    op.index = e.single() ? 0 : e.index();
    op.count = e.single() ? 0 : e.count();
    op.record_size = e.single() ? 1 : e.record_size();
    op.buffer = r->buffer.span().subspan(at, r->lengths[static_cast<size_t>(i)]);
    // The puller's VOS verifies the bytes against these checksums before it
    // stores them: no need to verify here as well.
    op.caller_verifies = true;
    at += r->lengths[static_cast<size_t>(i)];
    ++r->pending;
    v->SubmitFetch(op, [this, r, i, finish](Result<vos::FetchResult> got) {
      const uint64_t room = r->lengths[static_cast<size_t>(i)];
      if (!got.ok()) {
        if (r->status.ok()) r->status = got.status().WithContext("rebuild read");
      } else if (got->size > room) {
        if (r->status.ok()) {
          r->status = Status::Busy(fmt::format(
              "engine target {}: rebuild read: a value grew from {} to {} bytes since the scan; the pull is retried",
              index_, room, got->size));
        }
      } else {
        rpc::RebuildReadChecksums* c = r->body.mutable_extents(i);
        c->set_size(got->size);
        c->set_csum_type(static_cast<uint32_t>(got->csum.type));
        c->set_csum_chunk(got->csum.chunk_size);
        for (uint64_t x : got->csum.values) c->add_csums(x);
      }
      finish();
    });
  }
  finish();
}

void Target::ReadForRebuild(RebuildRead read) {
  Post([this, read = std::move(read)]() mutable {
    if (stopping_) return read.done(Status::Cancelled(fmt::format("engine target {}: stopping", index_)));
    ReplicaState& rs = replica();
    if (Status st = EnsureForwardKey(rs, env_->verifier.load(std::memory_order_acquire), index_); !st.ok()) {
      return read.done(st);
    }
    std::string nonce(kNonceSize, '\0');
    if (Status st = control::RandomBytes(std::span(reinterpret_cast<uint8_t*>(nonce.data()), nonce.size()));
        !st.ok()) {
      return read.done(st);
    }
    read.request.set_nonce(nonce);
    auto lengths = RebuildReadLengths(read.request, read.request.target());
    if (!lengths.ok()) return read.done(lengths.status());
    uint64_t total = 0;
    for (uint64_t n : *lengths) total += n;
    if (total != read.dst.size()) {
      return read.done(Status::InvalidArgument(
          fmt::format("rebuild read of {} bytes into a buffer of {}", total, read.dst.size())));
    }
    auto ep = PeerEndpoint(rs, *worker_, read.address);
    if (!ep.ok()) return read.done(ep.status().WithContext("rebuild read: connecting to the source target"));
    const std::string payload = read.request.SerializeAsString();
    transport::CallOptions o;
    o.timeout = kReadTimeout;
    o.bulk_in = read.dst;
    auto done = read.done;
    const std::span<const std::byte> dst = read.dst;
    Status sent = (*ep)->Call(
        static_cast<uint16_t>(obj::Opcode::kRebuildRead), AsBytes(payload), o,
        [this, done, nonce, dst, lengths = std::move(*lengths)](const transport::ReplyView& reply) {
          if (!reply.status.ok()) return done(reply.status.WithContext("rebuild read"));
          if (reply.bulk_in_bytes != dst.size()) {
            return done(Status::Protocol(fmt::format("rebuild read: the source pushed {} bytes of {}",
                                                     reply.bulk_in_bytes, dst.size())));
          }
          done(OpenRebuildReadReply(*replica().mac, nonce, reply.payload, dst, lengths.size(), index_));
        });
    if (!sent.ok()) done(sent.WithContext("rebuild read"));
  });
}

}  // namespace ros2::engine

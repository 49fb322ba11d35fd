// Unit tests of the wire codec: round trips, every validation rule, truncation.
#include "transport/wire.h"

#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace ros2::transport::wire {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::vector<uint8_t> EncodeOrDie(const Message& m) {
  std::vector<uint8_t> out(EncodedSize(m));
  auto n = Encode(m, out);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n.ok() ? *n : 0, out.size());
  return out;
}

struct Fixture {
  std::string cap = "capability-bytes";
  std::string payload = "payload";
  std::string inline_bytes = "inline-data";
  std::vector<uint8_t> rkey = std::vector<uint8_t>(33, 0x5a);

  Message Request() const {
    Message m;
    m.kind = Kind::kRequest;
    m.opcode = 42;
    m.request_id = 0x1122334455667788ull;
    m.connection_id = 0x99;
    m.capability = Bytes(cap);
    m.payload = Bytes(payload);
    m.bulk_count = 2;
    m.bulk[0] = BulkDescriptor{BulkDirection::kOut, BulkTransfer::kInline, inline_bytes.size(), 0, {}};
    m.inline_data = Bytes(inline_bytes);
    m.bulk[1] = BulkDescriptor{BulkDirection::kIn, BulkTransfer::kRma, 1 << 20, 0x7f0000001000ull, rkey};
    return m;
  }
  Message Reply() const {
    Message m;
    m.kind = Kind::kReply;
    m.request_id = 7;
    m.connection_id = 8;
    m.status_code = static_cast<uint8_t>(Status::Code::kNotFound);
    m.status_message = "no such key";
    m.payload = Bytes(payload);
    return m;
  }
};

TEST(WireTest, RequestRoundTrip) {
  Fixture f;
  std::vector<uint8_t> bytes = EncodeOrDie(f.Request());
  auto m = Decode(bytes);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->kind, Kind::kRequest);
  EXPECT_EQ(m->opcode, 42);
  EXPECT_EQ(m->request_id, 0x1122334455667788ull);
  EXPECT_EQ(m->connection_id, 0x99u);
  EXPECT_EQ(std::string(m->capability.begin(), m->capability.end()), f.cap);
  EXPECT_EQ(std::string(m->payload.begin(), m->payload.end()), f.payload);
  EXPECT_EQ(std::string(m->inline_data.begin(), m->inline_data.end()), f.inline_bytes);
  ASSERT_EQ(m->bulk_count, 2);
  const BulkDescriptor* in = m->FindBulk(BulkDirection::kIn);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->transfer, BulkTransfer::kRma);
  EXPECT_EQ(in->length, 1u << 20);
  EXPECT_EQ(in->remote_addr, 0x7f0000001000ull);
  EXPECT_EQ(std::vector<uint8_t>(in->rkey.begin(), in->rkey.end()), f.rkey);
  // Header fields sit where docs/wire-format.md says.
  EXPECT_EQ(bytes[0], 0x52);  // 'R'
  EXPECT_EQ(bytes[1], 0x32);  // '2'
  EXPECT_EQ(bytes[2], kVersion);
  EXPECT_EQ(bytes[3], static_cast<uint8_t>(Kind::kRequest));
}

TEST(WireTest, ReplyRoundTrip) {
  Fixture f;
  const std::vector<uint8_t> bytes = EncodeOrDie(f.Reply());  // the decoded views point into it
  auto m = Decode(bytes);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->status_code, static_cast<uint8_t>(Status::Code::kNotFound));
  EXPECT_EQ(m->status_message, "no such key");
}

// Builds a batch message of `entries` for connection `conn` (header + entries).
std::vector<uint8_t> BatchOf(const std::vector<Message>& entries, uint64_t conn) {
  std::vector<uint8_t> out(kHeaderSize);
  for (const Message& m : entries) {
    const size_t at = out.size();
    out.resize(at + BatchEntrySize(m));
    auto n = EncodeBatchEntry(m, std::span<uint8_t>(out).subspan(at));
    EXPECT_TRUE(n.ok()) << n.status().ToString();
  }
  EXPECT_TRUE(EncodeBatchHeader(conn, out.size() - kHeaderSize, out).ok());
  return out;
}

TEST(WireTest, BatchRoundTrip) {
  Fixture f;
  std::vector<Message> entries;
  for (uint64_t id = 1; id <= 5; ++id) {
    Message m = f.Request();
    m.request_id = id;
    entries.push_back(m);
  }
  const std::vector<uint8_t> bytes = BatchOf(entries, 0x99);
  auto batch = Decode(bytes);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->kind, Kind::kBatch);
  EXPECT_EQ(batch->connection_id, 0x99u);
  std::vector<Message> out(kMaxBatchMessages);
  std::vector<std::span<const uint8_t>> raw(kMaxBatchMessages);
  auto n = DecodeBatch(*batch, out, raw);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, 5u);
  for (size_t i = 0; i < *n; ++i) {
    EXPECT_EQ(out[i].request_id, i + 1);
    EXPECT_EQ(std::string(out[i].inline_data.begin(), out[i].inline_data.end()), f.inline_bytes);
    EXPECT_EQ(raw[i].size(), EncodedSize(out[i]));
  }
  // Replies batch the same way.
  auto replies = Decode(BatchOf({f.Reply(), f.Reply()}, 8));
  ASSERT_TRUE(replies.ok());
}

TEST(WireTest, BatchRulesAreEnforced) {
  Fixture f;
  std::vector<Message> out(kMaxBatchMessages);
  std::vector<std::span<const uint8_t>> raw(kMaxBatchMessages);
  auto check = [&](const std::vector<uint8_t>& bytes, const std::string& what) {
    auto batch = Decode(bytes);
    if (!batch.ok()) return batch.status().message();
    auto n = DecodeBatch(*batch, out, raw);
    EXPECT_FALSE(n.ok()) << "accepted a batch with " << what;
    return n.ok() ? std::string() : n.status().message();
  };
  Message other_conn = f.Request();
  other_conn.connection_id = 0x98;
  EXPECT_NE(check(BatchOf({f.Request(), other_conn}, 0x99), "two connections").find("entry 1: connection id"),
            std::string::npos);
  Message reply = f.Reply();
  reply.connection_id = 0x99;
  EXPECT_NE(check(BatchOf({f.Request(), reply}, 0x99), "mixed kinds").find("mixes"), std::string::npos);
  Message am = f.Request();
  am.bulk[0] = BulkDescriptor{BulkDirection::kOut, BulkTransfer::kActiveMessage, 4096, 0, {}};
  am.inline_data = {};
  std::vector<uint8_t> am_bytes(BatchEntrySize(am));
  EXPECT_FALSE(EncodeBatchEntry(am, am_bytes).ok()) << "encoded an am-bulk entry";
  // A corrupted entry, a length prefix past the end, and trailing bytes.
  std::vector<uint8_t> bad = BatchOf({f.Request(), f.Request()}, 0x99);
  bad[kHeaderSize + kBatchEntryPrefix + 3] = 99;  // the first entry's kind
  EXPECT_NE(check(bad, "a bad entry").find("entry 0"), std::string::npos);
  std::vector<uint8_t> long_prefix = BatchOf({f.Request()}, 0x99);
  long_prefix[kHeaderSize] += 1;
  EXPECT_NE(check(long_prefix, "a long prefix").find("remain"), std::string::npos);
  // A nested batch is not an entry.
  std::vector<uint8_t> inner = BatchOf({f.Request()}, 0x99);
  std::vector<uint8_t> nested(kHeaderSize + kBatchEntryPrefix + inner.size());
  const uint32_t len = static_cast<uint32_t>(inner.size());
  std::memcpy(nested.data() + kHeaderSize, &len, 4);
  std::memcpy(nested.data() + kHeaderSize + kBatchEntryPrefix, inner.data(), inner.size());
  ASSERT_TRUE(EncodeBatchHeader(0x99, nested.size() - kHeaderSize, nested).ok());
  EXPECT_NE(check(nested, "a nested batch").find("not a request or reply"), std::string::npos);
  // More entries than the receiver takes.
  std::vector<Message> many(kMaxBatchMessages + 1, f.Request());
  EXPECT_NE(check(BatchOf(many, 0x99), "too many entries").find("more than"), std::string::npos);
  // The batch header itself: no empty batch, no connection id 0, nothing but a payload.
  std::vector<uint8_t> header(kHeaderSize);
  EXPECT_FALSE(EncodeBatchHeader(0x99, 0, header).ok());
  EXPECT_FALSE(EncodeBatchHeader(0, 100, header).ok());
  std::vector<uint8_t> with_id = BatchOf({f.Request()}, 0x99);
  with_id[8] = 1;  // request_id
  EXPECT_FALSE(Decode(with_id).ok());
  // Every truncation of a batch fails in Decode (the declared payload is longer).
  const std::vector<uint8_t> whole = BatchOf({f.Request(), f.Request()}, 0x99);
  for (size_t cut = 0; cut < whole.size(); ++cut)
    EXPECT_FALSE(Decode(std::span<const uint8_t>(whole.data(), cut)).ok()) << "cut at " << cut;
}

TEST(WireTest, EveryTruncationIsRejected) {
  Fixture f;
  for (const Message& m : {f.Request(), f.Reply()}) {
    std::vector<uint8_t> bytes = EncodeOrDie(m);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      auto r = Decode(std::span<const uint8_t>(bytes.data(), cut));
      ASSERT_FALSE(r.ok()) << "accepted a message cut at " << cut;
      EXPECT_EQ(r.status().code(), Status::Code::kProtocol);
    }
    bytes.push_back(0);
    EXPECT_FALSE(Decode(bytes).ok()) << "accepted a trailing byte";
  }
}

// Flips one header field of a valid request and expects rejection.
TEST(WireTest, HeaderFieldsAreValidated) {
  Fixture f;
  const std::vector<uint8_t> good = EncodeOrDie(f.Request());
  auto corrupt = [&](size_t offset, std::vector<uint8_t> value) {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data() + offset, value.data(), value.size());
    return Decode(b);
  };
  EXPECT_FALSE(corrupt(0, {0x00, 0x00}).ok());               // magic
  EXPECT_FALSE(corrupt(2, {kVersion + 1}).ok());             // version
  EXPECT_FALSE(corrupt(3, {0}).ok());                        // kind 0
  EXPECT_FALSE(corrupt(3, {8}).ok());                        // kind 8 (7 is a batch)
  EXPECT_FALSE(corrupt(4, {1, 0}).ok());                     // flags
  EXPECT_FALSE(corrupt(6, {0x01, 0xF0}).ok());               // reserved opcode (0xF000 is authenticate)
  EXPECT_FALSE(corrupt(16, {0, 0, 0, 0, 0, 0, 0, 0}).ok());  // connection id 0
  EXPECT_FALSE(corrupt(24, {0xff, 0xff, 0xff, 0xff}).ok());  // payload length
  EXPECT_FALSE(corrupt(28, {0x01, 0x10}).ok());              // capability above the limit
  EXPECT_FALSE(corrupt(36, {3}).ok());                       // bulk count
  EXPECT_FALSE(corrupt(37, {1}).ok());                       // status code on a request
  EXPECT_FALSE(corrupt(38, {1, 0}).ok());                    // reserved
  EXPECT_FALSE(corrupt(40, {1}).ok());                       // pushed bytes on a request
  const size_t desc0 = kHeaderSize + f.cap.size();
  EXPECT_FALSE(corrupt(desc0 + 0, {2}).ok());     // direction
  EXPECT_FALSE(corrupt(desc0 + 1, {5}).ok());     // transfer (4 is a segment)
  EXPECT_FALSE(corrupt(desc0 + 4, {1}).ok());     // descriptor reserved
  EXPECT_FALSE(corrupt(desc0 + 8, {0xff}).ok());  // inline length != section
  EXPECT_TRUE(Decode(good).ok());
}

TEST(WireTest, SemanticRulesAreEnforcedByEncoderAndDecoder) {
  Fixture f;
  std::vector<uint8_t> scratch(1 << 16);
  auto rejects = [&](const Message& m) { return !Encode(m, scratch).ok(); };
  Message m = f.Request();
  m.bulk[1].direction = BulkDirection::kOut;  // two descriptors in one direction
  EXPECT_TRUE(rejects(m));
  m = f.Request();
  m.bulk[1].rkey = {};  // rma without rkey
  EXPECT_TRUE(rejects(m));
  m = f.Request();
  m.bulk[1].remote_addr = ~0ull;  // range wraps
  EXPECT_TRUE(rejects(m));
  m = f.Request();
  m.bulk[0].length = 0;
  m.inline_data = {};
  EXPECT_TRUE(rejects(m));
  m = f.Request();
  m.opcode = 0xF001;
  EXPECT_TRUE(rejects(m));
  m = f.Reply();
  m.capability = Bytes(f.cap);  // capability on a reply
  EXPECT_TRUE(rejects(m));
  m = f.Reply();
  m.status_code = 200;
  EXPECT_TRUE(rejects(m));
  m = f.Reply();
  m.pushed_bytes = 5;
  m.inline_data = Bytes(f.payload);  // 7 bytes inline != 5 pushed
  EXPECT_TRUE(rejects(m));
  Message hello;
  hello.kind = Kind::kHello;
  hello.connection_id = 3;  // hello carries no connection id
  EXPECT_TRUE(rejects(hello));
  Message push;
  push.kind = Kind::kPushData;
  push.connection_id = 1;
  push.payload = Bytes(f.payload);
  EXPECT_TRUE(rejects(push));
}

// Cross-memory-attach descriptors carry an address and no rkey; a hello
// carries nothing or a 24-byte proof; a hello ack a flag byte and a challenge.
TEST(WireTest, CmaDescriptorsAndHelloProof) {
  Fixture f;
  std::vector<uint8_t> scratch(1 << 16);
  auto round_trips = [&](const Message& m) {
    auto n = Encode(m, scratch);
    return n.ok() && Decode(std::span<const uint8_t>(scratch.data(), *n)).ok();
  };
  Message m = f.Request();
  m.bulk[1].transfer = BulkTransfer::kCma;
  m.bulk[1].rkey = {};
  ASSERT_TRUE(round_trips(m));
  auto n = Encode(m, scratch);
  auto d = Decode(std::span<const uint8_t>(scratch.data(), *n));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->FindBulk(BulkDirection::kIn)->transfer, BulkTransfer::kCma);
  EXPECT_EQ(d->FindBulk(BulkDirection::kIn)->remote_addr, m.bulk[1].remote_addr);
  Message bad = m;
  bad.bulk[1].rkey = f.rkey;  // cma with an rkey
  EXPECT_FALSE(round_trips(bad));
  bad = m;
  bad.bulk[1].remote_addr = 0;
  EXPECT_FALSE(round_trips(bad));
  bad = m;
  bad.bulk[1].remote_addr = ~0ull - 3;  // range wraps
  EXPECT_FALSE(round_trips(bad));

  std::vector<uint8_t> proof(kHelloProofSize, 0x42);
  Message hello;
  hello.kind = Kind::kHello;
  hello.payload = Bytes(f.payload);
  EXPECT_TRUE(round_trips(hello));
  hello.capability = proof;
  EXPECT_TRUE(round_trips(hello));
  hello.capability = std::span<const uint8_t>(proof.data(), proof.size() - 1);
  EXPECT_FALSE(round_trips(hello));
  Message ack;
  ack.kind = Kind::kHelloAck;
  ack.connection_id = 9;
  EXPECT_FALSE(round_trips(ack));  // the challenge is missing
  std::vector<uint8_t> payload(kHelloAckSize, 0x5a);
  payload[0] = kHelloAckCmaAccepted | kHelloAckIntegrity;
  ack.payload = payload;
  EXPECT_TRUE(round_trips(ack));
  payload[0] = kHelloAckRma;
  EXPECT_TRUE(round_trips(ack));
  payload[0] = 8;  // an unknown flag
  EXPECT_FALSE(round_trips(ack));
  payload[0] = 0;
  ack.payload = std::span<const uint8_t>(payload.data(), payload.size() - 1);
  EXPECT_FALSE(round_trips(ack));
}

// The integrity trailer: flag bit 0 announces exactly 24 bytes after the last
// section; without the flag they are trailing garbage; inside a batch entry
// it is refused.
TEST(WireTest, IntegrityTrailer) {
  Fixture f;
  Message m = f.Request();
  std::vector<uint8_t> bytes(EncodedSize(m));
  ASSERT_TRUE(Encode(m, bytes).ok());
  bytes.resize(bytes.size() + kIntegrityTrailerSize, 0x77);
  EXPECT_EQ(Decode(bytes).status().code(), Status::Code::kProtocol);  // no flag: trailing bytes
  SetIntegrityFlag(bytes);
  auto d = Decode(bytes);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->integrity.size(), kIntegrityTrailerSize);
  EXPECT_EQ(d->payload.size(), m.payload.size());
  bytes.pop_back();
  EXPECT_NE(Decode(bytes).status().message().find("integrity trailer"), std::string::npos);
  // The authentication opcode is the one reserved opcode a request may carry.
  m.opcode = kAuthenticateOpcode;
  std::vector<uint8_t> auth(EncodedSize(m));
  EXPECT_TRUE(Encode(m, auth).ok());
  m.opcode = kAuthenticateOpcode + 1;
  EXPECT_FALSE(Encode(m, auth).ok());
}

TEST(WireTest, EncoderRefusesSmallBuffers) {
  Fixture f;
  Message m = f.Request();
  std::vector<uint8_t> small(EncodedSize(m) - 1);
  EXPECT_EQ(Encode(m, small).status().code(), Status::Code::kInvalidArgument);
}

TEST(WireTest, AddressRoundTripAndValidation) {
  std::vector<uint8_t> ucx(77, 0xab);
  WorkerAddress a;
  a.boot_id.fill(0x11);
  a.pid = 4242;
  a.ucx_address = ucx;
  std::vector<uint8_t> blob(EncodedAddressSize(a));
  ASSERT_TRUE(EncodeAddress(a, blob).ok());
  auto d = DecodeAddress(blob);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->pid, 4242);
  EXPECT_EQ(d->boot_id, a.boot_id);
  EXPECT_EQ(std::vector<uint8_t>(d->ucx_address.begin(), d->ucx_address.end()), ucx);
  for (size_t cut = 0; cut < blob.size(); ++cut) {
    EXPECT_FALSE(DecodeAddress(std::span<const uint8_t>(blob.data(), cut)).ok()) << cut;
  }
  std::vector<uint8_t> bad = blob;
  bad[0] ^= 1;
  EXPECT_FALSE(DecodeAddress(bad).ok());
  bad = blob;
  bad[8] = bad[9] = bad[10] = bad[11] = 0;  // pid 0
  EXPECT_FALSE(DecodeAddress(bad).ok());
  bad = blob;
  bad[6] = 1;  // reserved
  EXPECT_FALSE(DecodeAddress(bad).ok());
  bad = blob;
  bad[5] = 0;  // no wire version
  EXPECT_FALSE(DecodeAddress(bad).ok());
  bad = blob;
  bad[4] = static_cast<uint8_t>(kAddressVersion + 1);
  auto other_format = DecodeAddress(bad);
  ASSERT_FALSE(other_format.ok());
  EXPECT_NE(other_format.status().message().find("format version 2"), std::string::npos)
      << other_format.status().ToString();
}

TEST(WireTest, AddressCarriesTheWireVersion) {
  std::vector<uint8_t> ucx(8, 0xcd);
  WorkerAddress a;
  a.pid = 7;
  a.ucx_address = ucx;
  EXPECT_EQ(a.wire_version, kVersion);
  std::vector<uint8_t> blob(EncodedAddressSize(a));
  ASSERT_TRUE(EncodeAddress(a, blob).ok());
  EXPECT_EQ(blob[5], kVersion);
  a.wire_version = static_cast<uint8_t>(kVersion + 1);  // a peer of a later version still decodes...
  ASSERT_TRUE(EncodeAddress(a, blob).ok());
  auto d = DecodeAddress(blob);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->wire_version, kVersion + 1);
  // ...and the connecting side refuses it by name.
  Status st = CheckPeerWireVersion(d->wire_version, "peer pid 7");
  EXPECT_EQ(st.code(), Status::Code::kNotSupported);
  EXPECT_NE(st.message().find(fmt::format("peer pid 7 speaks data-plane wire version {}, this side speaks version {}",
                                          kVersion + 1, kVersion)),
            std::string::npos)
      << st.ToString();
  EXPECT_TRUE(CheckPeerWireVersion(kVersion, "peer pid 7").ok());
}

TEST(WireTest, PeekVersionTellsAnotherVersionFromNoise) {
  Message m;
  m.kind = Kind::kBye;
  m.connection_id = 9;
  std::vector<uint8_t> bytes(EncodedSize(m));
  ASSERT_TRUE(Encode(m, bytes).ok());
  EXPECT_EQ(PeekVersion(bytes), kVersion);
  bytes[2] = 7;
  EXPECT_FALSE(Decode(bytes).ok());
  EXPECT_EQ(PeekVersion(bytes), 7);
  bytes[0] ^= 0xff;  // not ours at all
  EXPECT_EQ(PeekVersion(bytes), 0);
  EXPECT_EQ(PeekVersion(std::span<const uint8_t>(bytes.data(), 2)), 0);
}

}  // namespace
}  // namespace ros2::transport::wire

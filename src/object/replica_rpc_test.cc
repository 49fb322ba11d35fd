// Round trips of the replicated update messages (replica_rpc.h) and rejection
// of malformed ones, each naming the field.
#include "object/replica_rpc.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ros2::obj {
namespace {

LeaderRequest SampleLeader() {
  UpdateRequest u;
  u.header.pool = Uuid::Generate();
  u.header.container = Uuid::Generate();
  u.header.epoch = 77;
  u.oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP3G1, 1, 2);
  u.dkey = "d";
  u.akey = "a";
  u.length = 10;
  LeaderRequest m;
  m.op = Opcode::kUpdate;
  m.body = Encode(u);
  m.peers = {{1, "worker-address-one"}, {0, std::string(300, 'x')}};
  return m;
}

void ExpectProtocol(const Status& st, const std::string& field) {
  EXPECT_EQ(st.code(), Status::Code::kProtocol) << st.ToString();
  EXPECT_NE(st.message().find(field), std::string::npos) << st.ToString();
}

TEST(ReplicaRpc, LeaderAndForwardRoundTrip) {
  const LeaderRequest m = SampleLeader();
  auto back = DecodeLeaderRequest(Encode(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);
  ForwardRequest f;
  f.op = Opcode::kPunch;
  f.flags = kForwardDecided;
  f.body = {1, 2, 3};
  f.group = {{0, "leader"}, {3, "copy"}};
  f.seq = 0x1122334455667788ull;
  f.watermark = 0x1122334455667700ull;
  f.mac.fill(0xab);
  auto fback = DecodeForwardRequest(Encode(f));
  ASSERT_TRUE(fback.ok()) << fback.status().ToString();
  EXPECT_EQ(*fback, f);
}

TEST(ReplicaRpc, MalformedMessagesNameTheField) {
  auto bytes = Encode(SampleLeader());
  // Truncated anywhere: never accepted.
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeLeaderRequest({bytes.data(), n}).ok()) << "prefix of " << n << " bytes";
  }
  auto trailing = bytes;
  trailing.push_back(0);
  ExpectProtocol(DecodeLeaderRequest(trailing).status(), "trailing");
  auto op = bytes;
  op[1] = 0x02;  // fetch
  ExpectProtocol(DecodeLeaderRequest(op).status(), "opcode");
  auto version = bytes;
  version[0] = 99;
  ExpectProtocol(DecodeLeaderRequest(version).status(), "version");

  LeaderRequest many = SampleLeader();
  many.peers.assign(kMaxReplicaPeers + 1, {0, "a"});
  ExpectProtocol(DecodeLeaderRequest(Encode(many)).status(), "peers");
  LeaderRequest empty = SampleLeader();
  empty.peers = {{0, ""}};
  ExpectProtocol(DecodeLeaderRequest(Encode(empty)).status(), "peer address");

  ForwardRequest f;
  f.body = {1};
  auto fbytes = Encode(f);
  fbytes[3] = 0x80;  // an unknown flag
  ExpectProtocol(DecodeForwardRequest(fbytes).status(), "flags");
  auto short_mac = Encode(f);
  short_mac.pop_back();
  ExpectProtocol(DecodeForwardRequest(short_mac).status(), "mac");
  ForwardRequest crowded;
  crowded.group.assign(kMaxReplicaPeers + 2, {0, "a"});
  ExpectProtocol(DecodeForwardRequest(Encode(crowded)).status(), "peers");
  // A watermark alone carries no request, and names its leader.
  ForwardRequest mark;
  mark.flags = kForwardWatermark;
  mark.group = {{0, "leader"}};
  mark.watermark = 7;
  auto mark_back = DecodeForwardRequest(Encode(mark));
  ASSERT_TRUE(mark_back.ok()) << mark_back.status().ToString();
  EXPECT_EQ(*mark_back, mark);
  ForwardRequest mark_with_body = mark;
  mark_with_body.body = {1};
  ExpectProtocol(DecodeForwardRequest(Encode(mark_with_body)).status(), "flags");
  ForwardRequest mark_without_leader = mark;
  mark_without_leader.group.clear();
  ExpectProtocol(DecodeForwardRequest(Encode(mark_without_leader)).status(), "flags");
  // An abort names the request it takes back, its leader and its position.
  ForwardRequest abort;
  abort.flags = kForwardAbort;
  abort.body = {1};
  abort.group = {{0, "leader"}};
  abort.seq = 5;
  auto abort_back = DecodeForwardRequest(Encode(abort));
  ASSERT_TRUE(abort_back.ok()) << abort_back.status().ToString();
  EXPECT_EQ(*abort_back, abort);
  ForwardRequest abort_without_body = abort;
  abort_without_body.body.clear();
  ExpectProtocol(DecodeForwardRequest(Encode(abort_without_body)).status(), "flags");
  ForwardRequest abort_without_seq = abort;
  abort_without_seq.seq = 0;
  ExpectProtocol(DecodeForwardRequest(Encode(abort_without_seq)).status(), "flags");
  ForwardRequest abort_and_mark = abort;
  abort_and_mark.flags |= kForwardWatermark;
  ExpectProtocol(DecodeForwardRequest(Encode(abort_and_mark)).status(), "flags");
}

TEST(ReplicaRpc, TheMacInputCoversTheRequestAndTheCapability) {
  ForwardRequest f;
  f.body = {1, 2, 3};
  const std::vector<uint8_t> cap = {9, 9};
  const auto base = ForwardMacInput(f, cap);
  ForwardRequest other_body = f;
  other_body.body[2] = 4;
  EXPECT_NE(ForwardMacInput(other_body, cap), base);
  ForwardRequest other_flags = f;
  other_flags.flags = kForwardDecided;
  EXPECT_NE(ForwardMacInput(other_flags, cap), base);
  ForwardRequest abort = f;  // a forward cannot be turned into an abort
  abort.flags = kForwardAbort;
  EXPECT_NE(ForwardMacInput(abort, cap), base);
  EXPECT_NE(ForwardMacInput(f, std::vector<uint8_t>{9, 8}), base);
  ForwardRequest other_group = f;
  other_group.group = {{1, "x"}};
  EXPECT_NE(ForwardMacInput(other_group, cap), base);
  // A copy trusts the watermark only under the MAC: neither it nor the
  // position can be changed without it.
  ForwardRequest other_watermark = f;
  other_watermark.watermark = 1;
  EXPECT_NE(ForwardMacInput(other_watermark, cap), base);
  ForwardRequest other_seq = f;
  other_seq.seq = 1;
  EXPECT_NE(ForwardMacInput(other_seq, cap), base);
  // The capability cannot be moved into the request or out of it.
  ForwardRequest shifted = f;
  shifted.body.push_back(9);
  EXPECT_NE(ForwardMacInput(shifted, std::vector<uint8_t>{9}), base);
}

}  // namespace
}  // namespace ros2::obj

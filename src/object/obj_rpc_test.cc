// Round trips of every object RPC message and rejection of malformed payloads.
#include "object/obj_rpc.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace ros2::obj {
namespace {

RequestHeader SampleHeader() {
  RequestHeader h;
  h.pool = Uuid::Generate();
  h.container = Uuid::Generate();
  h.target = 3;
  h.epoch = 0x123456789abcULL;
  h.map_version = 0x0102030405060708ULL;
  return h;
}

UpdateRequest SampleUpdate() {
  UpdateRequest m;
  m.header = SampleHeader();
  m.oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 0xabcdef, 42);
  m.dkey = "chunk-7";
  m.akey = "data";
  m.type = ValueType::kArray;
  m.index = 4096;
  m.record_size = 1;
  m.length = 10000;
  m.csum.type = ChecksumType::kCrc32c;
  m.csum.chunk_size = 4096;
  m.csum.values = {0xdeadbeef, 1, 0xffffffff};
  return m;
}

TEST(ObjRpc, UpdateRoundTrip) {
  UpdateRequest m = SampleUpdate();
  auto back = DecodeUpdateRequest(Encode(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);

  m.csum.type = ChecksumType::kCrc64;
  m.csum.values = {0xfedcba9876543210ULL, 2, 3};
  back = DecodeUpdateRequest(Encode(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);

  UpdateReply r{.epoch = 77};
  auto rb = DecodeUpdateReply(Encode(r));
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->epoch, 77u);
}

TEST(ObjRpc, SingleValueUpdateWithoutChecksums) {
  UpdateRequest m;
  m.header = SampleHeader();
  m.oid = ObjectId{1, 2};
  m.dkey = "d";
  m.akey = "a";
  m.length = 0;
  auto back = DecodeUpdateRequest(Encode(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);
}

TEST(ObjRpc, FetchRoundTrip) {
  FetchRequest m;
  m.header = SampleHeader();
  m.oid = ObjectId{5, 6};
  m.dkey = std::string(kMaxKeySize, 'k');
  m.akey = "a";
  m.type = ValueType::kArray;
  m.index = 10;
  m.count = 100;
  m.record_size = 512;
  auto back = DecodeFetchRequest(Encode(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);

  FetchReply r;
  r.size = 51200;
  r.csum = {ChecksumType::kCrc32c, 4096, std::vector<uint64_t>(13, 9)};
  auto rb = DecodeFetchReply(Encode(r));
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(*rb, r);
}

TEST(ObjRpc, PunchListQueryPingRoundTrip) {
  PunchRequest p{SampleHeader(), PunchScope::kAkey, ObjectId{1, 1}, "d", "a"};
  auto pb = DecodePunchRequest(Encode(p));
  ASSERT_TRUE(pb.ok()) << pb.status().ToString();
  EXPECT_EQ(*pb, p);
  auto prb = DecodePunchReply(Encode(PunchReply{.epoch = 9}));
  ASSERT_TRUE(prb.ok());
  EXPECT_EQ(prb->epoch, 9u);

  ListRequest l;
  l.header = SampleHeader();
  l.kind = ListKind::kExtents;
  l.oid = ObjectId{7, 7};
  l.dkey = "d";
  l.akey = "a";
  l.anchor.position = std::string("\0\1pos", 5);
  l.max_entries = 100;
  auto lb = DecodeListRequest(Encode(l));
  ASSERT_TRUE(lb.ok()) << lb.status().ToString();
  EXPECT_EQ(*lb, l);

  for (ListKind kind : {ListKind::kObjects, ListKind::kDkeys, ListKind::kAkeys, ListKind::kExtents}) {
    ListReply r;
    r.kind = kind;
    if (kind == ListKind::kObjects) r.objects = {ObjectId{1, 2}, ObjectId{3, 4}};
    if (kind == ListKind::kDkeys || kind == ListKind::kAkeys) r.keys = {"a", "bb", std::string(300, 'c')};
    if (kind == ListKind::kExtents) r.extents = {{0, 10, 1, 5}, {20, 4, 1, 6}};
    r.anchor = {"next", kind == ListKind::kAkeys};
    auto rb = DecodeListReply(Encode(r));
    ASSERT_TRUE(rb.ok()) << rb.status().ToString();
    EXPECT_EQ(*rb, r);
  }

  QueryRequest q{SampleHeader(), QueryKind::kArrayEnd, ObjectId{2, 2}, "d", "a"};
  auto qb = DecodeQueryRequest(Encode(q));
  ASSERT_TRUE(qb.ok()) << qb.status().ToString();
  EXPECT_EQ(*qb, q);
  for (QueryReply r : {QueryReply{QueryKind::kMaxDkey, true, "zz", 0}, QueryReply{QueryKind::kArrayEnd, true, "", 99},
                       QueryReply{QueryKind::kMaxDkey, false, "", 0}}) {
    auto rb = DecodeQueryReply(Encode(r));
    ASSERT_TRUE(rb.ok()) << rb.status().ToString();
    EXPECT_EQ(*rb, r);
  }

  auto pingb = DecodePingRequest(Encode(PingRequest{.target = 4}));
  ASSERT_TRUE(pingb.ok());
  EXPECT_EQ(pingb->target, 4u);
  PingReply pr{2, 4, Uuid::Generate()};
  auto prb2 = DecodePingReply(Encode(pr));
  ASSERT_TRUE(prb2.ok());
  EXPECT_EQ(*prb2, pr);
}

TEST(ObjRpc, EveryTruncationIsRejectedAsProtocolError) {
  std::vector<std::vector<uint8_t>> messages = {Encode(SampleUpdate())};
  FetchRequest f{SampleHeader(), ObjectId{1, 2}, "d", "a", ValueType::kSingle, 0, 0, 1};
  messages.push_back(Encode(f));
  ListRequest l;
  l.header = SampleHeader();
  l.kind = ListKind::kDkeys;
  l.oid = ObjectId{1, 1};
  l.max_entries = 10;
  messages.push_back(Encode(l));
  for (size_t m = 0; m < messages.size(); ++m) {
    const auto& full = messages[m];
    for (size_t n = 0; n < full.size(); ++n) {
      std::span<const uint8_t> cut(full.data(), n);
      Status st = m == 0   ? DecodeUpdateRequest(cut).status()
                  : m == 1 ? DecodeFetchRequest(cut).status()
                           : DecodeListRequest(cut).status();
      EXPECT_EQ(st.code(), Status::Code::kProtocol) << "message " << m << " cut at " << n << ": " << st.ToString();
    }
    auto extra = full;
    extra.push_back(0);
    Status st = m == 0   ? DecodeUpdateRequest(extra).status()
                : m == 1 ? DecodeFetchRequest(extra).status()
                         : DecodeListRequest(extra).status();
    EXPECT_EQ(st.code(), Status::Code::kProtocol);
    EXPECT_NE(st.message().find("trailing"), std::string::npos) << st.ToString();
  }
}

TEST(ObjRpc, BadVersionFlagsAndEnumsAreRejected) {
  auto bytes = Encode(SampleUpdate());
  auto bad = bytes;
  bad[0] = kProtocolVersion + 1;
  auto st = DecodeUpdateRequest(bad).status();
  EXPECT_EQ(st.code(), Status::Code::kProtocol);
  EXPECT_NE(st.message().find("version"), std::string::npos) << st.ToString();

  bad = bytes;
  bad[1] = 0x80;  // flags
  EXPECT_EQ(DecodeUpdateRequest(bad).status().code(), Status::Code::kProtocol);

  // value type lives after version, flags, 2 uuids, target, epoch, map
  // version, oid, 2 keys.
  size_t type_off = 1 + 1 + 16 + 16 + 4 + 8 + 8 + 16 + 2 + 7 + 2 + 4;
  bad = bytes;
  ASSERT_EQ(bad[type_off], 2);
  bad[type_off] = 9;
  st = DecodeUpdateRequest(bad).status();
  EXPECT_EQ(st.code(), Status::Code::kProtocol);
  EXPECT_NE(st.message().find("value type"), std::string::npos) << st.ToString();

  EXPECT_EQ(DecodeUpdateRequest({}).status().code(), Status::Code::kProtocol);
}

TEST(ObjRpc, OversizedKeyIsRejected) {
  UpdateRequest m = SampleUpdate();
  m.dkey = std::string(kMaxKeySize + 1, 'x');
  auto st = DecodeUpdateRequest(Encode(m)).status();
  EXPECT_EQ(st.code(), Status::Code::kProtocol);
  EXPECT_NE(st.message().find("dkey"), std::string::npos) << st.ToString();
}

TEST(ObjRpc, SemanticErrorsAreInvalidArgument) {
  UpdateRequest m = SampleUpdate();
  m.dkey.clear();
  EXPECT_EQ(DecodeUpdateRequest(Encode(m)).status().code(), Status::Code::kInvalidArgument);

  m = SampleUpdate();
  m.record_size = 0;
  EXPECT_EQ(DecodeUpdateRequest(Encode(m)).status().code(), Status::Code::kInvalidArgument);

  m = SampleUpdate();
  m.record_size = 3;  // 10000 is not a multiple of 3
  EXPECT_EQ(DecodeUpdateRequest(Encode(m)).status().code(), Status::Code::kInvalidArgument);

  m = SampleUpdate();
  m.csum.values.pop_back();  // 2 checksums for 10000 bytes in 4 KiB chunks
  auto st = DecodeUpdateRequest(Encode(m)).status();
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("expected 3"), std::string::npos) << st.ToString();

  m = SampleUpdate();
  m.index = ~uint64_t{0} - 5;  // index + count overflows
  EXPECT_EQ(DecodeUpdateRequest(Encode(m)).status().code(), Status::Code::kInvalidArgument);

  FetchRequest f{SampleHeader(), ObjectId{1, 2}, "d", "a", ValueType::kArray, 0, ~uint64_t{0} / 2, 4};
  EXPECT_EQ(DecodeFetchRequest(Encode(f)).status().code(), Status::Code::kInvalidArgument);

  ListRequest l;
  l.header = SampleHeader();
  l.kind = ListKind::kAkeys;  // needs a dkey
  l.max_entries = 1;
  EXPECT_EQ(DecodeListRequest(Encode(l)).status().code(), Status::Code::kInvalidArgument);
  l.dkey = "d";
  l.max_entries = kMaxListEntries + 1;
  EXPECT_EQ(DecodeListRequest(Encode(l)).status().code(), Status::Code::kInvalidArgument);

  PunchRequest p{SampleHeader(), PunchScope::kObject, ObjectId{1, 1}, "stray", ""};
  EXPECT_EQ(DecodePunchRequest(Encode(p)).status().code(), Status::Code::kProtocol);
}

// Every kind of punch, list and query names some keys: those must be set (an
// empty one is the caller's mistake, InvalidArgument), the others empty (a
// stray key is a malformed request, Protocol); the dkey is judged first.
TEST(ObjRpc, EachKindNamesItsKeysAndNoOthers) {
  struct Rule {
    std::string what;
    bool names_dkey, names_akey;
    std::function<Status(const std::string&, const std::string&)> decode;
  };
  auto punch = [](PunchScope s) {
    return [s](const std::string& d, const std::string& a) {
      return DecodePunchRequest(Encode(PunchRequest{SampleHeader(), s, ObjectId{1, 1}, d, a})).status();
    };
  };
  auto list = [](ListKind k) {
    return [k](const std::string& d, const std::string& a) {
      ListRequest l;
      l.header = SampleHeader();
      l.kind = k;
      l.oid = k == ListKind::kObjects ? ObjectId{} : ObjectId{1, 1};
      l.dkey = d;
      l.akey = a;
      l.max_entries = 1;
      return DecodeListRequest(Encode(l)).status();
    };
  };
  auto query = [](QueryKind k) {
    return [k](const std::string& d, const std::string& a) {
      return DecodeQueryRequest(Encode(QueryRequest{SampleHeader(), k, ObjectId{1, 1}, d, a})).status();
    };
  };
  const std::vector<Rule> rules = {
      {"punch object", false, false, punch(PunchScope::kObject)},
      {"punch dkey", true, false, punch(PunchScope::kDkey)},
      {"punch akey", true, true, punch(PunchScope::kAkey)},
      {"list objects", false, false, list(ListKind::kObjects)},
      {"list dkeys", false, false, list(ListKind::kDkeys)},
      {"list akeys", true, false, list(ListKind::kAkeys)},
      {"list extents", true, true, list(ListKind::kExtents)},
      {"query max dkey", false, false, query(QueryKind::kMaxDkey)},
      {"query array end", true, true, query(QueryKind::kArrayEnd)},
      {"query array tail", false, true, query(QueryKind::kArrayTail)},
  };
  for (const Rule& rule : rules) {
    for (bool dkey_set : {false, true}) {
      for (bool akey_set : {false, true}) {
        SCOPED_TRACE(
            fmt::format("{} dkey {} akey {}", rule.what, dkey_set ? "set" : "empty", akey_set ? "set" : "empty"));
        Status st = rule.decode(dkey_set ? "d" : "", akey_set ? "a" : "");
        if (dkey_set != rule.names_dkey) {
          EXPECT_EQ(st.code(), rule.names_dkey ? Status::Code::kInvalidArgument : Status::Code::kProtocol);
          EXPECT_NE(st.message().find("dkey"), std::string::npos) << st.ToString();
        } else if (akey_set != rule.names_akey) {
          EXPECT_EQ(st.code(), rule.names_akey ? Status::Code::kInvalidArgument : Status::Code::kProtocol);
          EXPECT_NE(st.message().find("akey"), std::string::npos) << st.ToString();
        } else {
          EXPECT_TRUE(st.ok()) << st.ToString();
        }
      }
    }
  }
}

TEST(ObjRpc, ChecksumCountBeyondPayloadIsRejected) {
  auto bytes = Encode(SampleUpdate());
  // The checksum count is the 4 bytes before the 3 four-byte values at the end.
  size_t count_off = bytes.size() - 12 - 4;
  bytes[count_off] = 0xff;
  bytes[count_off + 1] = 0xff;
  bytes[count_off + 2] = 0x0f;
  EXPECT_EQ(DecodeUpdateRequest(bytes).status().code(), Status::Code::kProtocol);
}

}  // namespace
}  // namespace ros2::obj

namespace ros2::obj {
namespace {

TEST(ObjRpc, ConditionFlagsRoundTripWhereAllowed) {
  UpdateRequest u;
  u.header = RequestHeader{};
  u.header.pool = Uuid::Generate();
  u.header.container = Uuid::Generate();
  u.header.flags = kFlagIfAbsent;
  u.oid = ObjectId{1, 2};
  u.dkey = "name";
  u.akey = "e";
  auto back = DecodeUpdateRequest(Encode(u));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->header.flags, kFlagIfAbsent);

  u.header.flags = kFlagIfAbsent | kFlagIfPresent;  // contradictory
  EXPECT_EQ(DecodeUpdateRequest(Encode(u)).status().code(), Status::Code::kProtocol);
  u.header.flags = kFlagWantArrayEnd;  // a fetch flag on an update
  EXPECT_EQ(DecodeUpdateRequest(Encode(u)).status().code(), Status::Code::kProtocol);

  PunchRequest p{u.header, PunchScope::kDkey, ObjectId{1, 1}, "d", ""};
  p.header.flags = kFlagIfPresent;
  auto pb = DecodePunchRequest(Encode(p));
  ASSERT_TRUE(pb.ok()) << pb.status().ToString();
  EXPECT_EQ(pb->header.flags, kFlagIfPresent);
  p.header.flags = kFlagIfAbsent;
  EXPECT_EQ(DecodePunchRequest(Encode(p)).status().code(), Status::Code::kProtocol);
  PunchRequest whole{u.header, PunchScope::kObject, ObjectId{1, 1}, "", ""};
  whole.header.flags = kFlagIfPresent;
  EXPECT_TRUE(DecodePunchRequest(Encode(whole)).status().IsInvalidArgument());

  FetchRequest f{u.header, ObjectId{1, 2}, "d", "a", ValueType::kArray, 0, 16, 1};
  f.header.flags = kFlagWantArrayEnd;
  auto fb = DecodeFetchRequest(Encode(f));
  ASSERT_TRUE(fb.ok()) << fb.status().ToString();
  EXPECT_EQ(fb->header.flags, kFlagWantArrayEnd);
  FetchRequest single{u.header, ObjectId{1, 2}, "d", "a", ValueType::kSingle, 0, 0, 1};
  single.header.flags = kFlagWantArrayEnd;
  EXPECT_TRUE(DecodeFetchRequest(Encode(single)).status().IsInvalidArgument());

  QueryRequest q{u.header, QueryKind::kMaxDkey, ObjectId{2, 2}, "", ""};
  q.header.flags = kFlagIfPresent;  // queries take no flags
  EXPECT_EQ(DecodeQueryRequest(Encode(q)).status().code(), Status::Code::kProtocol);
}

TEST(ObjRpc, FetchReplyCarriesArrayEndAndTailQueryRoundTrips) {
  FetchReply r;
  r.size = 16;
  r.array_end = 4096;
  auto back = DecodeFetchReply(Encode(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);

  QueryRequest q{RequestHeader{}, QueryKind::kArrayTail, ObjectId{2, 2}, "", "d"};
  q.header.pool = Uuid::Generate();
  q.header.container = Uuid::Generate();
  auto qb = DecodeQueryRequest(Encode(q));
  ASSERT_TRUE(qb.ok()) << qb.status().ToString();
  EXPECT_EQ(*qb, q);
  q.akey.clear();
  EXPECT_TRUE(DecodeQueryRequest(Encode(q)).status().IsInvalidArgument());
  q.akey = "d";
  q.dkey = "x";
  EXPECT_EQ(DecodeQueryRequest(Encode(q)).status().code(), Status::Code::kProtocol);

  QueryReply t{QueryKind::kArrayTail, true, std::string("\0\0\0\0\0\0\0\3", 8), 77};
  auto tb = DecodeQueryReply(Encode(t));
  ASSERT_TRUE(tb.ok()) << tb.status().ToString();
  EXPECT_EQ(*tb, t);
}

}  // namespace
}  // namespace ros2::obj

namespace ros2::obj {
namespace {

TEST(ObjRpc, MapVersionTravelsInEveryHeader) {
  UpdateRequest m = SampleUpdate();
  m.header.map_version = 41;
  auto back = DecodeUpdateRequest(Encode(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->header.map_version, 41u);
  QueryRequest q;
  q.header = SampleHeader();
  q.header.map_version = uint64_t{1} << 63;
  q.kind = QueryKind::kMaxDkey;
  q.oid = ObjectId{1, 2};
  auto qb = DecodeQueryRequest(Encode(q));
  ASSERT_TRUE(qb.ok()) << qb.status().ToString();
  EXPECT_EQ(qb->header.map_version, uint64_t{1} << 63);
}

TEST(ObjRpc, StaleMapReplyRoundTripAndRules) {
  StaleMapReply r{.engine_version = 9, .request_version = 7};
  auto back = DecodeStaleMapReply(Encode(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  // A refusal whose engine version is not newer than the request's makes no sense.
  auto same = DecodeStaleMapReply(Encode(StaleMapReply{7, 7}));
  ASSERT_FALSE(same.ok());
  EXPECT_EQ(same.status().code(), Status::Code::kProtocol);
  EXPECT_NE(same.status().message().find("not newer"), std::string::npos) << same.status().ToString();
  auto bytes = Encode(r);
  bytes.pop_back();
  EXPECT_EQ(DecodeStaleMapReply(bytes).status().code(), Status::Code::kProtocol);
}

}  // namespace
}  // namespace ros2::obj

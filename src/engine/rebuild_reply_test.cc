// Forged replies to a rebuild read (obj::Opcode::kRebuildRead): the source's
// reply is sealed by SealRebuildReadReply, and the puller accepts it only
// through OpenRebuildReadReply, the one gate between the transport and the
// puller's store (Target::ReadForRebuild hands the store nothing else). Each
// forgery an on-path attacker or a non-engine can make must be refused with
// no body, so no byte of it is stored: altered pushed bytes, altered
// checksums, a reply replayed to another read, a reply sealed under another
// key, a reply naming fewer extents.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/rebuild_source.h"
#include "testing/pattern.h"

namespace ros2::engine {
namespace {

control::HmacSha256 Key(uint8_t fill) {
  const std::vector<uint8_t> bytes(32, fill);
  auto k = control::HmacSha256::Create(bytes);
  EXPECT_TRUE(k.ok());
  return std::move(*k);
}

rpc::RebuildReadBody Body() {
  rpc::RebuildReadBody body;
  for (uint64_t size : {uint64_t{65536}, uint64_t{4096}}) {
    rpc::RebuildReadChecksums* c = body.add_extents();
    c->set_size(size);
    c->set_csum_type(1);
    c->set_csum_chunk(32768);
    for (uint64_t i = 0; i < size / 32768 + 1; ++i) c->add_csums(0x1234 + i);
  }
  return body;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

class RebuildReplyTest : public ::testing::Test {
 protected:
  void ExpectRefused(const std::string& what, const std::string& payload, std::span<const std::byte> data,
                     Status::Code code = Status::Code::kUnauthenticated, const std::string& nonce = "") {
    auto got = OpenRebuildReadReply(forward_, nonce.empty() ? nonce_ : nonce, Bytes(payload), data, 2, 7);
    ASSERT_FALSE(got.ok()) << what << ": a forged reply was accepted, its data would be stored";
    EXPECT_EQ(got.status().code(), code) << what << ": " << got.status().ToString();
    if (code == Status::Code::kUnauthenticated) {
      EXPECT_NE(got.status().message().find("fails authentication"), std::string::npos) << got.status().message();
      EXPECT_NE(got.status().message().find("engine target 7"), std::string::npos) << got.status().message();
    }
  }

  control::HmacSha256 forward_ = Key(5);
  const std::string nonce_ = std::string(16, 'n');
  const rpc::RebuildReadBody body_ = Body();
  std::vector<std::byte> data_ = testing::Pattern(65536 + 4096, 11);
};

TEST_F(RebuildReplyTest, GenuineReplyOpensWithItsChecksums) {
  auto sealed = SealRebuildReadReply(forward_, nonce_, body_, data_);
  ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
  auto got = OpenRebuildReadReply(forward_, nonce_, Bytes(*sealed), data_, 2, 7);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->SerializeAsString(), body_.SerializeAsString());
}

TEST_F(RebuildReplyTest, AlteredPushedBytesAreRefused) {
  auto sealed = SealRebuildReadReply(forward_, nonce_, body_, data_);
  ASSERT_TRUE(sealed.ok());
  for (size_t at : {size_t{0}, size_t{4095}, size_t{65536}, data_.size() - 1}) {
    std::vector<std::byte> altered = data_;
    altered[at] ^= std::byte{0x01};
    ExpectRefused("a bit flipped at byte " + std::to_string(at), *sealed, altered);
  }
  // A byte short or over: the pushed bytes are not the ones sealed.
  ExpectRefused("one byte short", *sealed, std::span(data_).first(data_.size() - 1));
}

TEST_F(RebuildReplyTest, AlteredChecksumsAreRefused) {
  // An on-path attacker alters the sealed checksums (it cannot re-seal them):
  // every byte of the sealed text is covered.
  auto sealed = SealRebuildReadReply(forward_, nonce_, body_, data_);
  ASSERT_TRUE(sealed.ok());
  rpc::RebuildReadReply reply;
  ASSERT_TRUE(reply.ParseFromString(*sealed));
  const std::string original = reply.sealed();
  for (size_t at = 0; at < original.size(); at += 7) {
    std::string altered = original;
    altered[at] = static_cast<char>(altered[at] ^ 0x20);
    reply.set_sealed(altered);
    ExpectRefused("the sealed text altered at byte " + std::to_string(at), reply.SerializeAsString(), data_);
  }
  // Checksums that match altered data, sealed by a peer without the engines'
  // forward key (a client or a stranger answering in the source's place).
  rpc::RebuildReadBody forged = body_;
  forged.mutable_extents(0)->set_csums(0, 0xbad);
  auto stranger = SealRebuildReadReply(Key(6), nonce_, forged, data_);
  ASSERT_TRUE(stranger.ok());
  ExpectRefused("checksums sealed under another key", *stranger, data_);
}

TEST_F(RebuildReplyTest, ReplayToAnotherReadIsRefused) {
  // A genuine reply (the forward key's, the same bytes) to an earlier read,
  // replayed to a read with a fresh nonce.
  auto earlier = SealRebuildReadReply(forward_, std::string(16, 'o'), body_, data_);
  ASSERT_TRUE(earlier.ok());
  ExpectRefused("a replayed reply", *earlier, data_);
  // The nonce is bound whole, not by prefix.
  auto prefix = SealRebuildReadReply(forward_, nonce_.substr(0, 15), body_, data_);
  ASSERT_TRUE(prefix.ok());
  ExpectRefused("a reply to a shorter nonce", *prefix, data_);
}

TEST_F(RebuildReplyTest, MalformedOrShortRepliesAreRefused) {
  ExpectRefused("no reply at all", "\xff\xff\xff", data_, Status::Code::kProtocol);
  rpc::RebuildReadReply empty;
  ExpectRefused("an empty sealed text", empty.SerializeAsString(), data_);
  rpc::RebuildReadBody one;
  *one.add_extents() = body_.extents(0);
  auto short_reply = SealRebuildReadReply(forward_, nonce_, one, data_);
  ASSERT_TRUE(short_reply.ok());
  ExpectRefused("one extent of two", *short_reply, data_, Status::Code::kProtocol);
}

}  // namespace
}  // namespace ros2::engine

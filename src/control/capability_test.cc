// Capability encoding, signing and verification: round trip, every refusal
// (malformed, forged, expired, revoked, under-privileged) with its own error,
// the verification cache, and the OpenSSL primitives against known vectors.
#include "control/capability.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "control/crypto.h"
#include "control/rights.h"

namespace ros2::control {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

CapabilityKey TestKey(uint8_t seed) {
  CapabilityKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed + i * 7);
  return k;
}

class CapabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto signer = CapabilitySigner::Create(TestKey(1));
    ASSERT_TRUE(signer.ok()) << signer.status().ToString();
    signer_.emplace(std::move(*signer));
    CapabilityVerifier::Options opts;
    opts.now_ms = [this] { return now_.load(); };
    auto verifier = CapabilityVerifier::Create(TestKey(1), opts);
    ASSERT_TRUE(verifier.ok()) << verifier.status().ToString();
    verifier_ = std::move(*verifier);
    cap_.tenant = Uuid::Generate();
    cap_.pool = Uuid::Generate();
    cap_.container = Uuid::Generate();
    cap_.session = Uuid::Generate();
    cap_.rights = kRightRead;
    cap_.expiry_ms = 2'000'000;
  }

  std::string Sign(const Capability& cap) {
    auto blob = signer_->Sign(cap);
    EXPECT_TRUE(blob.ok()) << blob.status().ToString();
    return blob.ok() ? *blob : std::string();
  }

  std::atomic<uint64_t> now_{1'000'000};
  std::optional<CapabilitySigner> signer_;
  std::unique_ptr<CapabilityVerifier> verifier_;
  Capability cap_;
};

TEST_F(CapabilityTest, SignedBlobIsCompactAndRoundTrips) {
  std::string blob = Sign(cap_);
  ASSERT_EQ(blob.size(), Capability::kEncodedSize);
  EXPECT_EQ(blob.size(), 108u);
  EXPECT_EQ(blob[0], 'R');
  EXPECT_EQ(blob[1], 'C');
  EXPECT_EQ(blob[2], 1);
  EXPECT_EQ(static_cast<uint8_t>(blob[3]), kRightRead);
  auto decoded = Capability::Decode(Bytes(blob));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, cap_);
  auto verified = verifier_->Verify(Bytes(blob));
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_EQ(*verified, cap_);
}

TEST_F(CapabilityTest, FlippedBitAnywhereInBodyOrMacIsForged) {
  std::string blob = Sign(cap_);
  // Bytes 4.. are identities, expiry and MAC: flipping any bit must be caught
  // by the signature. (Bytes 0-3 are structural: covered below.)
  for (size_t byte : {4u, 19u, 20u, 40u, 52u, 68u, 75u, 76u, 107u}) {
    std::string forged = blob;
    forged[byte] = static_cast<char>(forged[byte] ^ 0x01);
    auto r = verifier_->Verify(Bytes(forged));
    ASSERT_FALSE(r.ok()) << "byte " << byte;
    EXPECT_EQ(r.status().code(), Status::Code::kUnauthenticated) << r.status().ToString();
    EXPECT_NE(r.status().message().find("forged"), std::string::npos) << r.status().ToString();
  }
  // Raising the rights byte (read -> read+write) is also forgery.
  std::string escalated = blob;
  escalated[3] = static_cast<char>(kRightRead | kRightWrite);
  auto r = verifier_->Verify(Bytes(escalated));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("forged"), std::string::npos);
  // The genuine blob still verifies: refusals changed nothing.
  EXPECT_TRUE(verifier_->Verify(Bytes(blob)).ok());
}

TEST_F(CapabilityTest, OtherKeyIsForged) {
  auto other = CapabilitySigner::Create(TestKey(2));
  ASSERT_TRUE(other.ok());
  auto blob = other->Sign(cap_);
  ASSERT_TRUE(blob.ok());
  auto r = verifier_->Verify(Bytes(*blob));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnauthenticated);
  EXPECT_NE(r.status().message().find("forged"), std::string::npos);
}

TEST_F(CapabilityTest, MalformedBlobsAreRejectedByName) {
  std::string blob = Sign(cap_);
  auto short_blob = verifier_->Verify(Bytes(blob.substr(0, 50)));
  ASSERT_FALSE(short_blob.ok());
  EXPECT_EQ(short_blob.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(short_blob.status().message().find("50 bytes"), std::string::npos);

  std::string bad_magic = blob;
  bad_magic[0] = 'X';
  auto r1 = verifier_->Verify(Bytes(bad_magic));
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("magic"), std::string::npos);

  std::string bad_version = blob;
  bad_version[2] = 9;
  auto r2 = verifier_->Verify(Bytes(bad_version));
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("version 9"), std::string::npos);

  // Unknown rights bits are refused even under a valid signature.
  auto body = cap_.EncodeBody();
  body[3] = 0x80;
  auto hmac = HmacSha256::Create(TestKey(1));
  ASSERT_TRUE(hmac.ok());
  auto mac = hmac->Compute(body);
  ASSERT_TRUE(mac.ok());
  std::string crafted(reinterpret_cast<const char*>(body.data()), body.size());
  crafted.append(reinterpret_cast<const char*>(mac->data()), mac->size());
  auto r3 = verifier_->Verify(Bytes(crafted));
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r3.status().message().find("unknown bits"), std::string::npos);
}

TEST_F(CapabilityTest, ExpiredIsRefusedEvenWhenCached) {
  std::string blob = Sign(cap_);
  ASSERT_TRUE(verifier_->Verify(Bytes(blob)).ok());
  ASSERT_TRUE(verifier_->Verify(Bytes(blob)).ok());
  EXPECT_GE(verifier_->cache_hits(), 1u);
  now_ = cap_.expiry_ms;
  auto r = verifier_->Verify(Bytes(blob));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnauthenticated);
  EXPECT_NE(r.status().message().find("expired"), std::string::npos) << r.status().ToString();
}

TEST_F(CapabilityTest, RevokedSessionIsRefusedOthersAreNot) {
  std::string blob = Sign(cap_);
  Capability other = cap_;
  other.session = Uuid::Generate();
  std::string other_blob = Sign(other);
  ASSERT_TRUE(verifier_->Verify(Bytes(blob)).ok());
  verifier_->Revoke(cap_.session, cap_.expiry_ms);
  EXPECT_TRUE(verifier_->IsRevoked(cap_.session));
  auto r = verifier_->Verify(Bytes(blob));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnauthenticated);
  EXPECT_NE(r.status().message().find("revoked"), std::string::npos) << r.status().ToString();
  EXPECT_TRUE(verifier_->Verify(Bytes(other_blob)).ok());
  // Once every capability of the session has expired the entry can go.
  verifier_->PurgeExpiredRevocations();
  EXPECT_TRUE(verifier_->IsRevoked(cap_.session));
  now_ = cap_.expiry_ms + 1;
  verifier_->PurgeExpiredRevocations();
  EXPECT_FALSE(verifier_->IsRevoked(cap_.session));
}

TEST_F(CapabilityTest, AuthorizeChecksPoolContainerAndRights) {
  std::string blob = Sign(cap_);
  auto ok = verifier_->Authorize(Bytes(blob), cap_.pool, cap_.container, kRightRead);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();

  auto write = verifier_->Authorize(Bytes(blob), cap_.pool, cap_.container, kRightWrite);
  ASSERT_FALSE(write.ok());
  EXPECT_EQ(write.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(write.status().message().find("needs '-w---'"), std::string::npos) << write.status().ToString();

  auto wrong_pool = verifier_->Authorize(Bytes(blob), Uuid::Generate(), cap_.container, kRightRead);
  ASSERT_FALSE(wrong_pool.ok());
  EXPECT_EQ(wrong_pool.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(wrong_pool.status().message().find("not pool"), std::string::npos);

  auto wrong_cont = verifier_->Authorize(Bytes(blob), cap_.pool, Uuid::Generate(), kRightRead);
  ASSERT_FALSE(wrong_cont.ok());
  EXPECT_NE(wrong_cont.status().message().find("not container"), std::string::npos);

  Capability pool_cap = cap_;
  pool_cap.container = Uuid();
  std::string pool_blob = Sign(pool_cap);
  EXPECT_TRUE(verifier_->Authorize(Bytes(pool_blob), cap_.pool, Uuid(), kRightRead).ok());
  auto pool_for_cont = verifier_->Authorize(Bytes(pool_blob), cap_.pool, cap_.container, kRightRead);
  ASSERT_FALSE(pool_for_cont.ok());
  EXPECT_EQ(pool_for_cont.status().code(), Status::Code::kPermissionDenied);
}

TEST_F(CapabilityTest, ForgedBlobNeverEntersTheCache) {
  std::string blob = Sign(cap_);
  std::string forged = blob;
  forged[100] = static_cast<char>(forged[100] ^ 0x80);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(verifier_->Verify(Bytes(forged)).ok());
  EXPECT_EQ(verifier_->cache_hits(), 0u);
  EXPECT_EQ(verifier_->cache_misses(), 3u);
}

TEST_F(CapabilityTest, SignRefusesNilIdentities) {
  Capability bad = cap_;
  bad.session = Uuid();
  EXPECT_FALSE(signer_->Sign(bad).ok());
  bad = cap_;
  bad.rights = 0x40;
  EXPECT_FALSE(signer_->Sign(bad).ok());
}

TEST_F(CapabilityTest, ConcurrentVerificationFromManyThreads) {
  std::vector<std::string> blobs;
  for (int i = 0; i < 8; ++i) {
    Capability c = cap_;
    c.session = Uuid::Generate();
    blobs.push_back(Sign(c));
  }
  std::string forged = blobs[0];
  forged[90] = static_cast<char>(forged[90] ^ 1);
  verifier_->Revoke(Capability::Decode(Bytes(blobs[7]))->session, cap_.expiry_ms);
  std::atomic<int> accepted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const std::string& b = (i % 9 == 8) ? forged : blobs[static_cast<size_t>((i + t) % 8)];
        (verifier_->Verify(Bytes(b)).ok() ? accepted : refused).fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  // Per thread: 500 calls, 55 forged, and 1/8 of the other 445 (rounded per
  // thread's offset) on the revoked session.
  EXPECT_EQ(accepted.load() + refused.load(), 2000);
  int expected_refused = 0;
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 500; ++i) {
      if (i % 9 == 8 || (i + t) % 8 == 7) ++expected_refused;
    }
  }
  EXPECT_EQ(refused.load(), expected_refused);
  EXPECT_GT(verifier_->cache_hits(), 0u);
}

TEST(CryptoTest, HmacSha256MatchesRfc4231) {
  std::string key = "Jefe";
  std::string data = "what do ya want for nothing?";
  auto h = HmacSha256::Create(Bytes(key));
  ASSERT_TRUE(h.ok());
  auto mac = h->Compute(Bytes(data));
  ASSERT_TRUE(mac.ok());
  EXPECT_EQ(HexEncode(*mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(CryptoTest, Pbkdf2MatchesRfc7914) {
  std::string salt = "salt";
  auto d = Pbkdf2Sha256("passwd", Bytes(salt), 1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(HexEncode(*d), "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc");
}

TEST(CryptoTest, ConstantTimeEqual) {
  EXPECT_TRUE(ConstantTimeEqual("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abcd"));
}

TEST(RightsTest, ParseAndFormat) {
  EXPECT_EQ(*ParseRights("rw"), kRightRead | kRightWrite);
  EXPECT_EQ(*ParseRights("read,write,admin"), kRightRead | kRightWrite | kRightAdmin);
  EXPECT_EQ(*ParseRights("all"), kAllRights);
  EXPECT_EQ(*ParseRights("r"), kRightRead);
  EXPECT_EQ(RightsToString(kRightRead | kRightDelete), "r--d-");
  auto bad = ParseRights("rx");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos);
  EXPECT_FALSE(ValidateRights(0x20, "acl").ok());
  EXPECT_TRUE(ValidateRights(kAllRights, "acl").ok());
}

}  // namespace
}  // namespace ros2::control

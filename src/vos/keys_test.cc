#include "vos/keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace ros2::vos::keys {
namespace {

TEST(KeysTest, EscapedKeysSortLikeTheirBytes) {
  std::mt19937 rng(42);
  std::vector<std::string> raw;
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 6, '\0');
    for (char& c : s)
      c = static_cast<char>(
          "\x00\x01\xff"
          "ab"[rng() % 5]);
    raw.push_back(s);
  }
  raw.push_back("");
  for (size_t i = 0; i + 1 < raw.size(); ++i) {
    std::string a, b;
    AppendEscaped(&a, raw[i]);
    AppendEscaped(&b, raw[i + 1]);
    EXPECT_EQ(raw[i] < raw[i + 1], a < b) << i;
    EXPECT_EQ(raw[i] == raw[i + 1], a == b) << i;
    std::string_view in = a;
    std::string back;
    ASSERT_TRUE(ConsumeEscaped(&in, &back));
    EXPECT_EQ(back, raw[i]);
    EXPECT_TRUE(in.empty());
  }
}

TEST(KeysTest, ExtendedKeysStayInsideTheirParentRange) {
  // Every tree key below dkey "a" sorts before the successor of "a"'s scope and
  // after the scope itself, even for a dkey "a\0..." or "a\xff".
  ObjectId oid{1, 2};
  std::string scope = TreeKey(DkeyScope(oid, "a"));
  std::string next = PrefixSuccessor(scope);
  for (std::string other : {std::string("a\0", 2), std::string("a\xff"), std::string("b"), std::string("a\x01")}) {
    std::string k = TreeKey(AkeyScope(oid, other, "x"));
    EXPECT_TRUE(k >= next) << "dkey of size " << other.size();
  }
  std::string inside = HeaderKey(AkeyScope(oid, "a", std::string("\xff\xff", 2)));
  EXPECT_TRUE(inside > scope && inside < next);
}

TEST(KeysTest, DkeyScopeSizeIsTheScopesSize) {
  const ObjectId oid{0x0102030405060708, 0x1112131415161718};
  for (std::string_view dkey : {std::string_view("a"), std::string_view("\0\0x\0", 4), std::string_view(""),
                                std::string_view("\x00\x00\x00\x00\x00\x00\x00\x07", 8)}) {
    EXPECT_EQ(DkeyScopeSize(dkey), DkeyScope(oid, dkey).size()) << dkey.size();
  }
}

TEST(KeysTest, TreeKeysRoundTrip) {
  ObjectId oid{0x0102030405060708ULL, 0x1112131415161718ULL};
  std::string scope = AkeyScope(oid, std::string("d\0k", 3), "ak");
  auto p = ParseTreeKey(ExtentKey(scope, 12, 77, 900));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->oid, oid);
  EXPECT_EQ(p->dkey, std::string("d\0k", 3));
  EXPECT_EQ(p->akey, "ak");
  EXPECT_EQ(p->kind, kExtentKind);
  EXPECT_EQ(p->size_class, 12u);
  EXPECT_EQ(p->index, 77u);
  EXPECT_EQ(p->epoch, 900u);
  EXPECT_EQ(p->akey_scope_len, scope.size());
  auto s = ParseTreeKey(SingleKey(scope, 5));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->epoch, 5u);
  EXPECT_FALSE(ParseTreeKey("Tshort").ok());
  EXPECT_FALSE(ParseTreeKey(TreeKey(scope) + "q").ok());
}

TEST(KeysTest, VersionsSortNewestFirstAndExtentsByIndex) {
  std::string scope = AkeyScope(ObjectId{1, 1}, "d", "a");
  EXPECT_LT(SingleKey(scope, 10), SingleKey(scope, 9));
  EXPECT_LT(ExtentKey(scope, 3, 1, 5), ExtentKey(scope, 3, 2, 9));
  EXPECT_LT(ExtentKey(scope, 3, 1, 9), ExtentKey(scope, 3, 1, 5));
  EXPECT_LT(ExtentKey(scope, 3, 9, 9), ExtentKey(scope, 4, 0, 9));
  EXPECT_LT(HeaderKey(scope), SingleKey(scope, ~Epoch{0} - 1));
}

TEST(KeysTest, SizeClassesBoundExtentLengths) {
  EXPECT_EQ(ExtentSizeClass(1), 0);
  EXPECT_EQ(ExtentSizeClass(2), 1);
  EXPECT_EQ(ExtentSizeClass(4096), 12);
  EXPECT_EQ(ExtentSizeClass(4097), 13);
  EXPECT_EQ(ExtentSizeClass(~uint64_t{0}), kMaxSizeClass);
  for (uint64_t n : {uint64_t{1}, uint64_t{3}, uint64_t{4096}, uint64_t{5000}, uint64_t{1} << 40, ~uint64_t{0}}) {
    EXPECT_LE(n, ExtentClassBound(ExtentSizeClass(n))) << n;
  }
}

TEST(KeysTest, PrefixSuccessor) {
  EXPECT_EQ(PrefixSuccessor("ab"), "ac");
  EXPECT_EQ(PrefixSuccessor(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixSuccessor("\xff\xff"), "");
}

}  // namespace
}  // namespace ros2::vos::keys

// The DFS record codecs: round trips, and every validation of the decoders.
#include "dfs/entry_record.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "dfs/filesystem_core.h"

namespace ros2::dfs {
namespace {

EntryRecord SampleFile() {
  EntryRecord r;
  r.mode = S_IFREG | 0640;
  r.oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 0xabcdef, 42);
  r.uid = 1000;
  r.gid = 100;
  r.atime = {1700000000, 1};
  r.mtime = {1700000001, 999999999};
  r.ctime = {1700000002, 0};
  r.chunk_size = 1 << 20;
  return r;
}

void ExpectSame(const EntryRecord& a, const EntryRecord& b) {
  EXPECT_EQ(a.mode, b.mode);
  EXPECT_EQ(a.oid, b.oid);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.gid, b.gid);
  EXPECT_EQ(a.atime.tv_sec, b.atime.tv_sec);
  EXPECT_EQ(a.atime.tv_nsec, b.atime.tv_nsec);
  EXPECT_EQ(a.mtime.tv_sec, b.mtime.tv_sec);
  EXPECT_EQ(a.mtime.tv_nsec, b.mtime.tv_nsec);
  EXPECT_EQ(a.ctime.tv_sec, b.ctime.tv_sec);
  EXPECT_EQ(a.chunk_size, b.chunk_size);
  EXPECT_EQ(a.symlink_target, b.symlink_target);
}

TEST(EntryRecord, FileRoundTripsWithFixedSize) {
  auto bytes = EncodeEntry(SampleFile());
  EXPECT_EQ(bytes.size(), kEntryRecordFixedSize);
  auto back = DecodeEntry(bytes, "t");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSame(SampleFile(), *back);
}

TEST(EntryRecord, SymlinkCarriesItsTarget) {
  EntryRecord r;
  r.mode = S_IFLNK | 0777;
  r.oid = ObjectId{1, 2};
  r.symlink_target = "../some/where/else";
  auto bytes = EncodeEntry(r);
  EXPECT_EQ(bytes.size(), kEntryRecordFixedSize + r.symlink_target.size());
  auto back = DecodeEntry(bytes, "t");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSame(r, *back);
}

TEST(EntryRecord, DecoderRejectsDamage) {
  const auto good = EncodeEntry(SampleFile());
  auto corrupt = [&](auto mutate) {
    auto b = good;
    mutate(b);
    return DecodeEntry(b, "t").status();
  };
  EXPECT_TRUE(DecodeEntry({}, "t").status().IsCorruption());
  EXPECT_TRUE(corrupt([](auto& b) { b.pop_back(); }).IsCorruption());               // short
  EXPECT_TRUE(corrupt([](auto& b) { b.push_back(std::byte{1}); }).IsCorruption());  // trailing
  EXPECT_TRUE(corrupt([](auto& b) { b[0] = std::byte{9}; }).IsCorruption());        // version
  EXPECT_TRUE(corrupt([](auto& b) { b[1] = std::byte{2}; }).IsCorruption());        // unknown flags
  EXPECT_TRUE(corrupt([](auto& b) { b[2] = std::byte{3}; }).IsCorruption());        // target length
  EXPECT_TRUE(corrupt([](auto& b) {
                b[5] = std::byte{0};
                b[6] = std::byte{0};
              }).IsCorruption());                                                 // type bits
  EXPECT_TRUE(corrupt([](auto& b) { b[43] = std::byte{0xff}; }).IsCorruption());  // atime nsec
  EXPECT_TRUE(corrupt([](auto& b) {                                               // chunk size 0
                for (size_t i = 68; i < 76; ++i) b[i] = std::byte{0};
              })
                  .IsCorruption());
  auto st = corrupt([](auto& b) { b[0] = std::byte{9}; });
  EXPECT_NE(st.message().find("version"), std::string::npos) << st.ToString();
}

TEST(EntryRecord, SpecialFilesKeepTypeAndDeviceNumber) {
  for (mode_t type : {S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK}) {
    EntryRecord r;
    r.mode = type | 0640;
    r.oid = ObjectId{3, 4};
    r.rdev = (type == S_IFCHR || type == S_IFBLK) ? 0x10305 : 0;
    auto bytes = EncodeEntry(r);
    EXPECT_EQ(bytes.size(), kEntryRecordFixedSize);
    auto back = DecodeEntry(bytes, "t");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->mode, r.mode);
    EXPECT_EQ(back->rdev, r.rdev);
    EXPECT_EQ(back->chunk_size, 0u);
    EXPECT_FALSE(back->linked);
  }
}

TEST(EntryRecord, LinkStubAndInodeRecordRoundTrip) {
  EntryRecord r = SampleFile();
  r.linked = true;
  r.nlink = 3;
  // The stub: type and object id only.
  auto stub = EncodeEntry(r);
  ASSERT_EQ(stub.size(), kEntryRecordFixedSize);
  EXPECT_EQ(stub, EncodeLinkStub(r));
  auto back = DecodeEntry(stub, "t");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->linked);
  EXPECT_EQ(back->oid, r.oid);
  EXPECT_EQ(back->mode, static_cast<mode_t>(S_IFREG));
  // The inode record: the count and every attribute.
  auto inode = EncodeInode(r);
  EXPECT_EQ(inode.size(), kInodeRecordHeaderSize + kEntryRecordFixedSize);
  auto full = DecodeInode(inode, "t");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_TRUE(full->linked);
  EXPECT_EQ(full->nlink, 3u);
  ExpectSame(SampleFile(), *full);
  // A symlink's target travels in its inode record.
  EntryRecord l;
  l.mode = S_IFLNK | 0777;
  l.oid = ObjectId{5, 6};
  l.symlink_target = "elsewhere";
  l.linked = true;
  l.nlink = 2;
  auto linode = DecodeInode(EncodeInode(l), "t");
  ASSERT_TRUE(linode.ok());
  EXPECT_EQ(linode->symlink_target, "elsewhere");
  // Damage: no count, a stub inside, a directory.
  auto zero = inode;
  zero[0] = zero[1] = zero[2] = zero[3] = std::byte{0};
  EXPECT_TRUE(DecodeInode(zero, "t").status().IsCorruption());
  auto nested = inode;
  nested[kInodeRecordHeaderSize + 1] = std::byte{kEntryFlagLinked};  // a stub inside
  EXPECT_TRUE(DecodeInode(nested, "t").status().IsCorruption());
  EXPECT_TRUE(DecodeInode(std::vector<std::byte>(2), "t").status().IsCorruption());
  EntryRecord dir;
  dir.mode = S_IFDIR | 0755;
  dir.linked = true;
  EXPECT_TRUE(DecodeEntry(EncodeLinkStub(dir), "t").status().IsCorruption());
}

TEST(SuperblockRecord, RoundTripsAndRejectsDamage) {
  SuperblockRecord r;
  r.chunk_size = 4096;
  r.file_class = ObjectClass::kS1;
  r.dir_class = ObjectClass::kSX;
  r.root = RootObjectId(ObjectClass::kSX);
  auto bytes = EncodeSuperblock(r);
  ASSERT_EQ(bytes.size(), kSuperblockRecordSize);
  auto back = DecodeSuperblock(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->chunk_size, 4096u);
  EXPECT_EQ(back->file_class, ObjectClass::kS1);
  EXPECT_EQ(back->dir_class, ObjectClass::kSX);
  EXPECT_EQ(back->root, r.root);

  auto bad = bytes;
  bad[0] = std::byte{0};
  EXPECT_TRUE(DecodeSuperblock(bad).status().IsCorruption());  // magic
  bad = bytes;
  bad[8] = std::byte{7};
  EXPECT_TRUE(DecodeSuperblock(bad).status().IsCorruption());  // layout version
  bad = bytes;
  bad[24] = std::byte{77};
  EXPECT_TRUE(DecodeSuperblock(bad).status().IsCorruption());  // object class
  bad = bytes;
  for (size_t i = 16; i < 24; ++i) bad[i] = std::byte{0};
  EXPECT_TRUE(DecodeSuperblock(bad).status().IsCorruption());  // chunk size 0
  bad = bytes;
  bad.pop_back();
  EXPECT_TRUE(DecodeSuperblock(bad).status().IsCorruption());
}

TEST(ChunkKeys, BigEndianOrderMatchesIndexOrder) {
  EXPECT_EQ(ChunkDkey(1).size(), 8u);
  EXPECT_LT(ChunkDkey(255), ChunkDkey(256));
  EXPECT_LT(ChunkDkey(1), ChunkDkey(uint64_t{1} << 40));
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{300}, ~uint64_t{0}}) {
    auto back = ChunkIndex(ChunkDkey(i));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, i);
  }
  EXPECT_TRUE(ChunkIndex("short").status().IsCorruption());
}

TEST(InodeNumbers, RootIsOneOthersStableAndDistinct) {
  const ObjectId root = RootObjectId(ObjectClass::kSX);
  EXPECT_EQ(InodeNumber(root, root), 1u);
  const ObjectId a{0x0102000000000001ull, 7}, b{0x0102000000000001ull, 8};
  EXPECT_EQ(InodeNumber(a, root), InodeNumber(a, root));
  EXPECT_NE(InodeNumber(a, root), InodeNumber(b, root));
  EXPECT_GT(InodeNumber(a, root), 1u);
}

}  // namespace
}  // namespace ros2::dfs

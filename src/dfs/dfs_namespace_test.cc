// The DFS namespace end to end against a real single-node cluster: mkdir,
// rmdir, unlink, symlinks and paths, rename, readdir, exclusive create, special
// files, hard links, directory times and link counts, over shared memory,
// direct and through ros2-agent (the fixture: dfs_test_fixture.h).
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "dfs/dfs_test_fixture.h"

namespace ros2::dfs {
namespace {

class DfsNamespaceTest : public DfsFixture {};

bool Later(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}

TEST_P(DfsNamespaceTest, MkdirRmdirUnlinkErrors) {
  Entry root = fs_->Root();
  auto d = fs_->Mkdir(root, "d");
  ASSERT_TRUE(d.ok());
  CreateFile(*d, "inner");
  EXPECT_EQ(Errno(fs_->Rmdir(root, "d")), ENOTEMPTY);
  EXPECT_EQ(Errno(fs_->Unlink(root, "d")), EISDIR);
  EXPECT_EQ(Errno(fs_->Rmdir(*d, "inner")), ENOTDIR);
  EXPECT_EQ(Errno(fs_->Unlink(*d, "nothing")), ENOENT);
  EXPECT_EQ(Errno(fs_->Rmdir(root, "nothing")), ENOENT);
  ASSERT_TRUE(fs_->Unlink(*d, "inner").ok());
  EXPECT_EQ(Errno(fs_->Unlink(*d, "inner")), ENOENT);
  ASSERT_TRUE(fs_->Rmdir(root, "d").ok());
  EXPECT_EQ(Errno(fs_->Lookup(root, "d").status()), ENOENT);
  EXPECT_EQ(Errno(fs_->Stat(*d).status()), ENOENT);  // the handle is stale
  // The name can be reused, and the new directory is empty.
  auto d2 = fs_->Mkdir(root, "d");
  ASSERT_TRUE(d2.ok());
  DirAnchor anchor;
  auto page = fs_->Readdir(*d2, anchor, 10);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->empty());
}

TEST_P(DfsNamespaceTest, SymlinksAndPaths) {
  Entry root = fs_->Root();
  auto d = fs_->Mkdir(root, "dir");
  ASSERT_TRUE(d.ok());
  Entry f = CreateFile(*d, "target", "via link");
  auto abs = fs_->Symlink(root, "abs", "/dir");
  ASSERT_TRUE(abs.ok()) << abs.status().ToString();
  auto rel = fs_->Symlink(*d, "rel", "target");
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(*fs_->Readlink(*abs), "/dir");
  auto attr = fs_->Stat(*abs);
  ASSERT_TRUE(attr.ok());
  EXPECT_TRUE(S_ISLNK(attr->mode));
  EXPECT_EQ(attr->size, 4u);
  // Intermediate links are followed; the last one is not.
  auto through = fs_->LookupPath("/abs/target");
  ASSERT_TRUE(through.ok()) << through.status().ToString();
  EXPECT_EQ(through->oid, f.oid);
  auto last = fs_->LookupPath("/dir/rel");
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(last->is_symlink());
  auto dotdot = fs_->LookupPath("/dir/../dir/./target");
  ASSERT_TRUE(dotdot.ok());
  EXPECT_EQ(dotdot->oid, f.oid);
  EXPECT_EQ(Errno(fs_->Readlink(f).status()), EINVAL);
  EXPECT_EQ(Errno(fs_->Symlink(root, "abs", "/x").status()), EEXIST);
  EXPECT_EQ(Errno(fs_->Symlink(root, "empty", "").status()), EINVAL);
  // A loop of links is ELOOP.
  ASSERT_TRUE(fs_->Symlink(root, "l1", "/l2").ok());
  ASSERT_TRUE(fs_->Symlink(root, "l2", "/l1").ok());
  EXPECT_EQ(Errno(fs_->LookupPath("/l1/x").status()), ELOOP);
  ASSERT_TRUE(fs_->Unlink(root, "abs").ok());
  EXPECT_EQ(Errno(fs_->LookupPath("/abs").status()), ENOENT);
}

TEST_P(DfsNamespaceTest, RenameCases) {
  Entry root = fs_->Root();
  auto a = fs_->Mkdir(root, "a");
  auto b = fs_->Mkdir(root, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  Entry f = CreateFile(*a, "f", "one");
  // Within a directory.
  ASSERT_TRUE(fs_->Rename(*a, "f", *a, "g").ok());
  EXPECT_EQ(Errno(fs_->Lookup(*a, "f").status()), ENOENT);
  EXPECT_EQ(fs_->Lookup(*a, "g")->oid, f.oid);
  // Across directories.
  ASSERT_TRUE(fs_->Rename(*a, "g", *b, "h").ok());
  EXPECT_EQ(Errno(fs_->Lookup(*a, "g").status()), ENOENT);
  auto h = fs_->Lookup(*b, "h");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(ReadAll(*h), "one");
  // Over an existing file: the old one's data goes away.
  Entry other = CreateFile(*b, "other", "two");
  ASSERT_TRUE(fs_->Rename(*b, "other", *b, "h").ok());
  auto h2 = fs_->Lookup(*b, "h");
  ASSERT_TRUE(h2.ok());
  EXPECT_EQ(h2->oid, other.oid);
  EXPECT_EQ(ReadAll(*h2), "two");
  // RENAME_NOREPLACE.
  CreateFile(*b, "x", "x");
  EXPECT_EQ(Errno(fs_->Rename(*b, "x", *b, "h", kRenameNoReplace)), EEXIST);
  ASSERT_TRUE(fs_->Rename(*b, "x", *a, "x", kRenameNoReplace).ok());
  EXPECT_TRUE(fs_->Lookup(*a, "x").ok());
  // Type conflicts and directories.
  auto sub = fs_->Mkdir(*a, "sub");
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(Errno(fs_->Rename(*a, "x", *a, "sub")), EISDIR);
  EXPECT_EQ(Errno(fs_->Rename(*a, "sub", *a, "x")), ENOTDIR);
  EXPECT_EQ(Errno(fs_->Rename(root, "a", *a, "inside")), EINVAL);
  EXPECT_EQ(Errno(fs_->Rename(root, "b", root, "a")), ENOTEMPTY);
  auto empty = fs_->Mkdir(root, "empty");
  ASSERT_TRUE(empty.ok());
  ASSERT_TRUE(fs_->Rename(root, "b", root, "empty").ok());  // over an empty directory
  auto moved = fs_->LookupPath("/empty/h");
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(Errno(fs_->Rename(root, "nothing", root, "z")), ENOENT);
  EXPECT_EQ(Errno(fs_->Rename(root, "a", root, std::string(300, 'z'))), ENAMETOOLONG);
  EXPECT_EQ(Errno(fs_->Rename(root, "a", root, "z", 0x80)), EINVAL);
}

TEST_P(DfsNamespaceTest, ReaddirOfTwoThousandEntriesInSmallPages) {
  Entry root = fs_->Root();
  auto dir = fs_->Mkdir(root, "big");
  ASSERT_TRUE(dir.ok());
  constexpr int kEntries = 2000;
  // Create through several threads (each its own data-plane worker).
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kEntries; i += 4) {
        const std::string name = fmt::format("entry-{:05d}", i);
        Status st =
            i % 10 == 0 ? fs_->Mkdir(*dir, name).status() : fs_->Open(*dir, name, O_CREAT | O_EXCL | O_RDWR).status();
        if (!st.ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  std::multiset<std::string> seen;
  DirAnchor anchor;
  int pages = 0;
  while (!anchor.eof) {
    auto page = fs_->Readdir(*dir, anchor, 37);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_LE(page->size(), 37u);
    for (const DirEntry& e : *page) {
      seen.insert(e.name);
      const int index = std::stoi(e.name.substr(6));
      EXPECT_EQ(S_ISDIR(e.mode), index % 10 == 0) << e.name;
      EXPECT_GT(e.ino, 1u);
    }
    ASSERT_LT(++pages, 1000);
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kEntries));
  for (int i = 0; i < kEntries; ++i) EXPECT_EQ(seen.count(fmt::format("entry-{:05d}", i)), 1u) << i;
  EXPECT_EQ(Errno(fs_->Readdir(*fs_->Lookup(*dir, "entry-00001"), anchor, 10).status()), ENOTDIR);
}

TEST_P(DfsNamespaceTest, ExclusiveCreateRaceHasOneWinner) {
  Entry root = fs_->Root();
  for (int round = 0; round < 20; ++round) {
    const std::string name = fmt::format("race-{}", round);
    std::atomic<int> wins{0}, exists{0}, other{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&] {
        Status st = fs_->Open(root, name, O_CREAT | O_EXCL | O_RDWR).status();
        if (st.ok())
          ++wins;
        else if (Errno(st) == EEXIST)
          ++exists;
        else
          ++other;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(wins.load(), 1) << name;
    EXPECT_EQ(exists.load(), 1) << name;
    EXPECT_EQ(other.load(), 0) << name;
  }
  // Plain O_CREAT racing: both open the same file.
  std::vector<ObjectId> oids(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      auto f = fs_->Open(root, "shared", O_CREAT | O_RDWR);
      if (f.ok()) oids[t] = f->oid;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(oids[0], oids[1]);
  EXPECT_NE(oids[0], ObjectId{});
}

TEST_P(DfsNamespaceTest, DirectoryTimesFollowTheirEntries) {
  Entry root = fs_->Root();
  auto dir = fs_->Mkdir(root, "d");
  ASSERT_TRUE(dir.ok());
  auto other = fs_->Mkdir(root, "o");
  ASSERT_TRUE(other.ok());
  auto before = fs_->Stat(*dir);
  ASSERT_TRUE(before.ok());
  // Every change of entries moves mtime and ctime; a failed one does not.
  std::vector<std::pair<std::string, std::function<Status()>>> ops = {
      {"create", [&] { return fs_->Open(*dir, "f", O_CREAT | O_RDWR).status(); }},
      {"mkdir", [&] { return fs_->Mkdir(*dir, "sub").status(); }},
      {"symlink", [&] { return fs_->Symlink(*dir, "l", "f").status(); }},
      {"mknod", [&] { return fs_->Mknod(*dir, "p", S_IFIFO | 0644).status(); }},
      {"rename in", [&] { return fs_->Rename(*dir, "f", *dir, "g"); }},
      {"unlink", [&] { return fs_->Unlink(*dir, "l"); }},
      {"rmdir", [&] { return fs_->Rmdir(*dir, "sub"); }},
      {"rename out", [&] { return fs_->Rename(*dir, "g", *other, "g"); }},
  };
  for (auto& [what, op] : ops) {
    ASSERT_TRUE(op().ok()) << what;
    auto after = fs_->Stat(*dir);
    ASSERT_TRUE(after.ok());
    EXPECT_TRUE(Later(after->mtime, before->mtime)) << what;
    EXPECT_TRUE(Later(after->ctime, before->ctime)) << what;
    before = after;
  }
  EXPECT_FALSE(fs_->Mkdir(*dir, "p").ok());
  auto same = fs_->Stat(*dir);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->mtime.tv_nsec, before->mtime.tv_nsec);
  // Explicit times stick (tar restores them) until the next change.
  SetAttrArgs set;
  set.mask = kSetMtime | kSetAtime;
  set.mtime = {1000, 1};
  set.atime = {1000, 2};
  ASSERT_TRUE(fs_->SetAttr(*dir, set).ok());
  auto lookup = fs_->LookupWithAttr(root, "d");
  ASSERT_TRUE(lookup.ok());
  EXPECT_EQ(lookup->second.mtime.tv_sec, 1000);
  // The times value is no entry: listing skips it, and the emptied directory goes.
  DirAnchor anchor;
  auto names = fs_->Readdir(*dir, anchor, 100);
  ASSERT_TRUE(names.ok());
  ASSERT_EQ(names->size(), 1u);
  EXPECT_EQ((*names)[0].name, "p");
  ASSERT_TRUE(fs_->Unlink(*dir, "p").ok());
  EXPECT_TRUE(fs_->Rmdir(root, "d").ok());
  // The root has times of its own too.
  auto root_before = fs_->Stat(root);
  ASSERT_TRUE(fs_->Mkdir(root, "x").ok());
  auto root_after = fs_->Stat(root);
  EXPECT_TRUE(Later(root_after->mtime, root_before->mtime));
}

TEST_P(DfsNamespaceTest, SpecialFilesAreEntriesWithTypeAndRdev) {
  Entry root = fs_->Root();
  auto chr = fs_->Mknod(root, "null", S_IFCHR | 0666, 0x103);
  ASSERT_TRUE(chr.ok()) << chr.status().ToString();
  auto attr = fs_->Stat(*chr);
  ASSERT_TRUE(attr.ok());
  EXPECT_TRUE(S_ISCHR(attr->mode));
  EXPECT_EQ(attr->rdev, 0x103u);
  EXPECT_EQ(attr->size, 0u);
  for (mode_t type : {S_IFIFO, S_IFSOCK, S_IFBLK}) {
    auto e = fs_->Mknod(root, fmt::format("n{:o}", type), type | 0600, 7);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    auto a = fs_->Stat(*e);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->mode & S_IFMT, type);
    EXPECT_EQ(a->rdev, type == S_IFBLK ? 7u : 0u);
  }
  EXPECT_EQ(Errno(fs_->Mknod(root, "null", S_IFCHR | 0666, 1).status()), EEXIST);
  EXPECT_EQ(Errno(fs_->Mknod(root, "dir", S_IFDIR | 0755).status()), EINVAL);
  auto reg = fs_->Mknod(root, "plain", S_IFREG | 0600);
  ASSERT_TRUE(reg.ok());
  EXPECT_TRUE(reg->is_file());
  ASSERT_TRUE(fs_->Unlink(root, "null").ok());
  EXPECT_EQ(Errno(fs_->Lookup(root, "null").status()), ENOENT);
}

TEST_P(DfsNamespaceTest, HardLinksShareOneInodeRecord) {
  Entry root = fs_->Root();
  auto sub = fs_->Mkdir(root, "sub");
  ASSERT_TRUE(sub.ok());
  Entry f = CreateFile(root, "f", "linked data");
  auto g = fs_->Link(f, *sub, "g");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto fa = fs_->Stat(f);
  auto ga = fs_->Stat(*g);
  ASSERT_TRUE(fa.ok() && ga.ok()) << fa.status().ToString() << ga.status().ToString();
  EXPECT_EQ(fa->ino, ga->ino);
  EXPECT_EQ(fa->nlink, 2u);
  EXPECT_EQ(ga->size, 11u);
  EXPECT_EQ(ReadAll(*g), "linked data");
  // Attributes are shared: chmod through one name shows through the other.
  SetAttrArgs chmod;
  chmod.mask = kSetMode;
  chmod.mode = 0600;
  ASSERT_TRUE(fs_->SetAttr(*g, chmod).ok());
  auto looked = fs_->LookupWithAttr(root, "f");
  ASSERT_TRUE(looked.ok());
  EXPECT_EQ(looked->second.mode & 07777, 0600u);
  EXPECT_EQ(looked->second.nlink, 2u);
  // A third name, a rename of a stub, errors.
  ASSERT_TRUE(fs_->Link(*g, root, "h").ok());
  EXPECT_EQ(fs_->Stat(f)->nlink, 3u);
  ASSERT_TRUE(fs_->Rename(*sub, "g", *sub, "g2").ok());
  EXPECT_EQ(Errno(fs_->Link(f, root, "h").status()), EEXIST);
  EXPECT_EQ(fs_->Stat(f)->nlink, 3u);  // the failed link gave its count back
  EXPECT_EQ(Errno(fs_->Link(*sub, root, "subdir").status()), EACCES);
  // Renaming one name over another of the same entry changes nothing.
  ASSERT_TRUE(fs_->Rename(root, "h", root, "f").ok());
  EXPECT_EQ(fs_->Stat(f)->nlink, 3u);
  // Names go one by one; the data stays until the last; a handle of a removed
  // name still reaches the entry through the others.
  ASSERT_TRUE(fs_->Unlink(root, "f").ok());
  auto via_old = fs_->Stat(f);
  ASSERT_TRUE(via_old.ok()) << via_old.status().ToString();
  EXPECT_EQ(via_old->nlink, 2u);
  ASSERT_TRUE(fs_->Unlink(root, "h").ok());
  auto last = fs_->Lookup(*sub, "g2");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(fs_->Stat(*last)->nlink, 1u);
  EXPECT_EQ(ReadAll(*last), "linked data");
  // Truncate and writes through the last name, then its removal frees all.
  ASSERT_TRUE(fs_->Truncate(*last, 6).ok());
  EXPECT_EQ(ReadAll(*last), "linked");
  ASSERT_TRUE(fs_->Unlink(*sub, "g2").ok());
  EXPECT_EQ(Errno(fs_->Stat(*last).status()), ENOENT);
  ASSERT_TRUE(fs_->Rmdir(root, "sub").ok());
  // Symlinks and special files link too.
  auto sym = fs_->Symlink(root, "s", "target");
  ASSERT_TRUE(sym.ok());
  auto sym2 = fs_->Link(*sym, root, "s2");
  ASSERT_TRUE(sym2.ok());
  EXPECT_EQ(*fs_->Readlink(*sym2), "target");
  // Remount: the layout reads back.
  fs_ = MountOrDie({});
  auto again = fs_->LookupWithAttr(fs_->Root(), "s2");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->second.nlink, 2u);
  EXPECT_TRUE(S_ISLNK(again->second.mode));
}

TEST_P(DfsNamespaceTest, DirectoryWithoutTimesValueReadsAsBefore) {
  // A directory made by a build without directory times values: its entry
  // record only, written straight into the root object.
  Entry root = fs_->Root();
  ASSERT_TRUE(fs_->Mkdir(root, "probe").ok());  // a record in this layout's form
  auto probe = fs_->LookupWithAttr(root, "probe");
  ASSERT_TRUE(probe.ok());
  if (Offload()) {  // the raw objects are out of a host's reach through the agent
    EXPECT_EQ(cont_->OpenObject(root.oid).status().code(), Status::Code::kNotSupported);
    return;
  }
  auto obj = cont_->OpenObject(root.oid);
  ASSERT_TRUE(obj.ok());
  auto raw = obj->Get("probe", "e");
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE(obj->Put("old", "e", *raw).ok());  // same record under another name: no times value behind it
  auto sub_obj = cont_->OpenObject(probe->first.oid);
  ASSERT_TRUE(sub_obj.ok());
  ASSERT_TRUE(sub_obj->PunchDkey(".").ok());
  auto old = fs_->LookupWithAttr(root, "old");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->second.mtime.tv_sec, probe->second.mtime.tv_sec);
  EXPECT_EQ(old->second.nlink, 2u);  // a directory without subdirectories
  DirAnchor anchor;
  auto listing = fs_->Readdir(old->first, anchor, 10);
  ASSERT_TRUE(listing.ok());
  EXPECT_TRUE(listing->empty());
  ASSERT_TRUE(fs_->Rmdir(root, "old").ok());
}

TEST_P(DfsNamespaceTest, DirectoryLinkCountIsTwoPlusSubdirectories) {
  const Entry root = fs_->Root();
  auto links = [&](const Entry& dir) {
    auto a = fs_->Stat(dir);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? a->nlink : 0u;
  };
  auto lookup = [&](const Entry& dir, std::string_view name) {
    auto e = fs_->Lookup(dir, name);
    EXPECT_TRUE(e.ok()) << name << ": " << e.status().ToString();
    return e.ok() ? *e : Entry{};
  };
  const uint32_t root_links = links(root);
  EXPECT_GE(root_links, 2u);
  auto a = fs_->Mkdir(root, "a", 0755);
  auto b = fs_->Mkdir(root, "b", 0755);
  ASSERT_TRUE(a.ok() && b.ok());
  CreateFile(root, "file");  // files do not count
  EXPECT_EQ(links(root), root_links + 2);
  EXPECT_EQ(links(*a), 2u);
  ASSERT_TRUE(fs_->Mkdir(*a, "x", 0755).ok());
  EXPECT_EQ(links(*a), 3u);
  // The count comes with the attributes of a lookup too.
  auto with_attr = fs_->LookupWithAttr(root, "a");
  ASSERT_TRUE(with_attr.ok());
  EXPECT_EQ(with_attr->second.nlink, 3u);
  // Across directories, within one, and over an empty directory.
  ASSERT_TRUE(fs_->Rename(*a, "x", *b, "x").ok());
  EXPECT_EQ(links(*a), 2u);
  EXPECT_EQ(links(*b), 3u);
  ASSERT_TRUE(fs_->Rename(*b, "x", *b, "y").ok());
  EXPECT_EQ(links(*b), 3u);
  ASSERT_TRUE(fs_->Mkdir(*b, "z", 0755).ok());
  EXPECT_EQ(links(*b), 4u);
  ASSERT_TRUE(fs_->Rename(*b, "y", *b, "z").ok());
  EXPECT_EQ(links(*b), 3u);
  ASSERT_TRUE(fs_->Rename(root, "b", *a, "b", kRenameNoReplace).ok());
  EXPECT_EQ(links(root), root_links + 1);
  EXPECT_EQ(links(*a), 3u);
  // A failed mkdir or rmdir changes nothing; rmdir counts down.
  EXPECT_EQ(Errno(fs_->Mkdir(root, "a", 0755).status()), EEXIST);
  EXPECT_EQ(Errno(fs_->Rmdir(*a, "b")), ENOTEMPTY);
  EXPECT_EQ(links(*a), 3u);
  const Entry moved = lookup(*a, "b");
  ASSERT_TRUE(fs_->Rmdir(moved, "z").ok());
  EXPECT_EQ(links(moved), 2u);
  ASSERT_TRUE(fs_->Rmdir(*a, "b").ok());
  EXPECT_EQ(links(*a), 2u);
  ASSERT_TRUE(fs_->Rmdir(root, "a").ok());
  EXPECT_EQ(links(root), root_links);
}

INSTANTIATE_TEST_SUITE_P(Shm, DfsNamespaceTest, ::testing::Values("shm"), [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Offload, DfsNamespaceTest, ::testing::Values("offload-shm"), [](const auto&) {
  return std::string("offload_shm");
});

}  // namespace
}  // namespace ros2::dfs

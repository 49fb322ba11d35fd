import fsspec
import pytest

import ros2  # noqa: F401  registers ros2:// (ros2.fsspec, imported on first use)


def test_fsspec_open_ls_cat_rm(cluster, fs):
    opts = {"data_dir": cluster["data_dir"]}
    base = "ros2://%s/%s/fsspec-t" % (cluster["pool"], cluster["container"])
    ffs = fsspec.filesystem("ros2", **opts)
    ffs.mkdir(base + "/sub")
    with fsspec.open(base + "/a.txt", "w", **opts) as f:
        f.write("hello fsspec\n")
    with fsspec.open(base + "/sub/b.bin", "wb", **opts) as f:
        f.write(b"\x00\x01\x02")
    assert fs.read_bytes("/fsspec-t/a.txt") == b"hello fsspec\n"  # the same DFS namespace
    with fsspec.open(base + "/a.txt", "r", **opts) as f:
        assert f.read() == "hello fsspec\n"
    names = ffs.ls(base, detail=False)
    assert names == ["p/c/fsspec-t/a.txt", "p/c/fsspec-t/sub"]
    detail = {d["name"]: d for d in ffs.ls(base)}
    assert detail["p/c/fsspec-t/a.txt"]["size"] == 13 and detail["p/c/fsspec-t/sub"]["type"] == "directory"
    assert ffs.cat(base + "/a.txt") == b"hello fsspec\n"
    assert ffs.cat_file(base + "/a.txt", start=6, end=12) == b"fsspec"
    assert ffs.info(base + "/sub/b.bin")["size"] == 3
    assert sorted(ffs.find(base)) == ["p/c/fsspec-t/a.txt", "p/c/fsspec-t/sub/b.bin"]
    ffs.rm(base + "/sub/b.bin")
    assert not ffs.exists(base + "/sub/b.bin")
    ffs.rm(base, recursive=True)
    assert not fs.exists("/fsspec-t")
    with pytest.raises(FileNotFoundError):
        ffs.cat(base + "/gone")

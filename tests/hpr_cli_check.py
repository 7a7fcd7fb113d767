#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks for tests/hpr_cli_test.sh: compare hpr's JSON with the files it
read, independently parsed here.

  hpr_cli_check.py probe FILE.json      THP, mTHP, khugepaged, hugetlb pools,
                                        cgroup memory limit, mounts, features
  hpr_cli_check.py pool FILE.json       pools
  hpr_cli_check.py stat FILE.json HOLD  regions vs what hpr_hold printed
  hpr_cli_check.py size FILE.json LABEL ok|fail   one backend's verdict
  hpr_cli_check.py fix FILE.json LABEL  print the first fix command of LABEL
  hpr_cli_check.py hostile              a process whose comm and memfd names
                                        carry terminal escapes; prints "ready"
  hpr_cli_check.py clean FILE           FILE has no control bytes but newlines
  hpr_cli_check.py hostile-json FILE.json  hpr stat --json of it: the names
                                        come back exactly (JSON escapes)
"""
import glob
import json
import os
import re
import sys

THP = "/sys/kernel/mm/transparent_hugepage"
HTLB = "/sys/kernel/mm/hugepages"
errors = []


def check(cond, what):
    if not cond:
        errors.append(what)


def read(path):
    with open(path) as f:
        return f.read().strip()


def mode(path):
    s = read(path)
    m = re.search(r"\[([^\]]*)\]", s)
    return m.group(1) if m else s.split()[0]


def octal_unescape(s):
    return re.sub(r"\\([0-3][0-7][0-7])", lambda m: chr(int(m.group(1), 8)), s)


def mountinfo():
    out = []
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        sep = f.index("-")
        out.append({"root": f[3], "mnt": octal_unescape(f[4]), "fstype": f[sep + 1],
                    "source": f[sep + 2], "super": f[sep + 3] if len(f) > sep + 3 else ""})
    return out


def opts(s):
    d = {}
    for o in s.split(","):
        k, _, v = o.partition("=")
        d[k] = v
    return d


def pools_match(pools):
    sizes = sorted(int(re.match(r"hugepages-(\d+)kB", os.path.basename(d)).group(1)) << 10
                   for d in glob.glob(HTLB + "/hugepages-*kB"))
    check([p["page_size"] for p in pools] == sizes, "pool sizes %s != sysfs %s" %
          ([p["page_size"] for p in pools], sizes))
    for p in pools:
        d = "%s/hugepages-%dkB" % (HTLB, p["page_size"] >> 10)
        for key, f in (("total", "nr_hugepages"), ("free", "free_hugepages"),
                       ("reserved", "resv_hugepages"), ("surplus", "surplus_hugepages"),
                       ("overcommit", "nr_overcommit_hugepages")):
            v = int(read(d + "/" + f))
            check(p[key] == v, "pool %d %s: hpr says %d, %s has %d" %
                  (p["page_size"], key, p[key], f, v))
        for n in p["nodes"]:
            nd = "/sys/devices/system/node/node%d/hugepages/hugepages-%dkB" % (
                n["node"], p["page_size"] >> 10)
            for key, f in (("total", "nr_hugepages"), ("free", "free_hugepages"),
                           ("surplus", "surplus_hugepages")):
                v = int(read(nd + "/" + f))
                check(n[key] == v, "node %d pool %s: hpr %d, sysfs %d" %
                      (n["node"], key, n[key], v))
        nodes = sorted(int(os.path.basename(x)[4:]) for x in
                       glob.glob("/sys/devices/system/node/node[0-9]*"))
        check([n["node"] for n in p["nodes"]] == nodes, "pool nodes %s != %s" %
              ([n["node"] for n in p["nodes"]], nodes))


def probe(j):
    t = j["thp"]
    check(t["enabled"] == mode(THP + "/enabled"), "thp enabled")
    check(t["defrag"] == mode(THP + "/defrag"), "thp defrag")
    check(t["shmem_enabled"] == mode(THP + "/shmem_enabled"), "shmem_enabled")
    check(t["pmd_size"] == int(read(THP + "/hpage_pmd_size")), "pmd size")
    mthp = {}
    for d in glob.glob(THP + "/hugepages-*kB"):
        kb = int(re.search(r"(\d+)kB", d).group(1))
        sh = d + "/shmem_enabled"
        en = d + "/enabled"
        mthp[kb << 10] = (mode(en) if os.path.exists(en) else "-",
                          mode(sh) if os.path.exists(sh) else None)
    got = {m["size"]: (m["enabled"], m["shmem_enabled"]) for m in t["mthp"]}
    check(got == mthp, "mTHP %s != sysfs %s" % (got, mthp))
    for k, v in t["khugepaged"].items():
        real = int(read(THP + "/khugepaged/" + k))
        if k in ("full_scans", "pages_collapsed"):  # counters move on
            check(v <= real, "khugepaged %s %d > %d" % (k, v, real))
        else:
            check(v == real, "khugepaged %s: %d != %d" % (k, v, real))
    check(len(t["khugepaged"]) >= 7, "khugepaged settings missing")
    mi = open("/proc/meminfo").read()
    hs = int(re.search(r"Hugepagesize:\s+(\d+)", mi).group(1)) << 10
    check(j["hugetlb"]["default_page_size"] == hs, "default huge page size")
    pools_match(j["hugetlb"]["pools"])
    # memory cgroup: find it ourselves
    mounts = mountinfo()
    want = None
    for line in open("/proc/self/cgroup"):
        hid, ctl, path = line.rstrip("\n").split(":", 2)
        for m in mounts:
            if ctl and m["fstype"] == "cgroup" and "memory" in ctl.split(",") and \
                    "memory" in opts(m["super"]):
                rel = path[len(m["root"]):] if m["root"] != "/" and \
                    path.startswith(m["root"]) else path
                f = m["mnt"] + (rel if rel != "/" else "") + "/memory.limit_in_bytes"
                if os.path.exists(f) and want is None:
                    v = int(read(f))
                    want = (1, None if v >= 1 << 62 else v)
            if not ctl and m["fstype"] == "cgroup2":
                f = m["mnt"] + (path if path != "/" else "") + "/memory.max"
                if os.path.exists(f) and want is None:
                    v = read(f)
                    want = (2, None if v == "max" else int(v))
    mem = j["cgroup"]["memory"]
    if want is None:
        check(not mem["found"], "memory cgroup found by hpr, not by check")
    else:
        check(mem["found"] and mem["version"] == want[0] and mem["limit"] == want[1],
              "memory cgroup: hpr %s, check %s" % (mem, want))
    # mounts: every tmpfs/hugetlbfs, in order, with its options
    exp = [m for m in mounts if m["fstype"] in ("tmpfs", "hugetlbfs")]
    check([m["mount_point"] for m in j["mounts"]] == [m["mnt"] for m in exp],
          "mounts %s != %s" % ([m["mount_point"] for m in j["mounts"]],
                               [m["mnt"] for m in exp]))
    for a, b in zip(j["mounts"], exp):
        o = opts(b["super"])
        check(a["options"] == b["super"], "options of %s" % b["mnt"])
        if b["fstype"] == "tmpfs":
            check(a["huge"] == o.get("huge", "never"), "huge= of %s" % b["mnt"])
        else:
            ps = o.get("pagesize")
            if ps:
                n = int(ps[:-1]) << {"K": 10, "M": 20, "G": 30}[ps[-1]]
                check(a["pagesize"] == n, "pagesize of %s" % b["mnt"])
        check(a["size_option"] == o.get("size"), "size= of %s" % b["mnt"])
        st = os.statvfs(b["mnt"])
        check(a["size"] == st.f_blocks * st.f_frsize, "size of %s" % b["mnt"])
    f = j["features"]
    k = j["kernel"]
    ver = (k["major"], k["minor"])
    check(ver == tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", os.uname().release).groups()),
          "kernel version")
    check(f["populate_write"] == (ver >= (5, 14)), "populate_write vs kernel version")
    check(f["collapse"] == (ver >= (6, 1)), "collapse vs kernel version")
    check(f["pagemap_scan"] == (ver >= (6, 7)), "pagemap_scan vs kernel version")
    check(f["psi"] == os.path.exists("/proc/pressure/memory"), "psi")
    if ver < (5, 17):
        check(not f["anon_vma_name"], "anon_vma_name before 5.17")


def stat(j, hold):
    want = {}
    for line in open(hold):
        p = line.split()
        if p[0] == "region":
            want[p[1]] = {"backend": p[2], "start": int(p[3], 16), "size": int(p[4]),
                          "resident": int(p[5]), "huge_mapped": int(p[6])}
    got = {r["name"]: r for r in j["regions"]}
    for name, w in want.items():
        if w["backend"] == "thp" and not j["anon_vma_names"]:
            check(name not in got, "thp region %s listed without anon VMA names" % name)
            check(j["note"] and "CONFIG_ANON_VMA_NAME" in j["note"], "no note on anon names")
            check(j["unnamed_anon_huge"] >= w["huge_mapped"], "unnamed anon huge")
            continue
        check(name in got, "region %s not listed" % name)
        if name not in got:
            continue
        r = got[name]
        for k in ("backend", "size", "resident", "huge_mapped"):
            check(r[k] == w[k], "%s %s: hpr stat %s, the process says %s" % (name, k, r[k], w[k]))
        check(int(r["start"], 16) == w["start"], "%s start" % name)
        check(sum(r["nodes"].values()) == w["resident"], "%s node bytes %s" % (name, r["nodes"]))
    for name in got:
        check(name in want, "unexpected region %s" % name)


def find(j, label):
    for b in j["size_check"]["backends"]:
        if b["label"] == label:
            return b
    errors.append("no backend %s in %s" % (label, [b["label"] for b in j["size_check"]["backends"]]))
    return None


# Names a hostile process gives its memfds (hpr stat lists "hpr:" memfds):
# an OSC title change, a screen clear, a C1 CSI (U+009B in UTF-8).
HOSTILE_COMM = "\x1b[31mevil\x07"
HOSTILE_NAMES = [b"\x1b]0;pwned\x07\x1b[2Jx", b"c1\xc2\x9b31m"]


def hostile():
    import mmap
    import time
    with open("/proc/self/comm", "w") as f:
        f.write(HOSTILE_COMM)
    maps = []
    for nm in HOSTILE_NAMES:
        fd = os.memfd_create(b"hpr:" + nm)
        os.ftruncate(fd, 1 << 20)
        m = mmap.mmap(fd, 1 << 20)
        m[0] = 1
        maps.append(m)
    print("ready", flush=True)
    time.sleep(3600)


def clean(fn):
    data = open(fn, "rb").read()
    bad = sorted({b for b in data if (b < 0x20 and b != 0x0a) or b == 0x7f})
    check(not bad, "%s has control bytes %s" % (fn, [hex(b) for b in bad]))
    text = data.decode("utf-8", "replace")
    c1 = sorted({hex(ord(c)) for c in text if 0x80 <= ord(c) < 0xa0})
    check(not c1, "%s has C1 control characters %s" % (fn, c1))


def hostile_json(j):
    check(j["comm"] == HOSTILE_COMM, "comm %r" % j["comm"])
    got = sorted(r["name"] for r in j["regions"])
    want = sorted(n.decode() for n in HOSTILE_NAMES)
    check(got == want, "names %r, want %r" % (got, want))


def main():
    if sys.argv[1] == "hostile":
        hostile()
        return
    cmd, fn = sys.argv[1], sys.argv[2]
    if cmd == "clean":
        clean(fn)
        for e in errors:
            print("CHECK FAILED: " + e, file=sys.stderr)
        sys.exit(1 if errors else 0)
    j = json.load(open(fn))
    if cmd == "probe":
        probe(j)
    elif cmd == "pool":
        pools_match(j["pools"])
    elif cmd == "stat":
        stat(j, sys.argv[3])
    elif cmd == "size":
        b = find(j, sys.argv[3])
        if b:
            check(b["ok"] == (sys.argv[4] == "ok"), "%s: expected %s, got %s" % (sys.argv[3], sys.argv[4], b))
    elif cmd == "hostile-json":
        hostile_json(j)
    elif cmd == "fix":
        b = find(j, sys.argv[3])
        if b and b["fix"]:
            print(b["fix"][0].split("   (")[0])
        elif b:
            errors.append("%s has no fix" % sys.argv[3])
    for e in errors:
        print("CHECK FAILED: " + e, file=sys.stderr)
    sys.exit(1 if errors else 0)


main()

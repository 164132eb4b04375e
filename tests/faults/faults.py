#!/usr/bin/env python3
"""Fault scenarios for tessera (tests/faults/README.md): one scenario per run, named on the
command line. Two hosts are two network namespaces joined by a veth pair, each rank started in
its host's namespace with a hostname of its own (a UTS namespace):

    ip netns exec NS unshare --uts sh -c 'hostname hX; exec fault_rank ...'

Every scenario asserts what it can fail on: results right; each survivor's error within
DEADLINE_S of the fault, naming its rank, a peer and the operation; no /dev/shm entry and no
descriptor left behind (fault_rank counts its own descriptors after the abort). Exit 0: passed,
1: failed, 77: skipped (the reason on stdout)."""

import argparse
import contextlib
import os
import random
import re
import select
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
DEADLINE_S = 10.0  # every survivor's error within this many seconds of the fault
# With revocation notices (TESSERA_REVOKE_NOTICES, default on) a SIGKILL reaches every survivor
# through the first one that sees it: each error within this many seconds (the figure to reach is
# 1 s; the bound leaves room for a loaded 2-core CI machine), and a shrink after it within this.
REVOKED_S = 3.0
SHRINK_S = 5.0
GROW_S = 10.0  # kill, shrink, a replacement process, grow and its checked calls: within this
IFNAME = "tsr0"  # the veth end's name inside each namespace
SUBNET = "10.201.77"
NS_PREFIX = "tsrf"  # namespaces are tsrf<pid>a / tsrf<pid>b (the pid of this driver)


class Skip(Exception):
    pass


class Fail(Exception):
    pass


def run(argv, check=True, timeout=30):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise Fail(f"{' '.join(argv)} failed ({p.returncode}): {p.stdout.strip()}")
    return p


# ---- hosts: network namespaces ----------------------------------------------------------------

def remove_stale_namespaces():
    """Namespaces of earlier runs whose driver died without cleaning up (ctest's kill on timeout
    cannot be trapped): the driver's pid is in the name."""
    p = run(["ip", "netns", "list"], check=False)
    for line in p.stdout.splitlines():
        m = re.match(rf"({NS_PREFIX}(\d+)[ab])\b", line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            run(["ip", "netns", "del", m.group(1)], check=False)


class Hosts:
    """Two hosts: namespaces a and b, a veth pair between them (SUBNET.1 and SUBNET.2)."""

    def __init__(self):
        tag = str(os.getpid())
        self.ns = [f"{NS_PREFIX}{tag}a", f"{NS_PREFIX}{tag}b"]
        self.hostname = [f"tsrf-host-a-{tag}", f"tsrf-host-b-{tag}"]
        self.addr = [f"{SUBNET}.1", f"{SUBNET}.2"]
        self.veth = [f"tf{tag}a", f"tf{tag}b"]
        self.made = []
        self.relay = None

    def create(self, lossy=None):
        """lossy=(delay_ms, loss): the hosts are joined by lossy_link.py (TUN devices and a
        forwarding process) instead of a veth pair."""
        if os.geteuid() != 0:
            raise Skip("network namespaces need root (this is uid %d)" % os.geteuid())
        if shutil.which("ip") is None or shutil.which("unshare") is None:
            raise Skip("no `ip` (iproute2) or no `unshare` (util-linux) on PATH")
        remove_stale_namespaces()
        for ns in self.ns:
            p = run(["ip", "netns", "add", ns], check=False)
            if p.returncode != 0:
                raise Skip(f"cannot make a network namespace (ip netns add): {p.stdout.strip()}")
            self.made.append(ns)
        if lossy is not None:
            self.start_relay(*lossy)
        else:
            p = run(["ip", "link", "add", self.veth[0], "type", "veth", "peer", "name",
                     self.veth[1]], check=False)
            if p.returncode != 0:
                raise Skip(f"cannot make a veth pair: {p.stdout.strip()}")
            for i, ns in enumerate(self.ns):
                run(["ip", "link", "set", self.veth[i], "netns", ns])
                run(["ip", "-n", ns, "link", "set", self.veth[i], "name", IFNAME])
        for i, ns in enumerate(self.ns):
            run(["ip", "-n", ns, "addr", "add", f"{self.addr[i]}/24", "dev", IFNAME])
            run(["ip", "-n", ns, "link", "set", IFNAME, "up"])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        # A UTS namespace must work too, or every rank would share this host's name.
        p = run(["ip", "netns", "exec", self.ns[0], "unshare", "--uts", "sh", "-c",
                 f"hostname {self.hostname[0]} && hostname"], check=False)
        if p.returncode != 0 or p.stdout.strip() != self.hostname[0]:
            raise Skip(f"cannot give a namespace a hostname (unshare --uts): {p.stdout.strip()}")
        # The link is up once each side reaches the other.
        deadline = time.monotonic() + 10
        while shutil.which("ping") is not None and run(
                ["ip", "netns", "exec", self.ns[0], "ping", "-c1", "-W1", self.addr[1]],
                check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise Fail(f"{self.ns[0]} does not reach {self.addr[1]} over the veth pair")

    def start_relay(self, delay_ms, loss):
        if not os.path.exists("/dev/net/tun"):
            raise Skip("no sch_netem in this kernel and no /dev/net/tun for lossy_link.py")
        relay = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lossy_link.py")
        self.relay = subprocess.Popen(
            [sys.executable, relay, self.ns[0], self.ns[1], IFNAME, str(delay_ms), str(loss),
             "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # READY, or its error and EOF when it fails.
        if not select.select([self.relay.stdout], [], [], 10)[0]:
            raise Fail("lossy_link.py said nothing within 10 s")
        line = self.relay.stdout.readline()
        if line.strip() != "READY":
            rest = self.relay.stdout.read()
            raise Fail(f"lossy_link.py did not start: {line}{rest}")

    def destroy(self):
        if self.relay is not None:
            self.relay.terminate()
            try:
                self.relay.wait(10)
            except subprocess.TimeoutExpired:
                self.relay.kill()
                self.relay.wait()
            self.relay = None
        for ns in self.made:
            pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            run(["ip", "netns", "del", ns], check=False)
        self.made = []

    def wrap(self, host, argv):
        return ["ip", "netns", "exec", self.ns[host], "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', self.hostname[host]] + argv

    def link(self, host, state):
        run(["ip", "-n", self.ns[host], "link", "set", IFNAME, state])

    def netem(self, spec):
        """tc netem on both ends of the link; False (nothing changed) where the kernel has no
        sch_netem, the tc binary is missing or refuses."""
        if shutil.which("tc") is None:
            return False
        for ns in self.ns:
            p = run(["tc", "-n", ns, "qdisc", "add", "dev", IFNAME, "root", "netem"] + spec,
                    check=False)
            if p.returncode != 0:
                print(f"tc netem is not available here ({p.stdout.strip()})")
                for n in self.ns:
                    run(["tc", "-n", n, "qdisc", "del", "dev", IFNAME, "root"], check=False)
                return False
        return True


# ---- ranks ------------------------------------------------------------------------------------

class Rank:
    """One fault_rank process; its stdout events and stderr (the library's log) are collected."""

    def __init__(self, rank, host, argv, env):
        self.rank, self.host = rank, host
        self.events, self.log = [], []
        self.cv = threading.Condition()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, text=True, start_new_session=True)
        self.readers = [threading.Thread(target=self._read, args=(self.proc.stdout, True)),
                        threading.Thread(target=self._read, args=(self.proc.stderr, False))]
        for t in self.readers:
            t.daemon = True
            t.start()

    def _read(self, stream, events):
        for line in stream:
            with self.cv:
                (self.events if events else self.log).append(line.rstrip("\n"))
                self.cv.notify_all()

    def find(self, prefix, **match):
        for line in self.events:
            if line.startswith(prefix + " "):
                ev = parse(line)
                if all(ev.get(k) == v for k, v in match.items()):
                    return ev
        return None

    def wait_for(self, prefix, deadline, **match):
        """The first event `prefix` (with fields `match`), or None once the process has ended
        without it or the deadline passed."""
        with self.cv:
            while True:
                ev = self.find(prefix, **match)
                if ev is not None:
                    return ev
                if self.proc.poll() is not None and not any(t.is_alive() for t in self.readers):
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(min(left, 0.1))

    def finish(self, seconds):
        """Waits for the exit (the streams read to their end); kills it past `seconds`."""
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)
            self.proc.wait()
            for t in self.readers:
                t.join(5)
            return False
        for t in self.readers:
            t.join(5)
        return True

    def kill(self, sig):
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            pass


def parse(line):
    """'KIND k=v k=v ... msg=<rest>' into a dict (msg keeps its spaces)."""
    head, _, msg = line.partition(" msg=")
    fields = head.split()
    ev = {"kind": fields[0]}
    for f in fields[1:]:
        k, _, v = f.partition("=")
        ev[k] = v
    if _:
        ev["msg"] = msg
    return ev


class World:
    """nranks ranks over the hosts (rank r on host r * hosts // nranks), or all on this host."""

    def __init__(self, args, hosts, nranks, env, tmp, mode=None):
        self.args, self.hosts, self.nranks, self.tmp = args, hosts, nranks, tmp
        self.id_file = os.path.join(tmp, f"id-{time.monotonic_ns()}")
        self.ranks = []
        nhosts = 2 if hosts else 1
        for r in range(nranks):
            host = r * nhosts // nranks
            argv = [args.rank_bin, str(r), str(nranks), self.id_file,
                    (mode or {}).get(r, "run")]
            full_env = dict(os.environ)
            full_env.update(env)
            if hosts:
                argv = hosts.wrap(host, argv)
            self.ranks.append(Rank(r, host, argv, full_env))

    def add_rank(self, rank, host, id_file, mode, env):
        """One more process (a replacement) with the same environment, on `host`."""
        argv = [self.args.rank_bin, str(rank), str(self.nranks), id_file, mode]
        full_env = dict(os.environ)
        full_env.update(env)
        if self.hosts:
            argv = self.hosts.wrap(host, argv)
        self.ranks.append(Rank(rank, host, argv, full_env))
        return self.ranks[-1]

    def wait_all(self, prefix, seconds, ranks=None, **match):
        deadline = time.monotonic() + seconds
        for rk in ranks if ranks is not None else self.ranks:
            if rk.wait_for(prefix, deadline, **match) is None:
                raise Fail(f"rank {rk.rank} printed no {prefix} {match} within {seconds} s"
                           f"{describe(rk)}")

    def close(self):
        for rk in self.ranks:
            if rk.proc.poll() is None:
                rk.kill(signal.SIGKILL)
        for rk in self.ranks:
            rk.finish(10)
        if os.environ.get("FAULTS_VERBOSE"):
            for rk in self.ranks:
                print(describe(rk, 200))


def describe(rk, lines=15):
    tail = "\n".join(rk.log[-lines:])
    return (f"\n  rank {rk.rank} (exit {rk.proc.poll()}) events: {rk.events}\n"
            f"  its log:\n{tail}")


# ---- checks -----------------------------------------------------------------------------------

def shm_entries():
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


# Other programs that may run beside a test (Open MPI's shared-memory segments): not ours.
FOREIGN_SHM = re.compile(r"^(vader_segment|sm_segment|psm2|open_mpi|ompi)")


def check_shm(before):
    left = sorted(e for e in shm_entries() - before if not FOREIGN_SHM.match(e))
    if left:
        raise Fail(f"/dev/shm entries left behind: {left}")
    print(f"/dev/shm: nothing new left ({len(before)} entries before, the same after)")


def check_fds(world, ranks):
    for rk in ranks:
        ev = rk.find("FDS")
        if ev is None:
            raise Fail(f"rank {rk.rank} printed no descriptor count{describe(rk)}")
        if ev["leaked"] != "none":
            raise Fail(f"rank {rk.rank} left descriptors open after the abort: {ev['leaked']} "
                       f"(before init {ev['before']}, after {ev['after']})")
    counts = ", ".join(f"rank {rk.rank} {rk.find('FDS')['before']}->{rk.find('FDS')['after']}"
                       for rk in ranks)
    print(f"descriptors: none left ({counts}; the difference is the process-wide fd server)")


# An error names the operation: the collective (any spelling), the bootstrap step, or the
# transport operation that failed.
OPERATION = re.compile(
    r"\b(all-?reduce|all-?gather|reduce-?scatter|broadcast|init|bootstrap|join(ing)?|semaphore|"
    r"flush|put|get|atomicadd|signal|waits?|send|recv)\b", re.IGNORECASE)


def notices_on():
    return os.environ.get("TESSERA_REVOKE_NOTICES", "1") not in ("0", "false", "no", "off")


def check_survivors(world, survivors, t_fault, what, expect_op=True, limit=DEADLINE_S):
    """Each survivor: an error within `limit` seconds of t_fault naming its rank, a peer and the
    operation; then its exit, and no descriptor left. Prints a table."""
    deadline = time.monotonic() + DEADLINE_S + 30
    rows, problems = [], []
    for rk in survivors:
        ev = rk.wait_for("ERROR", deadline)
        if ev is None:
            problems.append(f"rank {rk.rank}: no error{describe(rk)}")
            continue
        took = float(ev["t"]) - t_fault
        msg = ev.get("msg", "")
        rows.append((rk.rank, rk.host, ev["code"], took, msg))
        if ev["code"] in ("none", "setup"):
            problems.append(f"rank {rk.rank}: no call failed ({msg})")
        if took > limit:
            problems.append(f"rank {rk.rank}: the error came {took:.2f} s after {what}, later "
                            f"than {limit} s")
        if not re.search(rf"\brank {rk.rank}\b", msg):
            problems.append(f"rank {rk.rank}: the error does not name rank {rk.rank}: {msg}")
        others = [m for m in re.findall(r"\branks?(?:\(s\))? (\d+)", msg) if int(m) != rk.rank]
        if not (re.search(r"\b(peer|root)\b", msg) or others):
            problems.append(f"rank {rk.rank}: the error names no peer: {msg}")
        if expect_op and not OPERATION.search(msg):
            problems.append(f"rank {rk.rank}: the error names no operation: {msg}")
    print(f"\n{what}: time from the fault to each survivor's error")
    print(f"{'rank':>4} {'host':>4} {'code':>28} {'seconds':>8}  error")
    for r, h, code, took, msg in rows:
        print(f"{r:>4} {h:>4} {code:>28} {took:>8.3f}  {msg}")
    for rk in survivors:
        if not rk.finish(DEADLINE_S + 20):
            problems.append(f"rank {rk.rank}: still running {DEADLINE_S + 20} s after its error "
                            f"(abort hangs?){describe(rk)}")
        ab = rk.find("ABORT")
        if ab is not None:
            print(f"rank {rk.rank}: tsrCommAbort returned {ab['result']} in {ab['seconds']} s")
        sh = rk.find("SHRINK")
        if sh is not None:
            print(f"rank {rk.rank}: tsrCommShrink returned {sh['result']} in {sh['seconds']} s, "
                  f"size {sh['size']}, all-reduce right: {sh['right']}")
            if sh["result"] != "success" or sh["right"] != "1" or \
                    int(sh["size"]) != len(survivors):
                problems.append(f"rank {rk.rank}: the shrink failed or its all-reduce was "
                                f"wrong: {sh}")
            elif float(sh["seconds"]) > SHRINK_S:
                problems.append(f"rank {rk.rank}: the shrink took {sh['seconds']} s, more than "
                                f"{SHRINK_S} s")
        de = rk.find("DESTROY")
        if de is not None:
            print(f"rank {rk.rank}: tsrCommDestroy returned {de['result']} in {de['seconds']} s")
            if de["result"] != "success":
                problems.append(f"rank {rk.rank}: tsrCommDestroy after the fault: {de}")
    if problems:
        raise Fail("\n".join(problems))
    check_fds(world, survivors)


def check_ok(world, seconds):
    problems = []
    for rk in world.ranks:
        if not rk.finish(seconds):
            problems.append(f"rank {rk.rank} did not finish within {seconds} s{describe(rk)}")
        elif rk.proc.returncode != 0 or rk.find("OK") is None:
            problems.append(f"rank {rk.rank} failed (exit {rk.proc.returncode}){describe(rk)}")
    if problems:
        raise Fail("\n".join(problems))
    check_fds(world, world.ranks)


def transports_seen(world):
    """'rank R -> peer P: connected over <transport> (<where>)' lines of the TRANSPORT log, as
    '<where>: <transport>' per pair."""
    seen = {}
    for rk in world.ranks:
        for line in rk.log:
            m = re.search(r"rank (\d+) -> peer (\d+): connected over (\w+) \((.*)\)$", line)
            if m:
                seen[(int(m.group(1)), int(m.group(2)))] = f"{m.group(4)}: {m.group(3)}"
    return seen


def algorithms_seen(world):
    algos = set()
    for rk in world.ranks:
        for line in rk.log:
            m = re.search(r"(\w+) \d+ B n=\d+ hosts=(\d+): (\w+)", line)
            if m:
                algos.add(f"{m.group(1)}:{m.group(3)} (hosts={m.group(2)})")
    return sorted(algos)


def host_env(extra=None):
    env = {"TESSERA_SOCKET_IFNAME": IFNAME, "TESSERA_DEBUG": "WARN"}
    env.update(extra or {})
    return env


INFO_ENV = {"TESSERA_DEBUG": "INFO", "TESSERA_DEBUG_SUBSYS": "TRANSPORT,TUNING,COLL,INIT"}


# ---- scenarios --------------------------------------------------------------------------------

def need_ucx(args):
    if not args.ucx:
        raise Skip("this build has no UCX, and ranks on two hosts need the ucx transport")


@contextlib.contextmanager
def two_hosts(args):
    """Two hosts (network namespaces joined by a link; ranks between them need ucx), removed
    afterwards whatever happened."""
    need_ucx(args)
    hosts = Hosts()
    try:
        hosts.create()
        yield hosts
    finally:
        hosts.destroy()


def scenario_hosts(args, tmp):
    """2 hosts x 2 ranks with nothing wrong: host detection sees two hosts without
    TESSERA_HOST_ID, shm within a host, ucx between them, and the tuner's default and the
    hierarchical algorithms give right results."""
    with two_hosts(args) as hosts:
        for algo in ("", "hier", "ring"):
            env = host_env(INFO_ENV)
            env["FAULT_ITERS"] = "8"
            env["FAULT_COUNT"] = str(1 << 16)
            if algo:
                env["TESSERA_ALGO"] = algo
            before = shm_entries()
            w = World(args, hosts, 4, env, tmp)
            try:
                check_ok(w, 60)
            finally:
                w.close()
            check_shm(before)
            seen = transports_seen(w)
            print(f"TESSERA_ALGO={algo or '(tuner)'}: all 4 ranks right over 8 calls")
            for pair, why in sorted(seen.items()):
                print(f"  rank {pair[0]} -> peer {pair[1]}: {why}")
            for a in algorithms_seen(w):
                print(f"  tuner: {a}")
            for (r, p), why in seen.items():
                same = (r < 2) == (p < 2)
                want = "shm" if same else "ucx"
                if not why.endswith(want):
                    raise Fail(f"rank {r} -> peer {p} ({'same' if same else 'other'} host): "
                               f"{why}, expected {want}")
            if not any((r < 2) != (p < 2) for r, p in seen):
                raise Fail("no connection between the two hosts was logged")
            engines = [line for rk in w.ranks for line in rk.log if "engine ready" in line]
            for line in engines[:1]:
                print(f"  {line[line.find('rank'):]}")
            if not engines or not all("(2 hosts" in line for line in engines):
                raise Fail(f"the communicators did not see 2 hosts: {engines}")
            if algo == "hier" and not any(":hier" in a for a in algorithms_seen(w)):
                raise Fail(f"TESSERA_ALGO=hier, yet the tuner picked {algorithms_seen(w)}")


def scenario_hosts_same_id(args, tmp):
    """One TESSERA_HOST_ID for both namespaces (one host, as far as the ids go): shm's abstract
    sockets do not cross network namespaces, so selection picks ucx between them; forcing shm
    fails every rank with a sentence, and nothing hangs."""
    with two_hosts(args) as hosts:
        env = host_env(INFO_ENV)
        env.update({"FAULT_ITERS": "4", "FAULT_COUNT": str(1 << 14), "TESSERA_HOST_ID": "one-box"})
        w = World(args, hosts, 4, env, tmp)
        try:
            check_ok(w, 60)
        finally:
            w.close()
        seen = transports_seen(w)
        for pair, why in sorted(seen.items()):
            print(f"  rank {pair[0]} -> peer {pair[1]}: {why}")
        for (r, p), why in seen.items():
            if (r < 2) != (p < 2) and not why.endswith("ucx"):
                raise Fail(f"rank {r} -> peer {p} across namespaces: {why}, expected ucx")
        env = host_env({"FAULT_ITERS": "4", "FAULT_COUNT": str(1 << 14),
                        "TESSERA_HOST_ID": "one-box", "TESSERA_TRANSPORT": "shm"})
        t0 = time.time()
        w = World(args, hosts, 4, env, tmp)
        try:
            # Each rank fails: those that connect across the namespaces with the sentence, the
            # others when a peer that failed leaves.
            # A setup error of the first call: it names the pair, not the collective.
            check_survivors(w, w.ranks, t0, "TESSERA_TRANSPORT=shm across namespaces",
                            expect_op=False)
        finally:
            w.close()
        msgs = [rk.find("ERROR")["msg"] for rk in w.ranks]
        if not any("network namespace" in m for m in msgs):
            raise Fail(f"no rank says why shm cannot cross the namespaces: {msgs}")


def into_the_calls():
    """After every rank is ready, a random pause (0-300 ms; FAULTS_SEED repeats one) so the fault
    lands in a different phase of a call each run: the handshake, a transfer, a wait."""
    seed = int(os.environ.get("FAULTS_SEED", str(time.monotonic_ns() % 100000)))
    pause = random.Random(seed).uniform(0, 0.3)
    print(f"fault {pause * 1000:.0f} ms into the steady state (FAULTS_SEED={seed})")
    time.sleep(pause)


def scenario_kill(args, tmp, hosts, victim, env_extra=None, shrink=False, grow=False):
    env = host_env(env_extra) if hosts else dict(env_extra or {})
    if shrink or grow:
        env["FAULT_SHRINK_EXCLUDE"] = str(victim)
    if grow:
        env["FAULT_GROW"] = "1"
    env["FAULT_MAX_SECONDS"] = "60"
    before = shm_entries()
    w = World(args, hosts, 4, env, tmp)
    try:
        w.wait_all("STAGE", 60, stage="ready")
        into_the_calls()
        t0 = time.time()
        w.ranks[victim].kill(signal.SIGKILL)
        survivors = [rk for rk in w.ranks if rk.rank != victim]
        if grow:
            # A launcher restarts the lost process at once, on the victim's host; it waits for
            # the survivors' grow id and joins as the last rank of the grown communicator.
            replacement = w.add_rank(3, w.ranks[victim].host, w.id_file + ".grow", "grow", env)
        check_survivors(w, survivors, t0, f"rank {victim} SIGKILLed mid-collective",
                        limit=REVOKED_S if notices_on() else DEADLINE_S)
        if grow:
            check_grown(w, survivors + [replacement], t0)
    finally:
        w.close()
    check_shm(before)


def check_grown(world, ranks, t_fault):
    """The 3 survivors (shrunk to ranks 0..2) and the replacement (rank 3) grew back to 4 ranks,
    and every one ran its calls right, all within GROW_S of the fault. Prints a table."""
    problems, rows = [], []
    replacement = ranks[3]
    if not replacement.finish(DEADLINE_S + 30):
        problems.append(f"the replacement did not finish{describe(replacement)}")
    for i, rk in enumerate(ranks):
        ev = rk.find("GROW")
        who = f"rank {rk.rank}" if i < 3 else "the replacement"
        if ev is None:
            problems.append(f"{who}: no GROW line{describe(rk)}")
            continue
        took = float(ev["t"]) - t_fault
        rows.append((who, i, ev["result"], ev["seconds"], ev["calls"], ev["right"], took,
                     ev.get("msg", "")))
        if ev["result"] != "success" or ev["right"] != "1" or ev["size"] != "4":
            problems.append(f"{who}: the grow or its calls failed: {ev}")
        elif took > GROW_S:
            problems.append(f"{who}: right results {took:.2f} s after the fault, later than "
                            f"{GROW_S} s")
    print("\nkill, shrink, replace, grow: each rank of the grown communicator")
    print(f"{'who':>15} {'new rank':>8} {'result':>8} {'grow s':>7} {'calls':>5} {'right':>5} "
          f"{'fault->done s':>13}")
    for who, i, res, secs, calls, right, took, msg in rows:
        print(f"{who:>15} {i:>8} {res:>8} {secs:>7} {calls:>5} {right:>5} {took:>13.3f}  {msg}")
    if problems:
        raise Fail("\n".join(problems))
    check_fds(world, ranks[3:])


def scenario_kill_shm(args, tmp):
    """4 ranks on this host (shm); rank 2 SIGKILLed mid-collective."""
    scenario_kill(args, tmp, None, 2)


def scenario_kill_shrink_shm(args, tmp):
    """kill_shm, then the 3 survivors shrink without rank 2, check an all-reduce on the result
    and destroy (not abort) the failed communicator."""
    scenario_kill(args, tmp, None, 2, shrink=True)


def scenario_kill_shrink_ucx(args, tmp):
    """kill_ucx, then the survivors shrink without rank 3 (ucx between the hosts), check an
    all-reduce and destroy the failed communicator: its ucx teardown must not touch the dead."""
    with two_hosts(args) as hosts:
        scenario_kill(args, tmp, hosts, 3, shrink=True)


def scenario_kill_grow_shm(args, tmp):
    """kill_shrink_shm, and a replacement process started at once: the 3 survivors' shrunk
    communicator and the newcomer grow back to 4 ranks (tsrCommGrow) and run 16 calls of the
    cycle (all-reduce, all-gather, reduce-scatter, broadcast from each root), each checked."""
    scenario_kill(args, tmp, None, 2, grow=True)


def scenario_kill_grow_ucx(args, tmp):
    """kill_grow_shm with 2 hosts x 2 ranks: rank 3 (host b) SIGKILLed, its replacement started
    on host b, so the grown communicator uses ucx between the hosts again."""
    with two_hosts(args) as hosts:
        scenario_kill(args, tmp, hosts, 3, grow=True)


def scenario_kill_ucx(args, tmp):
    """2 hosts x 2 ranks; rank 3 SIGKILLed: rank 2 loses it over shm, ranks 0 and 1 over ucx."""
    with two_hosts(args) as hosts:
        scenario_kill(args, tmp, hosts, 3)


def scenario_link_down(args, tmp):
    """2 hosts x 2 ranks; host b's end of the link goes down mid-call: every rank fails."""
    with two_hosts(args) as hosts:
        env = host_env({"FAULT_MAX_SECONDS": "60", "TESSERA_TRANSPORT_TIMEOUT": "5"})
        before = shm_entries()
        w = World(args, hosts, 4, env, tmp)
        try:
            w.wait_all("STAGE", 60, stage="ready")
            into_the_calls()
            t0 = time.time()
            hosts.link(1, "down")
            check_survivors(w, w.ranks, t0, "host b's link down mid-call")
        finally:
            w.close()
        check_shm(before)


def scenario_netem(args, tmp):
    """2 hosts x 2 ranks over a link with 5% loss and 10 ms delay each way: right results."""
    need_ucx(args)
    hosts = Hosts()
    env = host_env({"FAULT_ITERS": "12", "FAULT_COUNT": str(1 << 16)})
    try:
        hosts.create()
        t0 = time.monotonic()
        w = World(args, hosts, 4, env, tmp)
        try:
            check_ok(w, 60)
        finally:
            w.close()
        clean = time.monotonic() - t0
        how = "tc netem on both ends of the veth pair"
        if not hosts.netem(["delay", "10ms", "loss", "5%"]):
            hosts.destroy()
            hosts = Hosts()
            hosts.create(lossy=(10, 0.05))
            how = "lossy_link.py (TUN devices, 10 ms and 5% loss each way)"
        print(f"link: {how}")
        before = shm_entries()
        t0 = time.monotonic()
        w = World(args, hosts, 4, env, tmp)
        try:
            check_ok(w, 100)
        finally:
            w.close()
        print(f"delay 10 ms, loss 5%: 12 calls right on all 4 ranks in "
              f"{time.monotonic() - t0:.1f} s, {clean:.1f} s on the clean link (init included)")
        check_shm(before)
    finally:
        hosts.destroy()


def root_connections(hosts, pid):
    """Established TCP connections of process `pid` in host a's namespace."""
    p = run(["ip", "netns", "exec", hosts.ns[0], "ss", "-tnpH", "state", "established"],
            check=False)
    return sum(1 for line in p.stdout.splitlines() if f"pid={pid}," in line)


def scenario_root_death(args, tmp):
    """The process holding the TCP bootstrap root (rank 0, host a) dies while ranks 1..3 wait in
    tsrCommInitRank for the table of ranks."""
    need_ucx(args)
    if shutil.which("ss") is None:
        raise Skip("no `ss` (iproute2) to see that the ranks reached the root")
    hosts = Hosts()
    try:
        hosts.create()
        before = shm_entries()
        w = World(args, hosts, 4, host_env(), tmp, mode={0: "hold"})
        try:
            w.wait_all("STAGE", 30, ranks=w.ranks[:1], stage="hold")
            w.wait_all("STAGE", 30, ranks=w.ranks[1:], stage="joining")
            # The three are inside init once the root holds their connections.
            deadline = time.monotonic() + 20
            while root_connections(hosts, w.ranks[0].proc.pid) < 3:
                if time.monotonic() > deadline:
                    raise Fail("ranks 1..3 did not connect to the bootstrap root within 20 s")
                time.sleep(0.02)  # polls the socket table: nothing to wait on
            t0 = time.time()
            w.ranks[0].kill(signal.SIGKILL)
            check_survivors(w, w.ranks[1:], t0, "the bootstrap root (rank 0) SIGKILLed in init")
        finally:
            w.close()
        check_shm(before)
    finally:
        hosts.destroy()


def scenario_sigstop(args, tmp):
    """2 hosts x 2 ranks; rank 1 SIGSTOPped past the transport deadline (4 s here): the others
    fail by the deadline, not later."""
    need_ucx(args)
    hosts = Hosts()
    try:
        hosts.create()
        env = host_env({"FAULT_MAX_SECONDS": "60", "TESSERA_TRANSPORT_TIMEOUT": "4"})
        before = shm_entries()
        w = World(args, hosts, 4, env, tmp)
        try:
            w.wait_all("STAGE", 60, stage="ready")
            into_the_calls()
            t0 = time.time()
            w.ranks[1].kill(signal.SIGSTOP)
            survivors = [rk for rk in w.ranks if rk.rank != 1]
            check_survivors(w, survivors, t0, "rank 1 SIGSTOPped")
        finally:
            w.ranks[1].kill(signal.SIGKILL)
            w.close()
        check_shm(before)
    finally:
        hosts.destroy()


SCENARIOS = {
    "hosts": scenario_hosts,
    "hosts_same_id": scenario_hosts_same_id,
    "kill_grow_shm": scenario_kill_grow_shm,
    "kill_grow_ucx": scenario_kill_grow_ucx,
    "kill_shm": scenario_kill_shm,
    "kill_shrink_shm": scenario_kill_shrink_shm,
    "kill_shrink_ucx": scenario_kill_shrink_ucx,
    "kill_ucx": scenario_kill_ucx,
    "link_down": scenario_link_down,
    "netem": scenario_netem,
    "root_death": scenario_root_death,
    "sigstop": scenario_sigstop,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--rank-bin", required=True, help="the fault_rank executable")
    ap.add_argument("--ucx", type=int, default=1, help="1 if the library was built with UCX")
    args = ap.parse_args()
    if not os.access(args.rank_bin, os.X_OK):
        print(f"FAILED: {args.rank_bin} is not an executable (build the fault_rank target)")
        return 1

    # Namespaces and processes go however the driver ends: SIGTERM/SIGINT become an exception
    # that unwinds through the scenario's cleanup.
    def interrupted(sig, _frame):
        raise Fail(f"interrupted by signal {sig}")

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    tmp = tempfile.mkdtemp(prefix="tessera-faults-")
    start = time.monotonic()
    try:
        SCENARIOS[args.scenario](args, tmp)
    except Skip as e:
        print(f"SKIPPED: {e}")
        return SKIP
    except Fail as e:
        print(f"FAILED: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASSED in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
